"""conversation_seq allocation with reservation windows, plus the ids allocated beside it
(design §5.1 step 2, §6.3 reference; spec README "Lab decisions").

More: docs/store-internals.md.
"""
from __future__ import annotations

import contextlib
import sqlite3
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

from lab.store.plumbing.sqlite_file import SQLITE_BUSY_TIMEOUT_SECONDS, SqliteFile
from lab.errors import Bit63Violation, InvalidSeq, StoreError, ValidationError
from lab.store.plumbing.wall_clock import US_PER_MS
from lab.store.rows.ids import (BIT63, MessageIdGenerator, check_bigint, check_conversation_seq, message_id_time_ms,
                                parse_uuid)

__all__ = ["Allocation", "SequenceAllocator", "WRITE_TIME_SLOTS", "next_write_time_us"]

SEQ_MAX = BIT63 - 1  # the largest conversation_seq a signed bigint keeps in unsigned order

_SCHEMA = """
CREATE TABLE IF NOT EXISTS seq_window (
    tenant_id       TEXT    NOT NULL,
    conversation_id TEXT    NOT NULL,
    -- last value any writer has reserved; 0 = none yet. Stored as the inclusive end
    -- because the exclusive end of the top window (2**63) does not fit SQLite's INTEGER.
    last_reserved   INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, conversation_id)
);
"""


# Write times of two writers never tie: a tie between two edits of one message
# resolves each cell by value (Cassandra and Scylla alike), so the row would carry one edit's body
# and the other's edited_at_activity_id. Each writer takes the microseconds of its own residue
# class (node_id mod WRITE_TIME_SLOTS) inside the millisecond: 1000 / 16 = 62 allocations per
# millisecond per writer before its write times run ahead of its clock (they never go back).
# Writers whose node_ids are congruent mod 16 can still tie: give concurrent writers node_ids
# that differ mod 16 (the lab's do).
WRITE_TIME_SLOTS = 16


def next_write_time_us(time_ms: int, last_us: int, *, slot: int) -> int:
    """The write time after ``last_us`` for an allocation in millisecond ``time_ms``: at least the
    millisecond's first microsecond, above ``last_us``, and congruent to ``slot`` mod
    WRITE_TIME_SLOTS (so two writers of different slots never hand out the same one)."""
    floor = max(time_ms * US_PER_MS, last_us + 1)
    return floor + (slot - floor) % WRITE_TIME_SLOTS


@dataclass(frozen=True, kw_only=True)
class Allocation:
    conversation_seq: int
    message_id: int
    last_activity_id: int
    # µs write time of the version this allocation starts (an edit's or recall's cells are written
    # at it; lab.store.write.recall): strictly increasing per allocator, in last_activity_id order,
    # never equal to another writer's (WRITE_TIME_SLOTS)
    written_at_us: int = 0


@dataclass
class _Window:
    next_seq: int
    last: int  # inclusive


