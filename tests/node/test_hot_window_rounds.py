"""The hot window's puts from concurrent callers share pipelined round trips: every
put lands once, in its own slot, whatever round carried it (8 threads into one conversation too, and
8 threads replaying the same puts); a round whose script the server does not know loads it and is
replayed (every put is an upsert); a round with an error reply, or whose connection the server
closed, leaves the next round working (lab.store.hot.script_rounds). Nothing about speed is asserted."""
from __future__ import annotations

import threading
import uuid

import pytest
from hot_records import hot_record
import redis

from lab.errors import HotWindowError
from lab.store.hot.redis_window import _member

pytestmark = pytest.mark.node
CALLERS = 8
PUTS_EACH = 40


def _threads(target):
    start = threading.Barrier(CALLERS)
    errors = []

    def caller(i: int) -> None:
        start.wait()
        try:
            target(i)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
    threads = [threading.Thread(target=caller, args=(i,)) for i in range(CALLERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a caller still running after 120 s"
    assert not errors, errors


def _put_concurrently(window, tenant, conversations):
    def caller(i: int) -> None:
        for n in range(PUTS_EACH):
            # callers 0-3 share one conversation (interleaved seqs), the others write their own
            conversation = conversations[0] if i < 4 else conversations[i]
            assert window.put(hot_record(tenant, conversation, 1 + i + CALLERS * n))
    _threads(caller)


def test_concurrent_puts_each_land_once_in_their_slot(window):
    tenant, conversations = uuid.uuid4(), [uuid.uuid4() for _ in range(CALLERS)]
    _put_concurrently(window, tenant, conversations)
    shared = window.range(tenant, conversations[0], low=1, high=10**6, newest_first=False, limit=10**4)
    assert [c.conversation_seq for c in shared] == sorted(1 + i + CALLERS * n for i in range(4)
                                                            for n in range(PUTS_EACH))
    assert all(c.payload_or_ciphertext == b"body %d" % c.conversation_seq for c in shared)
    for i in range(4, CALLERS):
        got = window.range(tenant, conversations[i], low=1, high=10**6, newest_first=False, limit=10**4)
        assert [c.conversation_seq for c in got] == [1 + i + CALLERS * n for n in range(PUTS_EACH)]


def test_a_round_the_server_has_no_script_for_loads_it_and_is_replayed(window):
    """As after a Redis restart or SCRIPT FLUSH: the pipelined EVALSHA answers NOSCRIPT. The script
    object is made to name a script the server never saw (no SCRIPT FLUSH on a shared Redis) and a
    round of three puts is run as concurrent callers' puts are."""
    for rounds in window._rounds:
        rounds.sha = "0" * 40
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    cutoff = window._cutoff_ms(None)
    items = [(window.key(tenant, conversation), [f"{seq:020d}", _member(hot_record(tenant, conversation, seq)),
                                                  window.window_seconds * 1000, cutoff, window.trim_per_write])
             for seq in (1, 2, 3)]
    assert len(window._put_round(items)) == 3
    assert window._rounds[0].sha != "0" * 40
    got = window.range(tenant, conversation, low=1, high=10, newest_first=False, limit=10)
    assert [c.conversation_seq for c in got] == [1, 2, 3]


def _members(window, tenant, conversation):
    return window.client.zrange(window.key(tenant, conversation), 0, -1, withscores=True)


def test_eight_threads_into_one_conversation_lose_and_duplicate_nothing(window):
    """Every member once, scored by its seq, in seq order (the design's order: conversation_seq),
    with its own body; the rounds carried more than one put each (the puts were grouped)."""
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    rounds_before, timed_before, ns_before = window._puts.rounds, window.puts_timed, window.put_ns
    requests_before = window.requests

    def caller(i: int) -> None:
        for n in range(PUTS_EACH):
            assert window.put(hot_record(tenant, conversation, 1 + i + CALLERS * n))
    _threads(caller)
    # a request counted per round, none lost to rounds of several lanes counting at once
    assert window.requests - requests_before == window._puts.rounds - rounds_before
    members = _members(window, tenant, conversation)
    seqs = [int(member[:20]) for member, _ in members]
    assert seqs == list(range(1, CALLERS * PUTS_EACH + 1))  # none lost, none twice, in seq order
    assert [int(score) for _, score in members] == seqs
    got = window.range(tenant, conversation, low=1, high=10**6, newest_first=False, limit=10**4)
    assert [(c.conversation_seq, c.payload_or_ciphertext) for c in got] == [(s, b"body %d" % s) for s in seqs]
    assert window._puts.rounds - rounds_before <= CALLERS * PUTS_EACH
    assert window.puts_timed - timed_before == CALLERS * PUTS_EACH  # every put timed, none lost to a race
    assert window.put_ns > ns_before


def test_eight_threads_replaying_the_same_puts_land_each_once(window):
    """A put is an upsert: the same 40 messages put by 8 threads at once leave 40 members, one per seq."""
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    records = [hot_record(tenant, conversation, seq) for seq in range(1, PUTS_EACH + 1)]
    _threads(lambda i: [window.put(r) for r in (records if i % 2 else records[::-1])])
    members = _members(window, tenant, conversation)
    assert [int(member[:20]) for member, _ in members] == list(range(1, PUTS_EACH + 1))


def test_an_error_reply_mid_round_fails_the_round_and_the_next_round_works(window):
    """A round of three calls whose second the script rejects: the error is raised (typed), the
    calls around it ran, and the connection, which read every reply, serves the next round."""
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    cutoff = window._cutoff_ms(None)

    def item(seq, trim=window.trim_per_write):
        return (window.key(tenant, conversation), [f"{seq:020d}", _member(hot_record(tenant, conversation, seq)),
                                                   window.window_seconds * 1000, cutoff, trim])
    with pytest.raises(HotWindowError) as caught:
        window._put_round([item(1), item(2, trim="not a number"), item(3)])
    assert isinstance(caught.value.__cause__, redis.ResponseError)
    connection = window._rounds[0]._connection
    assert connection is not None  # kept: still in step
    assert window._put_round([item(4)]) == [1]
    assert window._rounds[0]._connection is connection
    assert [int(m[:20]) for m, _ in _members(window, tenant, conversation)] == [1, 2, 3, 4]


def test_a_round_after_the_server_closed_its_connection_reconnects(window):
    """The server drops the puts' connection (CLIENT KILL of its own id, nothing else on the shared
    Redis): the next put still lands."""
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    assert window.put(hot_record(tenant, conversation, 1))
    connection = window._rounds[0]._connection  # a lone caller's puts ride lane 0
    connection.send_command("CLIENT", "ID")
    own_id = connection.read_response()
    assert window.client.client_kill_filter(_id=own_id) == 1
    assert window.put(hot_record(tenant, conversation, 2))
    assert [int(m[:20]) for m, _ in _members(window, tenant, conversation)] == [1, 2]
