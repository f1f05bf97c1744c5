"""Reactions (design §2.5, §4.4): per-user rows and an absolute-count summary per message. A
reaction and a self reaction are walks (lab.store.plumbing.steps): ``react`` / ``unreact`` /
``self_reaction`` drive theirs on the calling thread, the ``_async`` twins on the driver's event loop.

More: docs/store-internals.md.
"""
from __future__ import annotations

import functools
import random
import time
import uuid
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from lab.cluster.connection import Stmt
from lab.store.plumbing.context import StoreContext
from lab.store.plumbing.handoff_lock import HandoffLock
from lab.store.plumbing.steps import Blocking, BlockingPool, Cql, Walk, run, start_prepared
from lab.errors import ReactionConflict, ValidationError
from lab.store.rows.ids import check_bigint, check_conversation_seq, check_text_key, parse_uuid, seq_bucket

NO_REACTION = ""  # the reaction_key of a withdrawn reaction: an overwrite, never a DELETE
REACTION_KEY_MAX_BYTES = 64  # lab decision: keys are short enum strings (§2.5); bounds the map
REACTION_SETTLE_MAX_ATTEMPTS = 16  # overwrites before giving up on a summary that keeps changing
REACTION_BACKOFF_BASE_SECONDS = 0.002
REACTION_BACKOFF_MAX_SECONDS = 0.2
_US_PER_MS = 1000
_LOCK_STRIPES = 64
BLOCKING_WORKERS = 2  # react_async's backoff sleeps (a summary another process keeps changing)
_STATEMENTS = ("put", "mine", "detail", "summary", "overwrite")

_SUMMARY_KEY = ("tenant_id", "conversation_id", "seq_bucket", "conversation_seq")
_REACTION_KEY = ("tenant_id", "conversation_id", "conversation_seq", "user_id")


@dataclass(frozen=True, kw_only=True)
class ReactionSummary:
    """Counts of one message by reaction key (zero counts omitted). ``summary_version`` is 0
    when no summary row exists (nobody reacted yet)."""

    tenant_id: uuid.UUID
    conversation_id: uuid.UUID
    conversation_seq: int
    counts: Mapping[str, int] = field(default_factory=dict)
    summary_version: int = 0
    updated_at_ms: int = 0

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def summary_from_row(tenant_id: uuid.UUID, conversation_id: uuid.UUID, row: Any) -> ReactionSummary:
    """A summary from a message_reaction_summary row (conversation_seq, counts, summary_version, updated_at)."""
    counts = {key: n for key, n in sorted((row.counts or {}).items()) if n}
    return ReactionSummary(tenant_id=tenant_id, conversation_id=conversation_id,
                           conversation_seq=row.conversation_seq, counts=counts,
                           summary_version=row.summary_version or 0, updated_at_ms=row.updated_at or 0)


def check_reaction_key(reaction_key: object) -> str:
    if not isinstance(reaction_key, str):
        raise ValidationError(f"reaction_key must be a str, got {type(reaction_key).__name__}",
                              field="reaction_key", value=reaction_key)
    if reaction_key == NO_REACTION:
        raise ValidationError("reaction_key '' is reserved for 'no reaction' (unreact)", field="reaction_key")
    check_text_key(reaction_key, field="reaction_key")
    if len(reaction_key.encode()) > REACTION_KEY_MAX_BYTES:
        raise ValidationError(f"reaction_key is over {REACTION_KEY_MAX_BYTES} bytes", field="reaction_key",
                              value=reaction_key)
    return reaction_key


def count_keys(keys: Iterable[str | None]) -> dict[str, int]:
    """Counts of the detail rows' keys; withdrawn ('') and missing keys do not count."""
    counts: dict[str, int] = {}
    for key in keys:
        if key:
            counts[key] = counts.get(key, 0) + 1
    return counts


