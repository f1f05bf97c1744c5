"""The hot window's puts from concurrent callers share pipelined round trips (issue 24 item 4): every
put lands once, in its own slot, whatever round carried it; a round whose script the server does
not know loads it and is replayed (every put is an upsert). Nothing about speed is asserted."""
from __future__ import annotations

import threading
import time
import uuid

import pytest

from lab.store import EncodedRecord, u128_to_blob
from lab.store.hot.redis_window import _member

pytestmark = pytest.mark.node
CALLERS = 8
PUTS_EACH = 40


def _columns(tenant, conversation, seq):
    sender = uuid.UUID(int=1)
    return EncodedRecord(tenant_id=tenant, conversation_id=conversation, seq_bucket=0, conversation_seq=seq,
                         message_id=u128_to_blob(seq), last_activity_id=u128_to_blob(seq), sender_id=sender,
                         sender_device_id=sender, client_message_id=f"c-{seq}", message_type=1, schema_version=1,
                         state=0, payload_or_ciphertext=b"body %d" % seq, dek_id=("conversation", "k", 1),
                         retention_class=0, created_at=time.time_ns() // 1_000_000)


def _put_concurrently(window, tenant, conversations):
    start = threading.Barrier(CALLERS)
    errors = []

    def caller(i: int) -> None:
        start.wait()
        try:
            for n in range(PUTS_EACH):
                # callers 0-3 share one conversation (interleaved seqs), the others write their own
                conversation = conversations[0] if i < 4 else conversations[i]
                assert window.put(_columns(tenant, conversation, 1 + i + CALLERS * n))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
    threads = [threading.Thread(target=caller, args=(i,)) for i in range(CALLERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors


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
    window._put.sha = "0" * 40
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    cutoff = window._cutoff_ms(None)
    items = [(window.key(tenant, conversation), [f"{seq:020d}", _member(_columns(tenant, conversation, seq)),
                                                  window.window_seconds * 1000, cutoff, window.trim_per_write])
             for seq in (1, 2, 3)]
    assert len(window._put_round(items)) == 3
    assert window._put.sha != "0" * 40
    got = window.range(tenant, conversation, low=1, high=10, newest_first=False, limit=10)
    assert [c.conversation_seq for c in got] == [1, 2, 3]
