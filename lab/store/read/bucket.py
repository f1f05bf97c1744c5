"""One partition read of message_record in a history page (design §4.1, §4.2): the read as a
value (:class:`BucketQuery`: which partition, direction, bounds and LIMIT), what it gave the page
(:class:`BucketRead`), the S-4 bound every partition read is checked against, and the partial rows
a read skips. Used by the history walk (lab.store.read.history) and the batch read (S-4, partial
rows).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from lab.errors import BucketOverflow
from lab.store.plumbing.context import StoreContext
from lab.store.rows.records import Message

__all__ = ["BucketQuery", "BucketRead", "Direction", "check_bucket_rows", "older_params", "whole_rows"]

Direction = Literal["older", "newer"]


def check_bucket_rows(rows: list[Any], *, width: int, table: str, tenant_id: uuid.UUID,
                      conversation_id: uuid.UUID, seq_bucket: int) -> list[Any]:
    """§4.2 / S-4: one partition can never hold more than W rows; more is a bucketing bug
    (W changed after tables exist, float division in seq_bucket ...), never data to page."""
    if len(rows) > width:
        raise BucketOverflow(
            f"{table} partition ({tenant_id}, {conversation_id}, seq_bucket={seq_bucket}) returned "
            f"{len(rows)} rows, over the bucket width {width}: the bucketing is broken",
            table=table, tenant_id=tenant_id, conversation_id=conversation_id, seq_bucket=seq_bucket,
            rows=len(rows), width=width)
    return rows


def whole_rows(rows: list[Any], ctx: StoreContext) -> list[Any]:
    """``rows`` without the partial ones (no message_id), each of which is counted."""
    whole = [row for row in rows if row.message_id is not None]
    if len(whole) != len(rows):
        ctx.alerts.incr("partial_rows_skipped", len(rows) - len(whole))
    return whole


def older_params(tenant_id: uuid.UUID, conversation_id: uuid.UUID, bucket: int, *, anchor: int, bound: int,
                 fetch: int) -> tuple[Any, ...]:
    """Bind values of an ``older`` read (:meth:`BucketQuery.params`), without building the query: the
    latest page issues its first read before it knows its bounds."""
    return tenant_id, conversation_id, bucket, anchor - 1, bound, fetch


@dataclass(frozen=True, kw_only=True)
class BucketQuery:
    """One bucket read of a page: the partition, the direction's statement, ``anchor``
    exclusive, ``bound`` inclusive, at most ``fetch`` rows."""

    tenant_id: uuid.UUID
    conversation_id: uuid.UUID
    bucket: int
    direction: Direction
    anchor: int
    bound: int
    fetch: int

    @property
    def descending(self) -> bool:
        return self.direction == "older"

    def params(self) -> tuple[Any, ...]:
        """Bind values of the direction's statement (``older`` / ``newer``). Every bound the CQL
        gets is inclusive: an older read binds ``anchor - 1``, since ``anchor`` itself may be 2**63,
        one past the top seq and past any bigint."""
        if self.descending:
            return older_params(self.tenant_id, self.conversation_id, self.bucket, anchor=self.anchor,
                                bound=self.bound, fetch=self.fetch)
        return self.tenant_id, self.conversation_id, self.bucket, self.anchor, self.bound, self.fetch

    def covered(self, last_seq: int | None, *, more: bool) -> tuple[int, int]:
        """(low, high) of the seqs this read covered: all of its range, or up to its last row
        when its LIMIT cut it."""
        reached = last_seq if more else self.bound
        return (reached, self.anchor - 1) if self.descending else (self.anchor + 1, reached)


class BucketRead(NamedTuple):
    """What one bucket read gave a page."""

    messages: list[Message]
    more: bool              # the read hit its LIMIT: the partition may hold more past last_seq
    last_seq: int | None    # conversation_seq of the last row the read returned (partial rows too)