class Reactions:
    """React, unreact, self reaction and summaries of one keyspace."""

    def __init__(self, ctx: StoreContext, *, max_attempts: int = REACTION_SETTLE_MAX_ATTEMPTS) -> None:
        self.ctx = ctx
        self.connection = ctx.connection
        self.constants = ctx.constants
        self.max_attempts = max_attempts
        self._clock_ms = ctx.clock_ms
        self._locks = tuple(HandoffLock() for _ in range(_LOCK_STRIPES))
        self._stmts: dict[str, Stmt] = {}
        self._pool = BlockingPool(BLOCKING_WORKERS, "lab-reaction-blocking")  # react_async's blocking steps

    def _stmt(self, name: str) -> Stmt:
        stmt = self._stmts.get(name)
        if stmt is None:
            summary_where = ("WHERE tenant_id = ? AND conversation_id = ? AND seq_bucket = ? "
                             "AND conversation_seq = ?")
            cql, key = {
                "put": ("INSERT INTO {ks}.message_reaction (tenant_id, conversation_id, conversation_seq, "
                        "user_id, reaction_key, created_at) VALUES (?, ?, ?, ?, ?, ?)", ()),
                "mine": ("SELECT reaction_key FROM {ks}.message_reaction WHERE tenant_id = ? "
                         "AND conversation_id = ? AND conversation_seq = ? AND user_id = ?", _REACTION_KEY),
                "detail": ("SELECT reaction_key FROM {ks}.message_reaction WHERE tenant_id = ? "
                           "AND conversation_id = ? AND conversation_seq = ?", ()),
                "summary": (f"SELECT conversation_seq, counts, summary_version, updated_at "
                            f"FROM {{ks}}.message_reaction_summary {summary_where}", _SUMMARY_KEY),
                "overwrite": (f"UPDATE {{ks}}.message_reaction_summary USING TIMESTAMP ? SET counts = counts + ?, "
                              f"summary_version = ?, updated_at = ? {summary_where}", ()),
            }[name]
            stmt = self._stmts[name] = self.ctx.prepare(cql, key_columns=key)
        return stmt

    def _lock(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID, conversation_seq: int) -> HandoffLock:
        return self._locks[hash((tenant_id, conversation_id, conversation_seq)) % _LOCK_STRIPES]

    # -- public ----------------------------------------------------------------------------------

    def react(self, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str, conversation_seq: int,
              user_id: uuid.UUID | str, reaction_key: str) -> ReactionSummary:
        """Set the user's reaction (replacing any earlier one) and return the new summary."""
        return run(self._set(tenant_id, conversation_id, conversation_seq, user_id, check_reaction_key(reaction_key)),
                   self.connection)

    def unreact(self, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str, conversation_seq: int,
                user_id: uuid.UUID | str) -> ReactionSummary:
        """Withdraw the user's reaction (an overwrite with ''; see the module docstring)."""
        return run(self._set(tenant_id, conversation_id, conversation_seq, user_id, NO_REACTION), self.connection)

    def react_async(self, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str, conversation_seq: int,
                    user_id: uuid.UUID | str, reaction_key: str | None) -> Future[ReactionSummary]:
        """:meth:`react` (``reaction_key`` None: :meth:`unreact`) chained on the driver's event loop.
        A bad argument raises at once; any later error is the future's, of the type react raises."""
        walk = self._set(tenant_id, conversation_id, conversation_seq, user_id,
                         NO_REACTION if reaction_key is None else check_reaction_key(reaction_key))
        return start_prepared(walk, self.connection, self._pool, lambda: [self._stmt(name) for name in _STATEMENTS])

    def unreact_async(self, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str, conversation_seq: int,
                      user_id: uuid.UUID | str) -> Future[ReactionSummary]:
        """:meth:`unreact` chained on the driver's event loop (:meth:`react_async` with no reaction key)."""
        return self.react_async(tenant_id, conversation_id, conversation_seq, user_id, None)

    def self_reaction(self, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str,
                      conversation_seq: int, user_id: uuid.UUID | str) -> str | None:
        """The user's own reaction: one point read, for the message detail view only (§4.4)."""
        return run(self._own(tenant_id, conversation_id, conversation_seq, user_id), self.connection)

    def self_reaction_async(self, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str,
                            conversation_seq: int, user_id: uuid.UUID | str) -> Future[str | None]:
        """:meth:`self_reaction`'s read on the driver's event loop. A bad argument raises at once;
        any later error is the future's, of the type self_reaction raises."""
        walk = self._own(tenant_id, conversation_id, conversation_seq, user_id)
        return start_prepared(walk, self.connection, self._pool, lambda: self._stmt("mine"))

    def close(self) -> None:
        """Stop the blocking steps' pool (after the steps queued in it); the async calls then start nothing."""
        self._pool.close()

    def summary(self, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str,
                conversation_seq: int) -> ReactionSummary:
        tenant_id, conversation_id = parse_uuid(tenant_id), parse_uuid(conversation_id)
        seq = check_conversation_seq(conversation_seq)
        return self._read_summary(tenant_id, conversation_id, seq)

    # -- internals -------------------------------------------------------------------------------

    def _bucket(self, seq: int) -> int:
        return seq_bucket(seq, self.constants.message_seq_bucket_width)

    def _read_summary(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID, seq: int) -> ReactionSummary:
        row = self.connection.execute(self._stmt("summary"),
                                      (tenant_id, conversation_id, self._bucket(seq), seq)).one()
        if row is None:
            return ReactionSummary(tenant_id=tenant_id, conversation_id=conversation_id, conversation_seq=seq)
        return summary_from_row(tenant_id, conversation_id, row)

    def _set(self, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str, conversation_seq: int,
             user_id: uuid.UUID | str, reaction_key: str) -> Walk[ReactionSummary]:
        """The reaction's walk, its arguments checked now (a generator that has not started yet)."""
        tenant_id, conversation_id, user_id = parse_uuid(tenant_id), parse_uuid(conversation_id), parse_uuid(user_id)
        seq = check_conversation_seq(conversation_seq)
        return self._steps(tenant_id, conversation_id, seq, user_id, reaction_key)

    def _own(self, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str, conversation_seq: int,
             user_id: uuid.UUID | str) -> Walk[str | None]:
        """The self reaction's walk, its arguments checked now: one step, the point read."""
        tenant_id, conversation_id, user_id = parse_uuid(tenant_id), parse_uuid(conversation_id), parse_uuid(user_id)
        return self._read_own((tenant_id, conversation_id, check_conversation_seq(conversation_seq), user_id))

    def _read_own(self, key: tuple[uuid.UUID, uuid.UUID, int, uuid.UUID]) -> Walk[str | None]:
        (rows,) = yield Cql(((self._stmt("mine"), key),))
        return rows[0].reaction_key if rows and rows[0].reaction_key else None  # '' is a withdrawn reaction

    def _steps(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID, seq: int, user_id: uuid.UUID,
               reaction_key: str) -> Walk[ReactionSummary]:
        """The detail row, then the summary settled, one reactor of this message at a time in this
        process (the lock: a waiting walk waits off the loop thread, handed the lock in turn)."""
        lock = self._lock(tenant_id, conversation_id, seq)
        if not lock.try_acquire():
            yield Blocking(lock.acquire, lock.acquire_async)
        try:
            now_ms = check_bigint(self._clock_ms(), column="created_at")
            yield Cql(((self._stmt("put"), (tenant_id, conversation_id, seq, user_id, reaction_key, now_ms)),))
            return (yield from self._refresh(tenant_id, conversation_id, seq))
        finally:
            lock.release()

    def _refresh(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID, seq: int) -> Walk[ReactionSummary]:
        """Recompute the summary from the detail partition and overwrite it until the stored
        summary agrees with the detail partition (module docstring)."""
        key = (tenant_id, conversation_id, self._bucket(seq), seq)
        for attempt in range(self.max_attempts):
            # Both reads in flight at once: the argument above only needs each check to start
            # after its own reactor's writes, not one read before the other.
            summary_rows, rows = yield Cql(((self._stmt("summary"), key),
                                            (self._stmt("detail"), (tenant_id, conversation_id, seq))))
            row = summary_rows[0] if summary_rows else None
            current = (ReactionSummary(tenant_id=tenant_id, conversation_id=conversation_id, conversation_seq=seq)
                       if row is None else summary_from_row(tenant_id, conversation_id, row))
            counts = count_keys(row.reaction_key for row in rows)
            if dict(current.counts) == counts:
                return current  # settled (or nothing to say: no reaction and no summary yet)
            if attempt > 1:
                # A concurrent reactor of another process keeps winning: jittered backoff, or
                # reactors of one hot message overwrite each other in lockstep.
                yield Blocking(functools.partial(time.sleep, random.uniform(
                    0, min(REACTION_BACKOFF_MAX_SECONDS, REACTION_BACKOFF_BASE_SECONDS * 2 ** attempt))))
            now_ms = check_bigint(self._clock_ms(), column="updated_at")
            version = check_bigint(max(now_ms * _US_PER_MS, current.summary_version + 1), column="summary_version")
            delta = {k: 0 for k in current.counts if k not in counts} | counts
            yield Cql(((self._stmt("overwrite"), (version, delta, version, now_ms, *key)),))
        raise ReactionConflict(
            f"reaction summary of ({tenant_id}, {conversation_id}, {seq}) did not settle after {self.max_attempts} "
            "overwrites; the detail row is written and the next reaction heals the summary",
            table="message_reaction_summary", tenant_id=tenant_id, conversation_id=conversation_id,
            conversation_seq=seq, attempts=self.max_attempts)
