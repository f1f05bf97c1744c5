"""The Redis hot window (lab.store.hot.redis_window) on the embedded Redis: sorted set per
conversation scored by seq, same-score same-member upsert (§18.1.2b), expiry after the window,
recall/edit on the hot copy."""
from __future__ import annotations

import time
import uuid

import pytest

from lab.errors import HotWindowError
from lab.store import EncodedRecord, HotWindow, MessageState, u128_to_blob

pytestmark = pytest.mark.node
DAY_SECONDS = 86_400


def columns(tenant, conversation, seq, *, body=b"x", created_at=None, **extra):
    sender = uuid.UUID(int=1)
    return EncodedRecord(tenant_id=tenant, conversation_id=conversation, seq_bucket=seq // 4096, conversation_seq=seq,
                         message_id=u128_to_blob(seq), last_activity_id=u128_to_blob(seq), sender_id=sender,
                         sender_device_id=sender, client_message_id=f"c-{seq}", message_type=1, schema_version=1,
                         state=0, payload_or_ciphertext=body, dek_id=("conversation", "k", 1), retention_class=0,
                         created_at=created_at if created_at is not None else time.time_ns() // 1_000_000, **extra)


def test_one_slot_per_seq_and_replays_are_upserts(window):
    t, c = uuid.uuid4(), uuid.uuid4()
    first = columns(t, c, 5, body=b"sealed once")
    assert window.put(first)
    assert window.put(first)  # the same member again: nothing new
    key = window.key(t, c)
    assert window.client.zcard(key) == 1
    window.put(first.replace(payload_or_ciphertext=b"sealed again"))  # a resumed send re-sealed it
    assert window.client.zcard(key) == 1
    [(member, score)] = window.client.zrange(key, 0, -1, withscores=True)
    assert score == 5.0 and member.startswith(b"00000000000000000005|")
    assert window.at(t, c, [5])[5].payload_or_ciphertext == b"sealed again"
    assert 7 * DAY_SECONDS - 5 <= window.ttl_seconds(t, c) <= 7 * DAY_SECONDS


def test_ranges_both_directions_with_limits(window):
    t, c = uuid.uuid4(), uuid.uuid4()
    for seq in (1, 2, 3, 10, 4095, 4096, 4097):
        window.put(columns(t, c, seq))
    seqs = lambda rows: [r.conversation_seq for r in rows]
    assert seqs(window.range(t, c, low=1, high=4096, newest_first=True, limit=3)) == [4096, 4095, 10]
    assert seqs(window.range(t, c, low=3, high=5000, newest_first=False, limit=10)) == [3, 10, 4095, 4096, 4097]
    assert window.range(t, c, low=11, high=4094, newest_first=True, limit=5) == []
    assert sorted(window.at(t, c, [2, 4096, 9999])) == [2, 4096]
    assert sorted(window.at(t, c, [1, 4097])) == [1, 4097]  # sparse: one lookup per seq


def test_seqs_beyond_double_precision_stay_exact(window):
    """Scores are doubles (exact to 2^53); S-2's seqs near 2^62 share a score and the member's
    seq prefix keeps them apart."""
    t, c = uuid.uuid4(), uuid.uuid4()
    base = 2**62
    for seq in (base, base + 1, base + 2):
        window.put(columns(t, c, seq, body=b"%d" % (seq - base)))
    assert window.client.zcard(window.key(t, c)) == 3
    assert window.at(t, c, [base + 1])[base + 1].payload_or_ciphertext == b"1"
    rows = window.range(t, c, low=base + 1, high=base + 2, newest_first=True, limit=5)
    assert [r.conversation_seq - base for r in rows] == [2, 1]


def test_expired_members_are_skipped_and_trimmed(window):
    t, c = uuid.uuid4(), uuid.uuid4()
    now = time.time_ns() // 1_000_000
    old = now - 8 * DAY_SECONDS * 1000
    assert not window.put(columns(t, c, 1, created_at=old))  # older than the window: not written
    window.put(columns(t, c, 2, created_at=now - 6 * DAY_SECONDS * 1000))
    window.put(columns(t, c, 3, created_at=now))
    later = now + 2 * DAY_SECONDS * 1000  # two days on, seq 2 is 8 days old
    assert [r.conversation_seq for r in window.range(t, c, low=1, high=9, newest_first=False, limit=9,
                                                         now_ms=later)] == [3]
    window.put(columns(t, c, 4, created_at=later), now_ms=later)  # the next write trims from the old end
    assert [int(m[:20]) for m in window.client.zrange(window.key(t, c), 0, -1)] == [3, 4]


def test_recall_and_edit_change_the_hot_copy(window):
    t, c = uuid.uuid4(), uuid.uuid4()
    window.put(columns(t, c, 1))
    window.put(columns(t, c, 2))
    assert window.edit(t, c, 1, payload_or_ciphertext=b"v2", dek_id=("conversation", "k", 2),
                       edited_at_activity_id=u128_to_blob(20))
    assert window.edit(t, c, 1, payload_or_ciphertext=b"stale", dek_id=("conversation", "k", 2),
                       edited_at_activity_id=u128_to_blob(10))  # older: left alone
    edited = window.at(t, c, [1])[1]
    assert (edited.payload_or_ciphertext, edited.state) == (b"v2", int(MessageState.EDITED))
    assert window.recall(t, c, 2, recall_event_conversation_seq=30)
    assert window.edit(t, c, 2, payload_or_ciphertext=b"after recall", dek_id=("conversation", "k", 2),
                       edited_at_activity_id=u128_to_blob(40))
    recalled = window.at(t, c, [2])[2]
    assert (recalled.state, recalled.recall_event_conversation_seq) == (int(MessageState.RECALLED), 30)
    assert recalled.payload_or_ciphertext == b"x", "recalled stays recalled"
    assert not window.recall(t, c, 3, recall_event_conversation_seq=31)  # not in the window
    assert window.client.zcard(window.key(t, c)) == 2


def test_an_unreachable_redis_is_a_typed_error(redis_services):
    with pytest.raises(HotWindowError):
        HotWindow.open(redis_services.replace(redis_port=1, request_timeout_seconds=1.0), namespace="x",
                       window_days=7)
