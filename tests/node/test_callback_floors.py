"""The bench's driver floors (lab.bench.store_paths.callback_floors, asyncio_floors) on the real node:
the send's statements chained through the driver's callbacks (or as coroutines on an asyncio loop), a
few in flight from one thread, issue exactly the requests they claim and leave rows the store's read
paths read back, the logged chain its entries in its own outbox between record + index and
COMMITTED; a failed step fails its call and the others finish. Structure only, never a speed."""
from __future__ import annotations

import pytest

from lab.bench.store_paths import BenchParams
from lab.bench.store_paths.asyncio_floors import run_coroutines, send_coroutine
from lab.bench.store_paths.callback_floors import page_chain, run_chains, send_chain
from lab.bench.store_paths.floors import FloorKeys, history_floor_items, send_floor_plans
from lab.bench.store_paths.recording import BenchRun, body
from lab.store import BatchEntry, blob_to_u128, open_outbox, seq_bucket

pytestmark = pytest.mark.node

PARAMS = BenchParams(send_conversations=2, body_bytes=64)
CALLS = 6


def _floor(store, run_them, *, log_record=False):
    """CALLS plans over fresh conversations, run by ``run_them(run, plans)``: what each test reads."""
    run = BenchRun(store, PARAMS, None, lambda _msg: None)
    keys = FloorKeys.new(PARAMS.send_conversations)
    plans = send_floor_plans(run, CALLS, conversations=PARAMS.send_conversations, keys=keys, head_read=True,
                             outbox=False, log_record=log_record)
    before = run.snapshot()
    timings = run_them(run, plans)
    return run, keys, plans, timings, run.snapshot(), before


@pytest.fixture(scope="module")
def chained(store):
    return _floor(store, lambda run, plans: run_chains([send_chain(run.conn, p) for p in plans], in_flight=3))


def test_every_chain_ends_once_without_error(chained):
    _, _, _, timings, _, _ = chained
    assert len(timings) == CALLS and [t.error for t in timings] == [None] * CALLS
    assert all(t.ended_ns >= t.started_ns for t in timings)


def test_each_send_issues_exactly_the_like_for_like_statements(chained):
    """Per send: the reservation LWT, record + index, COMMITTED, the head read and write; the
    fencing read once per conversation (its first call); no outbox append, no other request."""
    from lab.bench.store_paths.recording import request_delta

    _, _, _, _, after, before = chained
    assert request_delta(before, after) == {
        "client_dedup": {"lwt": CALLS, "write": CALLS}, "message_record": {"write": CALLS},
        "message_index": {"write": CALLS},
        "conversation_head": {"write": CALLS, "point_read": CALLS + PARAMS.send_conversations}}


def _read_back(store, keys, plans) -> None:
    """Every row a floor wrote, read by the store: batch_read finds each send's message with its body;
    a history page shows the sends up to the head. Two sends of one conversation in flight at once
    write the head in either order (a plain write, last writer wins, unlike the store's head writer),
    so the head may stop short of the newest send: the page is every send up to it, newest first."""
    for k, conversation in enumerate(keys.conversations):
        mine = {plan.reserve[1][4]: (i, plan) for i, plan in enumerate(plans) if i % PARAMS.send_conversations == k}
        entries = [BatchEntry(conversation_id=conversation, conversation_seq=seq,
                              message_id=blob_to_u128(plan.reserve[1][3])) for seq, (_, plan) in sorted(mine.items())]
        got = store.batch_read(keys.tenant, entries)
        assert not got.missing and {m.conversation_seq: m.body for m in got.messages.values()} == {
            seq: body(PARAMS.body_bytes, i) for seq, (i, _) in mine.items()}
        page = store.history(keys.tenant, conversation, limit=CALLS)
        seqs = [m.conversation_seq for m in page.messages]
        assert seqs and seqs == sorted((q for q in mine if q <= seqs[0]), reverse=True)
        assert all(m.body == body(PARAMS.body_bytes, mine[m.conversation_seq][0]) for m in page.messages)


def test_the_rows_it_writes_are_read_back_by_the_store(chained, store):
    _, keys, plans, _, _, _ = chained
    _read_back(store, keys, plans)


def test_the_page_chain_reads_the_head_and_the_bucket(chained):
    run, keys, plans, _, _, _ = chained
    width = run.store.constants.message_seq_bucket_width
    conversation = keys.conversations[0]
    rows = CALLS // PARAMS.send_conversations
    top = max(plan.reserve[1][4] for i, plan in enumerate(plans) if i % PARAMS.send_conversations == 0)
    items = history_floor_items(run, keys.tenant, conversation, seq_bucket(top, width), limit=CALLS)
    before = run.snapshot()
    timings = run_chains([page_chain(run.conn, items, rows) for _ in range(4)], in_flight=2)
    assert [t.error for t in timings] == [None] * 4
    from lab.bench.store_paths.recording import request_delta
    assert request_delta(before, run.snapshot()) == {"conversation_head": {"point_read": 4},
                                                     "message_record": {"range_read": 4}}
    wrong = run_chains([page_chain(run.conn, items, rows + 1)], in_flight=1)  # fewer rows than claimed: an error
    assert [t.error for t in wrong] == ["RuntimeError"]


