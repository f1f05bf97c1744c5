"""The store's own CQL floors: each path's exact statements, issued raw, nothing else.

More: docs/bench-internals.md.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from lab.bench.store_paths.recording import BenchRun, body
from lab.store import (DedupState, FIRST_CONVERSATION_SEQ, Message, MessageType, RetentionClass, seq_bucket,
                       u128_to_blob, wall_clock_ms)

__all__ = ["FloorKeys", "history_floor", "send_floor_calls"]

# preview_or_placeholder as the head writer stores it: 4-byte key version || sealed envelope of
# the first 128 bytes (12 B nonce, 1 B flag, 16 B tag)
_PREVIEW_OVERHEAD_BYTES = 4 + 12 + 1 + 16
_PREVIEW_MAX_BYTES = 128


@dataclass(frozen=True, kw_only=True)
class FloorKeys:
    """The tenant, conversations and their senders one send floor writes to (its own sequence
    windows): kept across the batches of calls it is built in."""

    tenant: uuid.UUID
    conversations: tuple[uuid.UUID, ...]
    senders: tuple[uuid.UUID, ...]

    @classmethod
    def new(cls, conversations: int) -> FloorKeys:
        return cls(tenant=uuid.uuid4(), conversations=tuple(uuid.uuid4() for _ in range(conversations)),
                   senders=tuple(uuid.uuid4() for _ in range(conversations)))


def send_floor_calls(run: BenchRun, n: int, *, conversations: int, outbox: bool = True,
                     head_read: bool = False, keys: FloorKeys | None = None,
                     start: int = 0) -> list[Callable[[], None]]:
    """``n`` ready calls of the send floor, spread round-robin over ``conversations`` of their
    own (their own sequence windows), each a new client_message_id of its conversation's sender;
    ``outbox=False``: without the log append (``send_floor_without_outbox``); ``head_read=True``:
    with the head read before each head write and the fencing read on each conversation's first
    call (``send_floor_with_head_read``). Built a batch at a time (a long run need not hold every
    call at once): ``keys`` from the first batch (``FloorKeys.new``) and ``start`` the number of
    calls built before, so the calls continue the same conversations and only a conversation's
    first call reads its epoch."""
    p, store = run.params, run.store
    conn = store.connection
    statements = store.baseline_statements()
    reserve, commit, head = statements.reserve, statements.commit, statements.head_write
    read_head, read_epoch = statements.head_read, statements.fencing_read
    width = store.constants.message_seq_bucket_width
    dedup_ttl = store.constants.client_dedup_ttl_seconds
    keys = keys if keys is not None else FloorKeys.new(conversations)
    tenant, convs, senders = keys.tenant, keys.conversations, keys.senders
    now_ms = wall_clock_ms()
    ttl = store.retention.remaining_ttl_seconds(RetentionClass.DEFAULT, tenant, created_at_ms=now_ms, now_ms=now_ms)
    preview = bytes(_PREVIEW_OVERHEAD_BYTES + min(p.body_bytes, _PREVIEW_MAX_BYTES))
    calls = []
    for i in range(start, start + n):
        k = i % conversations
        alloc = store.seeding.allocate(tenant, convs[k])
        seq, client_id = alloc.conversation_seq, run.client_id("floor")
        message = Message(tenant_id=tenant, conversation_id=convs[k], seq_bucket=seq_bucket(seq, width),
                          conversation_seq=seq, message_id=alloc.message_id, last_activity_id=alloc.last_activity_id,
                          sender_id=senders[k], sender_device_id=senders[k], client_message_id=client_id,
                          message_type=MessageType.TEXT, body=body(p.body_bytes, i), created_at_ms=now_ms + i)
        record_and_index = store.seeding.statements(message, ttl_seconds=ttl)
        log_append = store.seeding.log_append(message) if outbox else None
        message_id = u128_to_blob(alloc.message_id)
        dedup_key = (tenant, senders[k], client_id)
        reserve_params = (*dedup_key, message_id, seq, int(DedupState.RESERVED), now_ms + i)
        commit_params = (dedup_ttl, int(DedupState.COMMITTED), message_id, seq, now_ms + i, *dedup_key)
        head_params = (seq, message_id, u128_to_blob(alloc.last_activity_id), senders[k], preview, now_ms + i, 0, seq,
                       tenant, convs[k])
        head_key = (tenant, convs[k]) if head_read else None
        first = head_read and i < conversations  # the conversation's first call: fencing's epoch read

        def call(reserve_params=reserve_params, record_and_index=record_and_index, log_append=log_append,
                 commit_params=commit_params, head_params=head_params, head_key=head_key, first=first) -> None:
            if first:
                conn.execute(read_epoch, head_key).one()
            if not conn.execute(reserve, reserve_params).one()[0]:
                raise RuntimeError("send floor: the reservation was not applied")
            conn.execute_concurrent(record_and_index, concurrency=len(record_and_index))
            if log_append is not None:
                log_append()
            conn.execute(commit, commit_params)
            if head_key is not None:
                conn.execute(read_head, head_key).one()
            conn.execute(head, head_params)
        calls.append(call)
    return calls


def history_floor(run: BenchRun, tenant: uuid.UUID, conversation: uuid.UUID, bucket: int,
                  limit: int) -> Callable[[], int]:
    """One call of the latest page's floor: head and bucket read together, rows fetched; returns
    the bucket rows it got."""
    store = run.store
    statements = store.baseline_statements()
    bounds, page = statements.history_bounds, statements.history_older
    width = store.constants.message_seq_bucket_width
    items = [(bounds, (tenant, conversation)),
             (page, (tenant, conversation, bucket, (bucket + 1) * width - 1, FIRST_CONVERSATION_SEQ, limit))]

    def call() -> int:
        head, rows = store.connection.execute_concurrent(items, concurrency=len(items))
        head.one()
        return len(list(rows))
    return call
