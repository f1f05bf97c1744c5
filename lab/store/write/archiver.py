"""HistoryArchiver: archiver mode of the design's implementation note (§2.1, 2026-09-26).

More: docs/store-internals.md.
"""
from __future__ import annotations

from lab.store.plumbing.wall_clock import US_PER_MS
from lab.errors import ValidationError
from lab.store.plumbing.context import StoreContext
from lab.cluster.connection import Stmt
from lab.store.outbox import KIND_MESSAGE, MessagePayload, Outbox, OutboxEntry
from lab.store.write.send import record_statements

__all__ = ["ARCHIVER_GROUP", "DEFAULT_ARCHIVE_BATCH", "HistoryArchiver", "archive_statements"]

ARCHIVER_GROUP = "history-archiver"
DEFAULT_ARCHIVE_BATCH = 500


def archive_statements(ctx: StoreContext, entry: OutboxEntry, *, now_ms: int) -> list[tuple[Stmt, tuple]] | None:
    """The whole-row upserts that archive one logged message, or None when it has expired.

    Remaining TTL and ``USING TIMESTAMP created_at``: every cell of the archived row is older
    than any recall / edit cell, so archiving (now, again, or early from lab.store.write.recall)
    never undoes one, and the row it leaves is whole whatever was applied first.
    """
    payload = entry.record.payload
    if not isinstance(payload, MessagePayload):
        raise ValidationError(f"only a logged message is archived, not a {entry.record.kind} event",
                              kind=entry.record.kind)
    record = payload.record
    ttl = ctx.retention.remaining_ttl_seconds(record.retention_class, record.tenant_id,
                                              created_at_ms=record.created_at, now_ms=now_ms)
    if ttl is None:
        return None
    return record_statements(ctx, record, ttl, timestamp_us=record.created_at * US_PER_MS)


class HistoryArchiver:
    def __init__(self, ctx: StoreContext, outbox: Outbox, *, group: str = ARCHIVER_GROUP,
                 batch_size: int = DEFAULT_ARCHIVE_BATCH) -> None:
        self.ctx = ctx
        self.outbox = outbox
        self.group = group
        self.batch_size = batch_size

    def lag(self, *, group: str | None = None) -> int:
        """Outbox entries (messages and CONTROL events) not yet consumed by the group."""
        group = _check_group(self.group if group is None else group)
        return self.outbox.lag(group)

    def run_once(self, *, max_batches: int | None = None, group: str | None = None) -> int:
        """Archive everything committed so far (or ``max_batches`` batches); returns rows written.
        ``group`` names another consumer group (a second archiver replaying the log)."""
        group = _check_group(self.group if group is None else group)
        if max_batches is not None and (not isinstance(max_batches, int) or isinstance(max_batches, bool)
                                        or max_batches < 1):
            raise ValidationError(f"max_batches must be None or an int >= 1, got {max_batches!r}",
                                  field="max_batches", value=max_batches)
        written = batches = 0
        while max_batches is None or batches < max_batches:
            batch = self.outbox.consume(group, self.batch_size)  # every partition, from the group's offsets
            if not batch:
                break
            entries = batch.entries
            self.ctx.faults.hit("archiver_after_read")
            now_ms = self.ctx.clock_ms()
            statements = []
            for entry in entries:
                if entry.record.kind != KIND_MESSAGE:
                    continue
                archived = archive_statements(self.ctx, entry, now_ms=now_ms)
                if archived is None:
                    self.ctx.alerts.incr("archiver_expired_skipped")
                    continue
                statements.extend(archived)
                written += 1
            if statements:
                self.ctx.connection.execute_concurrent(statements)
            self.ctx.faults.hit("archiver_after_write")
            self.outbox.commit_batch(group, batch)
            self.ctx.faults.hit("archiver_after_commit")
            batches += 1
        return written


def _check_group(group: object) -> str:
    if not isinstance(group, str) or not group:
        raise ValidationError(f"a consumer group is a non-empty str, got {group!r}", field="group", value=group)
    return group
