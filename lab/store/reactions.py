"""Reactions (design §2.5, §4.4): per-user rows and an absolute-count summary per message.

Two tables:

- ``message_reaction ((tenant, conversation, conversation_seq), user_id) -> reaction_key``:
  one row per user per message, the truth. A user has at most one reaction; reacting again
  overwrites it.
- ``message_reaction_summary`` (message_record's partition key, clustered by
  conversation_seq): ``counts map<text,int>`` and ``summary_version``, read by the grouped
  batch read from the same partitions as the bodies (§4.4).

Unreact without DELETE (§3 forbids DELETE on every table). The user's row is overwritten
with ``reaction_key = ''`` (:data:`NO_REACTION`): an empty string is a live cell, not a
tombstone (only a null would be one), so the detail partition stays tombstone-free; ``''``
is therefore reserved and rejected as a reaction key.

Summary consistency. ``counts`` is never incremented: every react / unreact recomputes the
whole map from the message's detail partition (the truth) and overwrites it with
``summary_version + 1`` under a compare-and-set ``IF summary_version = <read version>``
(first summary: ``IF summary_version = null``). Why this is enough for concurrent reactors
on any number of processes: the version is read before the detail partition, and a CAS
only applies when no other CAS landed since that version read; so the summary left by the
last applied CAS was computed from a detail read that followed every earlier applied CAS,
each of which followed its own reactor's detail write. Every completed reaction is in the
final map, versions go up by exactly one per applied overwrite (monotonic, what the
absolute-value REACTION_UPDATE of §13.6.2 needs), and a summary left stale by a crash
between the two writes heals on the message's next reaction. The price is one Paxos round
per reaction on this small table; the design names client_dedup as its only LWT table
because it keeps Paxos off the *send* path (message_record, conversation_head), which this
is not. Within one process reactors of the same message queue on a striped lock instead of
fighting in Paxos, so CAS retries only happen between processes.

No collection tombstones either: replacing a non-frozen map (``SET counts = ?``) writes a
range tombstone on every overwrite, so the map is updated with ``counts = counts + ?``
carrying every new count plus a 0 for each key that dropped out; readers drop the zeros.
"""
from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lab.cluster.connection import Stmt
from lab.store.context import StoreContext
from lab.errors import ReactionConflict, ValidationError
from lab.store.ids import check_bigint, check_conversation_seq, check_text_key, parse_uuid, seq_bucket

