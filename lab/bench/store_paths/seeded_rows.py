"""Rows for the read comparisons, seeded as the commit path writes them, without its cost.

More: docs/bench-internals.md.
"""
from __future__ import annotations

import uuid

from lab.bench.store_paths.recording import BenchRun, body
from lab.store import BatchEntry, SendAck


def seed_conversation(run: BenchRun, tenant: uuid.UUID, conversation: uuid.UUID, n: int) -> list[SendAck]:
    """``n`` messages of one conversation (``store.seeding.conversation``); returns their acks."""
    p = run.params
    return run.store.seeding.conversation(tenant, conversation, [body(p.body_bytes, i) for i in range(n)],
                                          client_message_ids=[run.client_id("seed") for _ in range(n)])


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
