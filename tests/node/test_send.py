"""The send path of design §5.1 on the real node: round trip, retries, the monotonic head,
reservation windows across writer restarts, the bit-63 guard (S-2) and per-class TTLs.
Crash points: tests/node/test_crash_points.py."""
from __future__ import annotations

import uuid

import pytest

from lab.errors import Bit63Violation, CrashInjected, Fenced
from lab.store import (BIT63, DedupState, FaultPlan, HeadUpdate, MediaMetadata, MentionTargets, MessageState,
                       MessageType, RetentionClass, RetentionPolicy, blob_to_u128, u128_to_blob)
from store_checks import (dedup_row, index_rows, new_request, outbox_messages, record_row, record_rows,
                          snapshot_tables)

pytestmark = pytest.mark.node

DAY_SECONDS = 86_400
# TTL read back right after the write may have ticked a second or two.
TTL_SLACK_SECONDS = 5


def test_send_round_trip(store):
    mention = uuid.uuid4()
    req = new_request(body=b"\x00hello\xff", message_type=MessageType.IMAGE,
                      media=MediaMetadata(object_id="obj-1", mime="image/png", size_bytes=1234, width=10, height=20,
                                          thumbnail=b"\x89PNG" * 10),
                      mentions=MentionTargets(user_ids=(mention,), at_all=False), reply_to_conversation_seq=7,
                      custom_type="sticker-pack")
    ack = store.send(req)
    assert ack.conversation_seq == 1 and not ack.replayed
    row = record_row(store, req.tenant_id, req.conversation_id, ack.conversation_seq)
    msg = store.decode_record(row)
    assert (msg.message_id, msg.last_activity_id, msg.created_at_ms) == (ack.message_id, ack.last_activity_id,
                                                                         ack.created_at_ms)
    assert msg.body == b"\x00hello\xff" and msg.e2ee is False
    assert msg.media.object_id == "obj-1" and msg.media.thumbnail == b"\x89PNG" * 10
    assert msg.mentions.user_ids == (mention,)
    assert msg.reply_to_conversation_seq == 7 and msg.custom_type == "sticker-pack"
    assert msg.message_type is MessageType.IMAGE and msg.state is MessageState.NORMAL
    assert msg.client_message_id == req.client_message_id and msg.sender_id == req.sender_id
    # the body is not readable at rest
    assert b"hello" not in row.payload_or_ciphertext
    # message_index (admin lookup), client_dedup COMMITTED, one outbox entry
    index = index_rows(store, req.tenant_id, u128_to_blob(ack.message_id))
    assert [(r.conversation_id, r.conversation_seq) for r in index] == [(req.conversation_id, 1)]
    dedup = dedup_row(store, req)
    assert dedup.state == DedupState.COMMITTED and blob_to_u128(dedup.message_id) == ack.message_id
    assert len(outbox_messages(store, req.tenant_id, req.conversation_id)) == 1


def test_e2ee_payload_is_carried_opaque(store):
    req = new_request(body=b"\x01opaque-e2ee-ciphertext", e2ee=True)
    ack = store.send(req)
    msg = store.decode_record(record_row(store, req.tenant_id, req.conversation_id, ack.conversation_seq))
    assert msg.e2ee is True and msg.body == b"\x01opaque-e2ee-ciphertext"


def test_retry_returns_the_first_ack(store):
    req = new_request()
    first = store.send(req)
    again = store.send(req)
    assert again.replayed
    assert (again.message_id, again.conversation_seq, again.last_activity_id, again.created_at_ms) == \
           (first.message_id, first.conversation_seq, first.last_activity_id, first.created_at_ms)
    rows = record_rows(store, req.tenant_id, req.conversation_id, [first.conversation_seq])
    assert [r.conversation_seq for r in rows] == [first.conversation_seq]
    assert len(outbox_messages(store, req.tenant_id, req.conversation_id)) == 1


# Every crash point (with retry / recovery and the table) is in tests/test_crash_points.py.


def test_head_follows_sends_and_a_regression_is_dropped_and_counted(open_store):
    s = open_store()
    tenant, conversation, sender = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    acks = [s.send(new_request(tenant_id=tenant, conversation_id=conversation, sender_id=sender, body=b"m%d" % i))
            for i in range(3)]
    s.drain()
    head = s.head(tenant, conversation)
    assert head.latest_conversation_seq == acks[-1].conversation_seq
    assert head.last_message_id == acks[-1].message_id and head.preview == b"m2"
    before = s.alerts.head_regressions_dropped
    stale = HeadUpdate(tenant_id=tenant, conversation_id=conversation, conversation_seq=acks[0].conversation_seq,
                       message_id=acks[0].message_id, last_activity_id=acks[0].last_activity_id, sender_id=sender)
    assert s.apply_head(stale) == "dropped"
    assert s.alerts.head_regressions_dropped == before + 1
    assert s.head(tenant, conversation).latest_conversation_seq == acks[-1].conversation_seq


def test_resumed_older_send_does_not_regress_the_head(open_store):
    """A send that died after its reservation and is retried after a newer message: its
    (older) head update is the natural regression the monotonic check must drop."""
    tenant, conversation, sender = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    crashing = open_store(faults=FaultPlan().arm("after_reserve"))
    older = new_request(tenant_id=tenant, conversation_id=conversation, sender_id=sender)
    with pytest.raises(CrashInjected):
        crashing.send(older)
    s = open_store()
    newer = s.send(new_request(tenant_id=tenant, conversation_id=conversation, sender_id=sender))
    s.drain()
    resumed = s.send(older)
    s.drain()
    assert resumed.conversation_seq < newer.conversation_seq
    assert s.alerts.head_regressions_dropped == 1
    assert s.head(tenant, conversation).latest_conversation_seq == newer.conversation_seq


