"""The store's own CQL floors: each path's exact statements, issued raw, nothing else.

More: docs/bench-internals.md.
"""
from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lab.bench.store_paths.recording import BenchRun, body
from lab.cluster.connection import Stmt
from lab.store import (DedupState, FIRST_CONVERSATION_SEQ, Message, MessageType, OutboxRecord, RetentionClass,
                       seq_bucket, u128_to_blob, wall_clock_ms)

__all__ = ["FloorKeys", "SendFloorPlan", "history_floor", "history_floor_items", "send_floor_calls",
           "send_floor_plans"]

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


@dataclass(frozen=True, kw_only=True)
class SendFloorPlan:
    """One send floor call's statements and bound values, built before the clock: the blocking
    floors (:func:`send_floor_calls`) and the callback-chained one (lab.bench.store_paths.callback_floors)
    issue the same plan. ``fencing_read``: the conversation's first call reads its epoch first;
    ``head_read``: the head read before the head write (None: no head read). The outbox append:
    ``log_append`` a blocking call bound to the store's log, or ``log_record`` the sealed record
    alone, which a chain appends to a log of its own without blocking (None: no append)."""

    reserve: tuple[Stmt, tuple]
    record_and_index: list[tuple[Stmt, tuple]]
    log_append: Callable[[], None] | None
    commit: tuple[Stmt, tuple]
    head_read: tuple[Stmt, tuple] | None
    head_write: tuple[Stmt, tuple]
    fencing_read: tuple[Stmt, tuple] | None
    log_record: OutboxRecord | None = None


def send_floor_plans(run: BenchRun, n: int, *, conversations: int, outbox: bool = True,
                     head_read: bool = False, log_record: bool = False, keys: FloorKeys | None = None,
                     start: int = 0) -> list[SendFloorPlan]:
    """``n`` plans of the send floor, spread round-robin over ``conversations`` of their own
    (their own sequence windows), each a new client_message_id of its conversation's sender;
    ``outbox=False``: without the log append (``send_floor_without_outbox``); ``head_read=True``:
    with the head read before each head write and the fencing read on each conversation's first
    call (``send_floor_with_head_read``); ``log_record=True`` (with ``outbox=False``): the log
    record alone, sealed, for a chain's own log (``send_logged_callback_floor``). Built a batch
    at a time (a long run need not hold every call at once): ``keys`` from the first batch
    (``FloorKeys.new``) and ``start`` the number of calls built before, so the calls continue the
    same conversations and only a conversation's first call reads its epoch."""
    if outbox and log_record:
        raise ValueError("a plan appends once: the store's log (outbox) or a chain's own (log_record), not both")
    p, store = run.params, run.store
    statements = store.baseline_statements()
    width = store.constants.message_seq_bucket_width
    dedup_ttl = store.constants.client_dedup_ttl_seconds
    keys = keys if keys is not None else FloorKeys.new(conversations)
    tenant, convs, senders = keys.tenant, keys.conversations, keys.senders
    now_ms = wall_clock_ms()
    ttl = store.retention.remaining_ttl_seconds(RetentionClass.DEFAULT, tenant, created_at_ms=now_ms, now_ms=now_ms)
    preview = bytes(_PREVIEW_OVERHEAD_BYTES + min(p.body_bytes, _PREVIEW_MAX_BYTES))
    plans = []
    for i in range(start, start + n):
        k = i % conversations
        alloc = store.seeding.allocate(tenant, convs[k])
        seq, client_id = alloc.conversation_seq, run.client_id("floor")
        message = Message(tenant_id=tenant, conversation_id=convs[k], seq_bucket=seq_bucket(seq, width),
                          conversation_seq=seq, message_id=alloc.message_id, last_activity_id=alloc.last_activity_id,
                          sender_id=senders[k], sender_device_id=senders[k], client_message_id=client_id,
                          message_type=MessageType.TEXT, body=body(p.body_bytes, i), created_at_ms=now_ms + i)
        message_id = u128_to_blob(alloc.message_id)
        dedup_key = (tenant, senders[k], client_id)
        head_key = (tenant, convs[k])
        plans.append(SendFloorPlan(
            reserve=(statements.reserve, (*dedup_key, message_id, seq, int(DedupState.RESERVED), now_ms + i)),
            record_and_index=store.seeding.statements(message, ttl_seconds=ttl),
            log_append=store.seeding.log_append(message) if outbox else None,
            log_record=store.seeding.log_record(message) if log_record else None,
            commit=(statements.commit, (dedup_ttl, int(DedupState.COMMITTED), message_id, seq, now_ms + i,
                                        *dedup_key)),
            head_read=(statements.head_read, head_key) if head_read else None,
            head_write=(statements.head_write, (seq, message_id, u128_to_blob(alloc.last_activity_id), senders[k],
                                                preview, now_ms + i, 0, seq, *head_key)),
            # the conversation's first call: fencing's epoch read
            fencing_read=(statements.fencing_read, head_key) if head_read and i < conversations else None))
    return plans


def send_floor_calls(run: BenchRun, n: int, **options: Any) -> list[Callable[[], None]]:
    """``n`` ready calls of the send floor (:func:`send_floor_plans`'s options), each issuing its
    plan from the calling thread, blocking on each statement (``execute``)."""
    conn = run.store.connection

    def call(plan: SendFloorPlan) -> None:
        if plan.fencing_read is not None:
            conn.execute(*plan.fencing_read).one()
        if not conn.execute(*plan.reserve).one()[0]:
            raise RuntimeError("send floor: the reservation was not applied")
        conn.execute_concurrent(plan.record_and_index, concurrency=len(plan.record_and_index))
        if plan.log_append is not None:
            plan.log_append()
        conn.execute(*plan.commit)
        if plan.head_read is not None:
            conn.execute(*plan.head_read).one()
        conn.execute(*plan.head_write)
    return [functools.partial(call, plan) for plan in send_floor_plans(run, n, **options)]


def history_floor_items(run: BenchRun, tenant: uuid.UUID, conversation: uuid.UUID, bucket: int,
                        limit: int) -> list[tuple[Stmt, tuple]]:
    """The latest page's two statements with their values: the head's bounds and the bucket."""
    statements = run.store.baseline_statements()
    width = run.store.constants.message_seq_bucket_width
    return [(statements.history_bounds, (tenant, conversation)),
            (statements.history_older, (tenant, conversation, bucket, (bucket + 1) * width - 1,
                                        FIRST_CONVERSATION_SEQ, limit))]


def history_floor(run: BenchRun, tenant: uuid.UUID, conversation: uuid.UUID, bucket: int,
                  limit: int) -> Callable[[], int]:
    """One call of the latest page's floor: head and bucket read together, rows fetched; returns
    the bucket rows it got."""
    conn = run.store.connection
    items = history_floor_items(run, tenant, conversation, bucket, limit)

    def call() -> int:
        head, rows = conn.execute_concurrent(items, concurrency=len(items))
        head.one()
        return len(list(rows))
    return call