NO_REACTION = ""  # the reaction_key of a withdrawn reaction: an overwrite, never a DELETE
REACTION_KEY_MAX_BYTES = 64  # lab decision: keys are short enum strings (§2.5); bounds the map
REACTION_CAS_MAX_ATTEMPTS = 16
REACTION_CAS_BACKOFF_BASE_SECONDS = 0.002
REACTION_CAS_BACKOFF_MAX_SECONDS = 0.2
_LOCK_STRIPES = 64

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

    def __init__(self, ctx: StoreContext, *, max_attempts: int = REACTION_CAS_MAX_ATTEMPTS) -> None:
        self.ctx = ctx
        self.connection = ctx.connection
        self.constants = ctx.constants
        self.max_attempts = max_attempts
        self._clock_ms = ctx.clock_ms
        self._locks = tuple(threading.Lock() for _ in range(_LOCK_STRIPES))
        self._stmts: dict[str, Stmt] = {}
        self._retries_lock = threading.Lock()
        self.cas_retries = 0  # lost compare-and-sets, across all messages (a contention gauge)

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
                "cas_first": (f"UPDATE {{ks}}.message_reaction_summary SET counts = counts + ?, "
                              f"summary_version = ?, updated_at = ? {summary_where} IF summary_version = null", ()),
                "cas_next": (f"UPDATE {{ks}}.message_reaction_summary SET counts = counts + ?, "
                             f"summary_version = ?, updated_at = ? {summary_where} IF summary_version = ?", ()),
            }[name]
            stmt = self._stmts[name] = self.ctx.prepare(cql, key_columns=key)
        return stmt

    def _lock(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID, conversation_seq: int) -> threading.Lock:
        return self._locks[hash((tenant_id, conversation_id, conversation_seq)) % _LOCK_STRIPES]

    # -- public ----------------------------------------------------------------------------------

    def react(self, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str, conversation_seq: int,
              user_id: uuid.UUID | str, reaction_key: str) -> ReactionSummary:
        """Set the user's reaction (replacing any earlier one) and return the new summary."""
        return self._set(tenant_id, conversation_id, conversation_seq, user_id, check_reaction_key(reaction_key))

    def unreact(self, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str, conversation_seq: int,
                user_id: uuid.UUID | str) -> ReactionSummary:
        """Withdraw the user's reaction (an overwrite with ''; see the module docstring)."""
        return self._set(tenant_id, conversation_id, conversation_seq, user_id, NO_REACTION)

    def self_reaction(self, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str,
                      conversation_seq: int, user_id: uuid.UUID | str) -> str | None:
        """The user's own reaction: one point read, for the message detail view only (§4.4)."""
        tenant_id, conversation_id, user_id = parse_uuid(tenant_id), parse_uuid(conversation_id), parse_uuid(user_id)
        seq = check_conversation_seq(conversation_seq)
        row = self.connection.execute(self._stmt("mine"), (tenant_id, conversation_id, seq, user_id)).one()
        return row.reaction_key if row is not None and row.reaction_key else None

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
             user_id: uuid.UUID | str, reaction_key: str) -> ReactionSummary:
        tenant_id, conversation_id, user_id = parse_uuid(tenant_id), parse_uuid(conversation_id), parse_uuid(user_id)
        seq = check_conversation_seq(conversation_seq)
        with self._lock(tenant_id, conversation_id, seq):
            now_ms = check_bigint(self._clock_ms(), column="created_at")
            self.connection.execute(self._stmt("put"), (tenant_id, conversation_id, seq, user_id, reaction_key, now_ms))
            return self._refresh(tenant_id, conversation_id, seq)

    def _refresh(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID, seq: int) -> ReactionSummary:
        """Recompute the summary from the detail partition and CAS it in (module docstring)."""
        bucket = self._bucket(seq)
        for attempt in range(self.max_attempts):
            # Order matters: version first, details second, CAS last (see the module docstring).
            current = self._read_summary(tenant_id, conversation_id, seq)
            rows = self.connection.execute(self._stmt("detail"), (tenant_id, conversation_id, seq))
            counts = count_keys(row.reaction_key for row in rows)
            delta = {key: 0 for key in current.counts if key not in counts} | counts
            version = check_bigint(current.summary_version + 1, column="summary_version")
            now_ms = check_bigint(self._clock_ms(), column="updated_at")
            key = (tenant_id, conversation_id, bucket, seq)
            if current.summary_version == 0:
                result = self.connection.execute(self._stmt("cas_first"), (delta, version, now_ms, *key))
            else:
                result = self.connection.execute(self._stmt("cas_next"),
                                                 (delta, version, now_ms, *key, current.summary_version))
            if result.was_applied:
                return ReactionSummary(tenant_id=tenant_id, conversation_id=conversation_id, conversation_seq=seq,
                                       counts=dict(sorted(counts.items())), summary_version=version,
                                       updated_at_ms=now_ms)
            with self._retries_lock:
                self.cas_retries += 1
            # Jittered backoff: reactors of one hot message on several processes collide in lockstep otherwise.
            time.sleep(random.uniform(0, min(REACTION_CAS_BACKOFF_MAX_SECONDS,
                                             REACTION_CAS_BACKOFF_BASE_SECONDS * 2 ** attempt)))
        raise ReactionConflict(
            f"reaction summary of ({tenant_id}, {conversation_id}, {seq}) lost {self.max_attempts} "
            "compare-and-sets in a row; the detail row is written and the next reaction heals the summary",
            table="message_reaction_summary", tenant_id=tenant_id, conversation_id=conversation_id,
            conversation_seq=seq, attempts=self.max_attempts)
