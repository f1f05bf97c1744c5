"""The store's seeding API (``store.seeding``, the lab's one seeder) and its baseline statements,
on the real node: rows seeded are the rows the store reads, sealed as it seals them."""
from __future__ import annotations

import uuid

import pytest
from cassandra.query import UNSET_VALUE

from lab.errors import ValidationError
from lab.store import FULL_TTL, STAMP_NOW, Message, MessageType, RetentionClass, SendRequest, seq_bucket

pytestmark = pytest.mark.node

OLD_CREATED_AT_MS = 1_600_000_000_000  # years ago: its remaining TTL has long run out


def _old_message(store, tenant, conversation, seq: int) -> Message:
    sender = uuid.uuid4()
    alloc = store.seeding.allocate(tenant, conversation)
    return Message(tenant_id=tenant, conversation_id=conversation,
                   seq_bucket=seq_bucket(seq, store.constants.message_seq_bucket_width), conversation_seq=seq,
                   message_id=alloc.message_id, last_activity_id=alloc.last_activity_id, sender_id=sender,
                   sender_device_id=sender, client_message_id=f"old-{seq}", message_type=MessageType.TEXT,
                   body=f"old {seq}".encode(), created_at_ms=OLD_CREATED_AT_MS + seq,
                   retention_class=RetentionClass.DEFAULT)


def _ttl_and_writetime(store, m: Message) -> tuple[int | None, int | None]:
    stmt = store.prepare_raw("SELECT TTL(payload_or_ciphertext), WRITETIME(payload_or_ciphertext) FROM "
                             "{ks}.message_record WHERE tenant_id = ? AND conversation_id = ? AND seq_bucket = ? "
                             "AND conversation_seq = ?")
    row = store.connection.execute(stmt, (m.tenant_id, m.conversation_id, m.seq_bucket, m.conversation_seq)).one()
    return (None, None) if row is None else (row[0], row[1])


def test_a_seeded_conversation_reads_back_with_its_head(store):
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    bodies = [f"seeded {i}".encode() for i in range(5)]
    acks = store.seeding.conversation(tenant, conversation, bodies, client_message_ids=[f"s-{i}" for i in range(5)])
    assert [a.conversation_seq for a in acks] == sorted(a.conversation_seq for a in acks)
    page = store.history(tenant, conversation)
    assert [m.body for m in page.messages] == bodies[::-1] or [m.body for m in page.messages] == bodies
    assert {m.message_id for m in page.messages} == {a.message_id for a in acks}
    head = store.head(tenant, conversation)
    assert head is not None and head.latest_conversation_seq == acks[-1].conversation_seq
    with pytest.raises(ValidationError):
        store.seeding.conversation(tenant, conversation, [b"x"], client_message_ids=["a", "b"])


def test_full_ttl_keeps_an_old_row_that_the_remaining_period_would_skip(store):
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    skipped, kept = _old_message(store, tenant, conversation, 1), _old_message(store, tenant, conversation, 2)
    assert store.seeding.write([skipped]) == 0  # remaining period: expired long ago, not written
    assert _ttl_and_writetime(store, skipped) == (None, None)
    before_us = store.connection.execute(store.prepare_raw("SELECT toUnixTimestamp(now()) FROM system.local")).one()[0]
    assert store.seeding.write([kept], ttl_seconds=FULL_TTL, timestamp_us=STAMP_NOW) == 1
    ttl, writetime = _ttl_and_writetime(store, kept)
    full = store.retention.ttl_seconds(RetentionClass.DEFAULT, tenant)
    assert full - 60 <= ttl <= full
    assert abs(writetime // 1000 - before_us) < 60_000  # stamped now, not at its old created_at


def test_record_values_are_the_row_the_store_writes(store):
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    message = _old_message(store, tenant, conversation, 7)
    values = store.seeding.record_values(message)
    assert len(values) == len(store.seeding.record_columns)
    # an absent value binds as UNSET (no tombstone cell); the node reads it back as null
    row = {c: None if v is UNSET_VALUE else v for c, v in zip(store.seeding.record_columns, values)}
    decoded = store.decode_record(row)
    assert (decoded.body, decoded.conversation_seq, decoded.message_id) == (message.body, 7, message.message_id)
    with pytest.raises(ValidationError):
        store.seeding.record_values({"conversation_seq": 7})


def test_baseline_statements_are_the_store_s_own(store):
    baseline = store.baseline_statements()
    assert baseline == store.baseline_statements()  # prepared once, cached by the store
    tenant, sender = uuid.uuid4(), uuid.uuid4()
    reserved = store.connection.execute(baseline.reserve, (tenant, sender, "floor-1", bytes(16), 1, 0, 1)).one()
    assert reserved[0] is True
    assert store.connection.execute(baseline.history_bounds, (tenant, uuid.uuid4())).one() is None
    for read in (baseline.head_read, baseline.fencing_read):  # the send's head reads (the like-for-like floor)
        assert store.connection.execute(read, (tenant, uuid.uuid4())).one() is None


def test_log_append_appends_what_send_logs(store):
    """store.seeding.log_append (the send floor's outbox step): built ahead, appended when called,
    the entry send's step 4 would write for that message (kind message, its sealed columns), and
    idempotent by key as every append is."""
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    alloc = store.seeding.allocate(tenant, conversation)
    sender = uuid.uuid4()
    message = Message(tenant_id=tenant, conversation_id=conversation,
                      seq_bucket=seq_bucket(alloc.conversation_seq, store.constants.message_seq_bucket_width),
                      conversation_seq=alloc.conversation_seq, message_id=alloc.message_id,
                      last_activity_id=alloc.last_activity_id, sender_id=sender, sender_device_id=sender,
                      client_message_id="logged", message_type=MessageType.TEXT, body=b"logged body",
                      created_at_ms=1_700_000_000_000)
    append = store.seeding.log_append(message)
    assert store.log.get(tenant, conversation, alloc.conversation_seq) is None  # nothing until called
    entry = append()
    assert not entry.duplicate and entry.record.kind == "message"
    stored = store.log.get(tenant, conversation, alloc.conversation_seq)
    logged = stored.record.payload.record
    assert logged.message_id == alloc.message_id.to_bytes(16, "big")
    assert logged.client_message_id == "logged" and logged.dek_id[1] == f"{tenant}:{conversation}"
    assert store.decode_record(logged).body == b"logged body"  # sealed as the store seals
    assert append().duplicate  # the same key again: first write wins
    # what send logs for a message has the same shape
    ack = store.send(SendRequest(
        tenant_id=tenant, conversation_id=conversation, sender_id=sender, sender_device_id=sender,
        client_message_id="sent", body=b"sent body"))
    sent = store.log.get(tenant, conversation, ack.conversation_seq).record
    assert type(sent) is type(stored.record) and type(sent.payload) is type(stored.record.payload)
    assert sent.kind == stored.record.kind == "message" and sent.to_wire().keys() == stored.record.to_wire().keys()
    # the record alone (for a log of the caller's own): the same coordinate and message, sealed anew
    record = store.seeding.log_record(message)
    assert type(record) is type(sent) and record.kind == "message"
    assert (record.tenant_id, record.conversation_id, record.conversation_seq) == (
        tenant, conversation, alloc.conversation_seq)
    assert record.payload.record.message_id == logged.message_id
    assert store.decode_record(record.payload.record).body == b"logged body"