def test_a_refused_reservation_fails_its_call_and_the_others_finish(chained):
    """The same plan again: its reservation exists, so the LWT is not applied and the chain stops
    there (no further request); a fresh plan beside it completes."""
    from lab.bench.store_paths.recording import request_delta

    run, keys, plans, _, _, _ = chained
    fresh = send_floor_plans(run, 1, conversations=PARAMS.send_conversations, keys=keys, start=CALLS,
                             head_read=True, outbox=False)
    before = run.snapshot()
    timings = run_chains([send_chain(run.conn, plans[-1]), send_chain(run.conn, fresh[0])], in_flight=2)
    assert [t.error for t in timings] == ["RuntimeError", None]
    assert request_delta(before, run.snapshot()) == {
        "client_dedup": {"lwt": 2, "write": 1}, "message_record": {"write": 1}, "message_index": {"write": 1},
        "conversation_head": {"write": 1, "point_read": 1}}
    with pytest.raises(ValueError, match="outbox=False"):
        send_chain(run.conn, send_floor_plans(run, 1, conversations=PARAMS.send_conversations, keys=keys,
                                              start=CALLS + 1)[0])


def test_the_asyncio_floor_issues_the_same_statements_and_the_store_reads_its_rows(store):
    """The same plans as coroutines on one asyncio loop: the same requests per send, rows the store's
    history reads back; a refused reservation fails its own call only."""
    from lab.bench.store_paths.recording import request_delta

    run, keys, plans, timings, after, before = _floor(
        store, lambda run, plans: run_coroutines([send_coroutine(run.conn, p) for p in plans], in_flight=3))
    assert [t.error for t in timings] == [None] * CALLS
    assert request_delta(before, after) == {
        "client_dedup": {"lwt": CALLS, "write": CALLS}, "message_record": {"write": CALLS},
        "message_index": {"write": CALLS},
        "conversation_head": {"write": CALLS, "point_read": CALLS + PARAMS.send_conversations}}
    _read_back(store, keys, plans)
    fresh = send_floor_plans(run, 1, conversations=PARAMS.send_conversations, keys=keys, start=CALLS,
                             head_read=True, outbox=False)
    again = run_coroutines([send_coroutine(run.conn, plans[-1]), send_coroutine(run.conn, fresh[0])], in_flight=2)
    assert [t.error for t in again] == ["RuntimeError", None]
    with pytest.raises(ValueError, match="outbox=False"):
        send_coroutine(run.conn, send_floor_plans(run, 1, conversations=PARAMS.send_conversations, keys=keys,
                                                  start=CALLS + 1)[0])


def test_the_logged_chain_appends_each_send_to_its_own_outbox_before_committed(store, tmp_path):
    """send_logged_callback_floor's chain: the like-for-like requests (the append is no request), one
    entry per send in its own local outbox, the message the plan wrote, its rows read back by the
    store. An entry already at a send's coordinate (a duplicate append) fails that send after record
    + index and before COMMITTED: the append sits between them, as in the store's walk."""
    from lab.bench.store_paths.recording import request_delta

    with open_outbox("local", path=tmp_path / "outbox.sqlite") as log:
        run, keys, plans, timings, after, before = _floor(store, lambda run, plans: run_chains(
            [send_chain(run.conn, p, log) for p in plans], in_flight=3), log_record=True)
        assert [t.error for t in timings] == [None] * CALLS
        assert request_delta(before, after) == {
            "client_dedup": {"lwt": CALLS, "write": CALLS}, "message_record": {"write": CALLS},
            "message_index": {"write": CALLS},
            "conversation_head": {"write": CALLS, "point_read": CALLS + PARAMS.send_conversations}}
        assert len(log.scan()) == CALLS and all(p.log_append is None for p in plans)
        for plan in plans:
            record = plan.log_record
            entry = log.get(record.tenant_id, record.conversation_id, record.conversation_seq)
            assert entry.record.kind == "message" and entry.record.payload.record.message_id == plan.reserve[1][3]
        _read_back(store, keys, plans)

        fresh = send_floor_plans(run, 2, conversations=PARAMS.send_conversations, keys=keys, start=CALLS,
                                 head_read=True, outbox=False, log_record=True)
        log.append(fresh[0].log_record)  # its coordinate taken before its chain appends
        before = run.snapshot()
        failed = run_chains([send_chain(run.conn, p, log) for p in fresh], in_flight=2)
        assert [t.error for t in failed] == ["RuntimeError", None]
        assert request_delta(before, run.snapshot()) == {
            "client_dedup": {"lwt": 2, "write": 1}, "message_record": {"write": 2}, "message_index": {"write": 2},
            "conversation_head": {"write": 1, "point_read": 1}}

    with pytest.raises(ValueError, match="needs the outbox"):
        send_chain(run.conn, fresh[1])
    with pytest.raises(ValueError, match="outbox=False"):
        send_coroutine(run.conn, fresh[1])
    with pytest.raises(ValueError, match="appends once"):
        send_floor_plans(run, 1, conversations=PARAMS.send_conversations, keys=keys, start=CALLS + 2,
                         log_record=True)
