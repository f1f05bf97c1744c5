"""Rows for the read comparisons, seeded as the commit path writes them, without its cost.

Ids from the store's sequence allocator, rows sealed by the store's record encoder and upserted
with the write path's own message_record + message_index statements (all through the store's
seeding API, ``store.seeding``) under the default class's TTL; the conversation head set last.
The dedup LWT and the outbox are skipped: no read compared here touches them, and they would
make seeding cost as much as the send benchmark.
"""
from __future__ import annotations

import uuid

from lab.bench.store.recording import BenchRun, body
from lab.store import BatchEntry, SendAck
from lab.store.plumbing.wall_clock import wall_clock_ms
from lab.store.write.head import HeadUpdate
from lab.store.rows.ids import seq_bucket
from lab.store.rows.model import MessageType, RetentionClass
from lab.store.rows.records import Message

SEED_CONCURRENCY = 64  # plain upserts in flight while seeding the read comparisons


def seed_conversation(run: BenchRun, tenant: uuid.UUID, conversation: uuid.UUID, n: int) -> list[SendAck]:
    """``n`` messages of one conversation; returns ack-like ids."""
    p, store = run.params, run.store
    c = store.constants
    sender = uuid.uuid4()
    now_ms = wall_clock_ms()
    ttl = store.retention.remaining_ttl_seconds(RetentionClass.DEFAULT, tenant, created_at_ms=now_ms,
                                                now_ms=now_ms)
    statements, acks = [], []
    for i in range(n):
        alloc = store.seeding.allocate(tenant, conversation)
        message = Message(tenant_id=tenant, conversation_id=conversation,
                          seq_bucket=seq_bucket(alloc.conversation_seq, c.message_seq_bucket_width),
                          conversation_seq=alloc.conversation_seq, message_id=alloc.message_id,
                          last_activity_id=alloc.last_activity_id, sender_id=sender, sender_device_id=sender,
                          client_message_id=run.client_id("seed"), message_type=MessageType.TEXT,
                          body=body(p.body_bytes, i), created_at_ms=now_ms + i,
                          retention_class=RetentionClass.DEFAULT)
        statements += store.seeding.statements(message, ttl_seconds=ttl)
        acks.append(SendAck(message_id=alloc.message_id, conversation_seq=alloc.conversation_seq,
                            last_activity_id=alloc.last_activity_id, created_at_ms=now_ms + i))
    store.connection.execute_concurrent(statements, concurrency=SEED_CONCURRENCY)
    last = acks[-1]
    store.apply_head(HeadUpdate(tenant_id=tenant, conversation_id=conversation,
                                conversation_seq=last.conversation_seq, message_id=last.message_id,
                                last_activity_id=last.last_activity_id, sender_id=sender,
                                preview=body(p.body_bytes, n - 1)))
    return acks


def seed_history(run: BenchRun) -> tuple[uuid.UUID, uuid.UUID, list[SendAck]]:
    """The history comparison's conversation: (tenant, conversation, its acks)."""
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    return tenant, conversation, seed_conversation(run, tenant, conversation, run.params.history_messages)


def seed_shapes(run: BenchRun) -> dict[str, tuple[uuid.UUID, list[BatchEntry]]]:
    """The S-1 shapes: per shape a tenant and its batch entries, shuffled (a mailbox batch is
    not in seq order)."""
    out = {}
    for shape, spec in run.params.shapes.items():
        tenant = uuid.uuid4()
        entries = []
        for _ in range(spec["conversations"]):
            conversation = uuid.uuid4()
            entries += [BatchEntry(conversation_id=conversation, conversation_seq=a.conversation_seq,
                                   message_id=a.message_id)
                        for a in seed_conversation(run, tenant, conversation, spec["messages"])]
        run.rng.shuffle(entries)
        out[shape] = (tenant, entries)
    return out
