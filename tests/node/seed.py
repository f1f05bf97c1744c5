"""Rows written straight into a store's tables for read-side tests.

The read side needs shapes the write path cannot make quickly (conversation_seq jumping
from 1 to 100000, a partition over-full for a narrower bucket width, a head that lags its
rows), so these helpers write rows through the store's seeding API (``store.seeding``: the
store's own record encoder and the write path's statements), without TTL, at the
coordinates the test chooses.
"""
from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterable

from lab.store import Message, MessageIdGenerator, MessageType, NO_TTL, seq_bucket

# A node id no store in the tests uses, so seeded ids never collide with sent ones.
SEED_NODE_ID = 4242
_ids = MessageIdGenerator(SEED_NODE_ID)
_senders = itertools.cycle([uuid.UUID(int=i + 1) for i in range(3)])


def body_of(seq: int) -> bytes:
    return f"message {seq}".encode()


def insert_messages(store, tenant_id: uuid.UUID, conversation_id: uuid.UUID, seqs: Iterable[int], *,
                    index: bool = False) -> dict[int, Message]:
    """Write one message per seq (body ``body_of(seq)``, no TTL) through the store's seeding
    API; returns them by conversation_seq. ``index=True`` also writes message_index, as the
    archiver does."""
    width = store.constants.message_seq_bucket_width
    messages: dict[int, Message] = {}
    for seq in seqs:
        sender = next(_senders)
        messages[seq] = Message(tenant_id=tenant_id, conversation_id=conversation_id, seq_bucket=seq_bucket(seq, width),
                                conversation_seq=seq, message_id=_ids.next_id(), last_activity_id=_ids.next_id(),
                                sender_id=sender, sender_device_id=sender, client_message_id=f"seed-{seq}",
                                message_type=MessageType.TEXT, body=body_of(seq),
                                created_at_ms=1_700_000_000_000 + seq)
    store.seeding.write(messages.values(), ttl_seconds=NO_TTL, index=index)
    return messages


def set_head(store, tenant_id: uuid.UUID, conversation_id: uuid.UUID, *, latest: int, earliest: int = 1) -> None:
    """conversation_head's bounds H and E, as the write path / the earliest-available advancer leave them."""
    stmt = store.prepare_raw("UPDATE {ks}.conversation_head SET latest_conversation_seq = ?, "
                             "earliest_available_conversation_seq = ? WHERE tenant_id = ? AND conversation_id = ?")
    store.connection.execute(stmt, (latest, earliest, tenant_id, conversation_id))


def new_conversation(store, seqs: Iterable[int], *, latest: int | None = None, earliest: int = 1,
                     **kw) -> tuple[uuid.UUID, uuid.UUID, dict[int, Message]]:
    """A fresh (tenant, conversation) with the given seqs and a head over them."""
    tenant_id, conversation_id = uuid.uuid4(), uuid.uuid4()
    seqs = list(seqs)
    messages = insert_messages(store, tenant_id, conversation_id, seqs, **kw)
    set_head(store, tenant_id, conversation_id, latest=max(seqs) if latest is None else latest, earliest=earliest)
    return tenant_id, conversation_id, messages
