"""Rows written straight into a store's tables for read-side tests.

The read side needs shapes the write path cannot make quickly (conversation_seq jumping
from 1 to 100000, a partition over-full for a narrower bucket width, a head that lags its
rows), so these helpers encode rows with the store's own record encoder
(``lab.store.records.encode_record``) and write them with plain prepared INSERTs.
"""
from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterable

from cassandra.query import UNSET_VALUE

from lab.store.ids import MessageIdGenerator, seq_bucket
from lab.store.model import MessageType
from lab.store.records import MESSAGE_RECORD_COLUMNS, Message, encode_record, record_values

# A node id no store in the tests uses, so seeded ids never collide with sent ones.
SEED_NODE_ID = 4242
_ids = MessageIdGenerator(SEED_NODE_ID)
_senders = itertools.cycle([uuid.UUID(int=i + 1) for i in range(3)])


def body_of(seq: int) -> bytes:
    return f"message {seq}".encode()


def insert_messages(store, tenant_id: uuid.UUID, conversation_id: uuid.UUID, seqs: Iterable[int], *,
                    bucket_width: int | None = None, index: bool = False) -> dict[int, Message]:
    """Write one message per seq (body ``body_of(seq)``); returns them by conversation_seq.
    ``bucket_width`` other than the store's lets a test build a partition that is too full.
    ``index=True`` also writes message_index, as the archiver does."""
    width = bucket_width or store.constants.message_seq_bucket_width
    columns = ", ".join(MESSAGE_RECORD_COLUMNS)
    marks = ", ".join("?" for _ in MESSAGE_RECORD_COLUMNS)
    insert = store.ctx.prepare(f"INSERT INTO {{ks}}.message_record ({columns}) VALUES ({marks})")
    insert_index = store.ctx.prepare("INSERT INTO {ks}.message_index (tenant_id, message_id, conversation_id, "
                                     "conversation_seq, seq_bucket) VALUES (?, ?, ?, ?, ?)")
    messages: dict[int, Message] = {}
    statements = []
    for seq in seqs:
        sender = next(_senders)
        message = Message(tenant_id=tenant_id, conversation_id=conversation_id, seq_bucket=seq_bucket(seq, width),
                          conversation_seq=seq, message_id=_ids.next_id(), last_activity_id=_ids.next_id(),
                          sender_id=sender, sender_device_id=sender, client_message_id=f"seed-{seq}",
                          message_type=MessageType.TEXT, body=body_of(seq), created_at_ms=1_700_000_000_000 + seq)
        encoded = encode_record(message, store.encryptor, bucket_width=width)
        # None bound in an INSERT writes a tombstone cell per null column (S-6): leave them unset
        statements.append((insert, tuple(UNSET_VALUE if v is None else v for v in record_values(encoded))))
        if index:
            statements.append((insert_index, (tenant_id, encoded["message_id"], conversation_id, seq,
                                              encoded["seq_bucket"])))
        messages[seq] = message
    store.connection.execute_concurrent(statements, concurrency=64)
    return messages


def set_head(store, tenant_id: uuid.UUID, conversation_id: uuid.UUID, *, latest: int, earliest: int = 1) -> None:
    """conversation_head's bounds H and E, as the write path / the earliest-available advancer leave them."""
    stmt = store.ctx.prepare("UPDATE {ks}.conversation_head SET latest_conversation_seq = ?, "
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