class SequenceAllocator:
    """Per-writer allocator over a shared durable reservation file. Thread-safe."""

    def __init__(self, path: Path | str, *, window: int, id_generator: MessageIdGenerator,
                 busy_timeout_seconds: float = SQLITE_BUSY_TIMEOUT_SECONDS) -> None:
        if not isinstance(window, int) or isinstance(window, bool) or window < 1:
            raise ValidationError(f"seq reservation window must be a positive int, got {window!r}", field="window")
        self.path = str(path)
        self.window = window
        self.ids = id_generator
        self._busy_timeout_seconds = busy_timeout_seconds
        self._lock = threading.Lock()  # the §5.1 step-2 critical section
        self._windows: dict[tuple[uuid.UUID, uuid.UUID], _Window] = {}
        self.reservations = 0  # windows this instance reserved (tests, benchmarks)
        self._written_at_us = 0  # the last write time handed out
        self._db = SqliteFile(path, schema=_SCHEMA, error=StoreError, what="sequence reservations",
                              busy_timeout_seconds=self._busy_timeout_seconds)

    def __repr__(self) -> str:
        return f"SequenceAllocator({self.path!r}, window={self.window})"

    # -- durable windows ----------------------------------------------------------------------
    def _session(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        return self._db.session()

    def _reserve(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID, *, floor: int = 1) -> _Window:
        """Durably take the next window (starting at >= ``floor``) for this conversation."""
        key = (str(tenant_id), str(conversation_id))

        def reserve(conn: sqlite3.Connection) -> tuple[int, int]:
            row = conn.execute("SELECT last_reserved FROM seq_window WHERE tenant_id = ? AND conversation_id = ?",
                               key).fetchone()
            first = max((row[0] if row else 0) + 1, floor)
            if first > SEQ_MAX:
                raise Bit63Violation(f"conversation_seq {first} would set bit 63: the conversation's sequence "
                                     "is exhausted", column="conversation_seq", value=first,
                                     tenant_id=tenant_id, conversation_id=conversation_id)
            last = min(first + self.window - 1, SEQ_MAX)
            conn.execute("INSERT INTO seq_window (tenant_id, conversation_id, last_reserved) VALUES (?, ?, ?) "
                         "ON CONFLICT (tenant_id, conversation_id) DO UPDATE SET last_reserved = excluded.last_reserved",
                         (*key, last))
            return first, last

        first, last = self._db.write(reserve)
        self.reservations += 1
        return _Window(next_seq=first, last=last)

    # -- allocation ---------------------------------------------------------------------------
    def next_seq(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID) -> int:
        return self.allocate(tenant_id, conversation_id).conversation_seq

    def allocate(self, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str) -> Allocation:
        """The next conversation_seq of this writer, with a fresh message_id and last_activity_id,
        and the write time of the version it starts (``written_at_us``: in activity order)."""
        return self._allocate(parse_uuid(tenant_id), parse_uuid(conversation_id), reserve=True)  # type: ignore[return-value]

    def allocate_now(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID) -> Allocation | None:
        """:meth:`allocate` from the window in memory, or None when that needs a durable
        reservation first (a file write: the caller makes it where blocking is allowed)."""
        return self._allocate(tenant_id, conversation_id, reserve=False)

    def _allocate(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID, *, reserve: bool) -> Allocation | None:
        key = (tenant_id, conversation_id)
        with self._lock:
            window = self._windows.get(key)
            if window is None or window.next_seq > window.last:
                if not reserve:
                    return None
                window = self._reserve(tenant_id, conversation_id)
                self._windows[key] = window
            seq = check_conversation_seq(window.next_seq)
            window.next_seq += 1
            message_id, activity = self.ids.next_id(), self.ids.next_id()
            self._written_at_us = next_write_time_us(message_id_time_ms(activity), self._written_at_us,
                                                     slot=self.ids.node_id % WRITE_TIME_SLOTS)
            return Allocation(conversation_seq=seq, message_id=message_id, last_activity_id=activity,
                              written_at_us=self._written_at_us)

    def next_activity_id(self) -> int:
        """An activity id outside any conversation_seq (a resumed send's last_activity_id)."""
        return self.ids.next_id()

    def advance_to(self, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str, next_seq: int) -> None:
        """Make this conversation's next value at least ``next_seq`` (never lowers it).

        For migrations and tests (S-2 near 2**63, S-3 jumps): it reserves a window starting
        there, durably, so every writer continues above it.
        """
        tenant_id, conversation_id = parse_uuid(tenant_id), parse_uuid(conversation_id)
        next_seq = check_bigint(next_seq, column="conversation_seq")
        if next_seq < 1:
            raise InvalidSeq(f"next_seq must be >= 1, got {next_seq}", column="conversation_seq", value=next_seq)
        with self._lock:
            self._windows[(tenant_id, conversation_id)] = self._reserve(tenant_id, conversation_id, floor=next_seq)

    def close(self) -> None:
        self._db.close()
