"""The earliest_available_conversation_seq advancer (design §4.1 bound E, §9 open item).

More: docs/store-internals.md.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from lab.store.plumbing.wall_clock import MS_PER_SECOND
from lab.store.plumbing.context import StoreContext
from lab.store.write.head import EARLIEST_AVAILABLE_DEFAULT
from lab.store.rows.ids import IdLike, check_bigint, parse_uuid, seq_bucket
from lab.store.read.history import FIRST_CONVERSATION_SEQ
from lab.store.write.sequence import SEQ_MAX

__all__ = ["AdvanceSummary", "DEFAULT_MAX_BUCKETS", "EarliestAdvance", "EarliestAdvancer"]

_HEAD_KEY = ("tenant_id", "conversation_id")


@dataclass(frozen=True, kw_only=True)
class EarliestAdvance:
    """One conversation: E before and after, and the message_record partitions read to find it.
    ``settled`` is false when the row (or head) that would move E is younger than the dedup
    window, ``complete`` false when the walk hit ``max_buckets``: then E stayed."""

    tenant_id: uuid.UUID
    conversation_id: uuid.UUID
    previous: int
    earliest: int
    buckets_scanned: int
    settled: bool = True
    complete: bool = True

    @property
    def advanced(self) -> bool:
        return self.earliest > self.previous


@dataclass(frozen=True, kw_only=True)
class AdvanceSummary:
    """A run of :meth:`EarliestAdvancer.advance_all`."""

    conversations: int
    advanced: int
    buckets_scanned: int


DEFAULT_MAX_BUCKETS = 1024  # partition reads per conversation and run


class EarliestAdvancer:
    def __init__(self, ctx: StoreContext, *, max_buckets: int = DEFAULT_MAX_BUCKETS) -> None:
        self._ctx = ctx
        self._max_buckets = max_buckets

    def advance(self, tenant_id: IdLike, conversation_id: IdLike) -> EarliestAdvance | None:
        """Move E of one conversation to its first available row; None without a head."""
        tenant_id, conversation_id = parse_uuid(tenant_id), parse_uuid(conversation_id)
        ctx = self._ctx
        row = ctx.connection.execute(ctx.prepare(
            "SELECT latest_conversation_seq, earliest_available_conversation_seq, updated_at FROM {ks}.conversation_head "
            "WHERE tenant_id = ? AND conversation_id = ?", key_columns=_HEAD_KEY), (tenant_id, conversation_id)).one()
        if row is None or row.latest_conversation_seq is None:
            return None
        return self._advance(tenant_id, conversation_id, row)

    def advance_all(self) -> AdvanceSummary:
        """:meth:`advance` for every conversation_head row of the keyspace (a full table scan)."""
        ctx = self._ctx
        heads = ctx.connection.execute(ctx.prepare(
            "SELECT tenant_id, conversation_id, latest_conversation_seq, earliest_available_conversation_seq, "
            "updated_at FROM {ks}.conversation_head"))
        conversations = advanced = scanned = 0
        for head in heads:
            if head.latest_conversation_seq is None:
                continue
            result = self._advance(head.tenant_id, head.conversation_id, head)
            conversations += 1
            advanced += result.advanced
            scanned += result.buckets_scanned
        return AdvanceSummary(conversations=conversations, advanced=advanced, buckets_scanned=scanned)

    def _advance(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID, head: Any) -> EarliestAdvance:
        ctx = self._ctx
        width = ctx.bucket_width
        high = head.latest_conversation_seq
        earliest = head.earliest_available_conversation_seq
        previous = EARLIEST_AVAILABLE_DEFAULT if earliest is None else earliest
        settled_before_ms = ctx.clock_ms() - ctx.constants.client_dedup_ttl_seconds * MS_PER_SECOND
        # Any row counts, even one without message_id (lab.store.read.history skips those): stopping
        # at it leaves E lower than it could be, which costs a page a read, never a message.
        probe = ctx.prepare("SELECT conversation_seq, created_at FROM {ks}.message_record WHERE tenant_id = ? "
                            "AND conversation_id = ? AND seq_bucket = ? AND conversation_seq >= ? "
                            "AND conversation_seq <= ? ORDER BY conversation_seq ASC LIMIT 1")
        low = max(previous, FIRST_CONVERSATION_SEQ)
        found, scanned, complete = None, 0, True
        if low <= high:
            first_bucket, last_bucket = seq_bucket(low, width), seq_bucket(high, width)
            for bucket in range(first_bucket, last_bucket + 1):
                if scanned == self._max_buckets:
                    complete = False
                    break
                scanned += 1
                found = ctx.connection.execute(probe, (tenant_id, conversation_id, bucket, low, high)).one()
                if found is not None:
                    break
        if found is not None:
            candidate, settled = found.conversation_seq, (found.created_at or 0) <= settled_before_ms
        elif complete:  # nothing left up to H: E = H + 1, except at the top, where H + 1 would be 2**63
            candidate, settled = min(high + 1, SEQ_MAX), (head.updated_at or 0) <= settled_before_ms
        else:
            candidate, settled = previous, True
        new = check_bigint(candidate, column="earliest_available_conversation_seq") if settled else previous
        if new > previous:
            ctx.connection.execute(ctx.prepare(
                "UPDATE {ks}.conversation_head SET earliest_available_conversation_seq = ? "
                "WHERE tenant_id = ? AND conversation_id = ?"), (new, tenant_id, conversation_id))
        return EarliestAdvance(tenant_id=tenant_id, conversation_id=conversation_id, previous=previous,
                               earliest=max(new, previous), buckets_scanned=scanned, settled=settled,
                               complete=complete)