def test_failover_head_is_compare_and_set_under_fencing(open_store):
    tenant, conversation, sender = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    new_epoch = open_store(head_failover=True, fencing_epoch=2)
    old_epoch = open_store(head_failover=True, fencing_epoch=1)
    first = new_epoch.send(new_request(tenant_id=tenant, conversation_id=conversation, sender_id=sender))
    new_epoch.drain()
    head = new_epoch.head(tenant, conversation)
    assert (head.fencing_epoch, head.head_version) == (2, first.conversation_seq)
    # A writer of an older epoch is fenced out: refused before it writes (it would have been acked
    # at a seq above the head, invisible), and its head updates are dropped.
    with pytest.raises(Fenced):
        old_epoch.send(new_request(tenant_id=tenant, conversation_id=conversation, sender_id=sender))
    stale = HeadUpdate(tenant_id=tenant, conversation_id=conversation, conversation_seq=first.conversation_seq + 10,
                       message_id=1, last_activity_id=2, sender_id=sender)
    assert old_epoch.apply_head(stale) == "dropped"
    assert old_epoch.alerts.head_regressions_dropped == 1
    assert new_epoch.head(tenant, conversation).latest_conversation_seq == first.conversation_seq
    later = new_epoch.send(new_request(tenant_id=tenant, conversation_id=conversation, sender_id=sender))
    new_epoch.drain()
    head = new_epoch.head(tenant, conversation)
    assert (head.latest_conversation_seq, head.fencing_epoch) == (later.conversation_seq, 2)


def test_writer_restart_leaves_a_hole_and_stays_monotonic(open_store, store):
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    window = store.constants.seq_reservation_window
    first = open_store()
    seqs = [first.send(new_request(tenant_id=tenant, conversation_id=conversation)).conversation_seq
            for _ in range(2)]
    assert seqs == [1, 2]
    restarted = open_store()
    after = restarted.send(new_request(tenant_id=tenant, conversation_id=conversation)).conversation_seq
    assert after == window + 1  # 3..window is the dead writer's hole
    again = open_store().send(new_request(tenant_id=tenant, conversation_id=conversation)).conversation_seq
    assert again == 2 * window + 1
    rows = record_rows(store, tenant, conversation, [1, after, again])
    assert [r.conversation_seq for r in rows] == [again, after, 2, 1]


def test_s2_bit63_guard_fires_before_any_write(open_store, store):
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    s = open_store()
    s.advance_seq(tenant, conversation, BIT63 - 2)
    top = [s.send(new_request(tenant_id=tenant, conversation_id=conversation)).conversation_seq for _ in range(2)]
    assert top == [BIT63 - 2, BIT63 - 1]
    before = snapshot_tables(store)
    doomed = new_request(tenant_id=tenant, conversation_id=conversation)
    with pytest.raises(Bit63Violation):
        s.send(doomed)
    with pytest.raises(Bit63Violation):  # and it stays refused: no wrap-around
        open_store().send(new_request(tenant_id=tenant, conversation_id=conversation))
    assert snapshot_tables(store) == before
    assert dedup_row(store, doomed) is None
    # what was stored near the top sorts as unsigned order would
    rows = record_rows(store, tenant, conversation, top)
    assert [r.conversation_seq for r in rows] == [BIT63 - 1, BIT63 - 2]


def test_s2_values_crossing_2_62_keep_their_order(open_store, store):
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    s = open_store()
    s.advance_seq(tenant, conversation, (1 << 62) - 1)
    seqs = [s.send(new_request(tenant_id=tenant, conversation_id=conversation)).conversation_seq for _ in range(3)]
    assert seqs == [(1 << 62) - 1, 1 << 62, (1 << 62) + 1]
    rows = record_rows(store, tenant, conversation, seqs)
    assert [r.conversation_seq for r in rows] == sorted(seqs, reverse=True)


def test_retention_ttls_read_back(open_store, store):
    tenant = uuid.uuid4()
    custom_ttl = 12 * 3600
    s = open_store(retention=RetentionPolicy(tenant_custom_ttl_seconds={tenant: custom_ttl}))
    expected = {RetentionClass.DEFAULT: 30 * DAY_SECONDS, RetentionClass.EPHEMERAL_24H: DAY_SECONDS,
                RetentionClass.COMPLIANCE_HOLD: None, RetentionClass.TENANT_CUSTOM: custom_ttl}
    for retention_class, ttl in expected.items():
        req = new_request(tenant_id=tenant, retention_class=retention_class)
        ack = s.send(req)
        row = record_row(store, tenant, req.conversation_id, ack.conversation_seq,
                         "TTL(payload_or_ciphertext) AS ttl_payload, TTL(created_at) AS ttl_created")
        index_ttl = store.connection.execute(
            f"SELECT TTL(conversation_id) AS ttl FROM {store.keyspace}.message_index WHERE tenant_id = %s "
            "AND message_id = %s", (tenant, u128_to_blob(ack.message_id))).one().ttl
        for got in (row.ttl_payload, row.ttl_created, index_ttl):
            if ttl is None:
                assert got is None, retention_class
            else:
                assert ttl - TTL_SLACK_SECONDS <= got <= ttl, retention_class
    # tenant_custom without a configured TTL fails closed: no expiry
    req = new_request(retention_class=RetentionClass.TENANT_CUSTOM)
    ack = s.send(req)
    assert record_row(store, req.tenant_id, req.conversation_id, ack.conversation_seq,
                      "TTL(payload_or_ciphertext) AS ttl").ttl is None
