"""The outbox: the commit log every committed message and CONTROL event goes to (§5.1 step 4).

Production appends to Redpanda with an idempotent producer and acks=all (ADR-0006/0012);
fanout and the HistoryArchiver consume it. Here it is an interface (:class:`Outbox`) behind
an explicit registry (:data:`OUTBOXES`, nothing loaded at import time) and one durable
implementation, :class:`LocalOutbox`, that runs on this machine.

Semantics the store relies on, which an implementation must keep:

- ``append`` is idempotent by (tenant_id, conversation_id, conversation_seq): a replayed
  append (a send resumed after a crash) returns the entry already stored, first write wins.
  Redpanda's idempotent producer only removes producer-retry duplicates; the key-level
  idempotency stands for that plus the consumers' idempotent upserts.
- the log has ``partitions`` partitions (1 for the local file; a Kafka topic is partitioned
  by conversation, so one conversation's entries keep their order); offsets, ``read``,
  ``end_offset`` and commits are per partition. Offsets increase in append order within a
  partition; ``read(from_offset, partition=p)`` returns entries at or after it.
- consumer groups: ``commit(group, offset)`` records the next offset the group will read;
  it never moves backwards, so a late commit of an old batch cannot re-deliver what
  a newer commit already covered. ``consume(group)`` / ``commit_batch(group, batch)`` walk
  every partition from the group's committed offsets (the archiver and the recovery use them).
- ``get`` (by key) and ``controls_for`` (CONTROL events of one target) serve the store's
  recovery paths: a retried send replays its first ack, a retried recall finds its event.
  A Redpanda deployment serves them from a compacted topic or the hot window;
  lab.store.outbox.kafka_log serves them from an index it builds by tailing the partitions.

Implementations are registered by name in :data:`OUTBOXES`; a name may map to
``"module:Class"`` so that an implementation's client library is imported only when used.

    kafka_log    KafkaOutbox, the log over the Kafka protocol ("kafka")
    kafka_index  the index it builds by tailing the partitions (get, controls_for)
"""
from __future__ import annotations

import abc
import contextlib
import importlib
import json
import sqlite3
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.store.plumbing.wall_clock import Clock, wall_clock_ms
from lab.store.plumbing.sqlite_file import SQLITE_BUSY_TIMEOUT_SECONDS, GroupCommit, SqliteFile
from lab.errors import OutboxError, ValidationError
from lab.store.rows.ids import check_conversation_seq, parse_uuid

__all__ = ["CONTROL_KINDS", "LocalOutbox", "OUTBOXES", "Outbox", "OutboxBatch", "OutboxEntry", "OutboxRecord",
           "OutboxView",
           "RECORD_KINDS", "open_outbox"]

KIND_MESSAGE = "message"
KIND_RECALL = "recall"
KIND_EDIT = "edit"
CONTROL_KINDS = (KIND_RECALL, KIND_EDIT)
RECORD_KINDS = (KIND_MESSAGE, *CONTROL_KINDS)
DEFAULT_READ_LIMIT = 1000


@dataclass(frozen=True, kw_only=True)
class OutboxRecord:
    """One log record. ``payload`` is JSON-ready (the message's encoded columns, or the
    CONTROL event's fields); ``target_seq`` is the message a CONTROL event acts on."""

    tenant_id: uuid.UUID
    conversation_id: uuid.UUID
    conversation_seq: int
    kind: str
    payload: Mapping[str, Any] = field(default_factory=dict, repr=False)
    target_seq: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "tenant_id", parse_uuid(self.tenant_id))
        object.__setattr__(self, "conversation_id", parse_uuid(self.conversation_id))
        check_conversation_seq(self.conversation_seq)
        if self.kind not in RECORD_KINDS:
            raise ValidationError(f"unknown outbox record kind {self.kind!r}", kind=self.kind)
        if (self.kind in CONTROL_KINDS) != (self.target_seq is not None):
            raise ValidationError("CONTROL records (and only they) carry a target_seq", kind=self.kind)
        if self.target_seq is not None:
            check_conversation_seq(self.target_seq, column="target_seq")


@dataclass(frozen=True, kw_only=True)
class OutboxEntry:
    offset: int
    record: OutboxRecord
    appended_at_ms: int
    duplicate: bool = False  # True when append() found the key already stored
    partition: int = 0


@dataclass(frozen=True, kw_only=True)
class OutboxBatch:
    """One ``consume`` of a group: the entries, and per partition the offset the group reads
    next once the batch is committed (past entries an implementation skipped, e.g. replayed
    appends of a key already in the log)."""

    entries: tuple[OutboxEntry, ...]
    next_offsets: Mapping[int, int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.next_offsets)


class Outbox(abc.ABC):
    """The commit-log interface. Implementations must be safe for concurrent callers."""

    @abc.abstractmethod
    def append(self, record: OutboxRecord) -> OutboxEntry:
        """Durably append (idempotent by key); returns the stored entry."""

    @abc.abstractmethod
    def get(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID, conversation_seq: int) -> OutboxEntry | None:
        """The entry with this key, if any."""

    @abc.abstractmethod
    def controls_for(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID, target_seq: int,
                     kind: str) -> list[OutboxEntry]:
        """CONTROL entries of ``kind`` aimed at ``target_seq``, in log order."""

    @abc.abstractmethod
    def read(self, from_offset: int, limit: int = DEFAULT_READ_LIMIT, *, partition: int = 0) -> list[OutboxEntry]:
        """Up to ``limit`` entries of ``partition`` with offset >= ``from_offset``, in offset order."""

    @abc.abstractmethod
    def end_offset(self, *, partition: int = 0) -> int:
        """The offset the next append to ``partition`` will get (one past its last entry)."""

    @abc.abstractmethod
    def commit(self, group: str, offset: int, *, partition: int = 0) -> int:
        """Record ``offset`` as the next one ``group`` reads in ``partition``; returns the committed value."""

    @abc.abstractmethod
    def committed(self, group: str, *, partition: int = 0) -> int:
        """The group's committed offset in ``partition`` (0 for a group that never committed)."""

    @property
    def partitions(self) -> int:
        return 1

    def consume(self, group: str, limit: int = DEFAULT_READ_LIMIT) -> OutboxBatch:
        """Up to ``limit`` entries after the group's committed offsets, every partition."""
        entries: list[OutboxEntry] = []
        next_offsets: dict[int, int] = {}
        for partition in range(self.partitions):
            if len(entries) >= limit:
                break
            got = self.read(self.committed(group, partition=partition), limit - len(entries), partition=partition)
            if got:
                entries += got
                next_offsets[partition] = got[-1].offset + 1
        return OutboxBatch(entries=tuple(entries), next_offsets=next_offsets)

    def commit_batch(self, group: str, batch: OutboxBatch) -> None:
        """Commit the group past ``batch`` (after its entries were processed)."""
        for partition, offset in batch.next_offsets.items():
            self.commit(group, offset, partition=partition)

    def lag(self, group: str) -> int:
        """Entries (messages and CONTROL events) the group has not consumed yet."""
        return sum(self.end_offset(partition=p) - max(self.committed(group, partition=p), 1)
                   for p in range(self.partitions))

    def scan(self, *, batch: int = DEFAULT_READ_LIMIT) -> list[OutboxEntry]:
        """Every entry of every partition (verification and audits; not a hot path)."""
        out: list[OutboxEntry] = []
        for partition in range(self.partitions):
            offset = 0
            while got := self.read(offset, batch, partition=partition):
                out += got
                offset = got[-1].offset + 1
        return out

    def close(self) -> None:
        pass

    def __enter__(self) -> Outbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
    log_offset       INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id        TEXT    NOT NULL,
    conversation_id  TEXT    NOT NULL,
    conversation_seq INTEGER NOT NULL,
    kind             TEXT    NOT NULL,
    target_seq       INTEGER,
    payload          TEXT    NOT NULL,
    appended_at_ms   INTEGER NOT NULL,
    UNIQUE (tenant_id, conversation_id, conversation_seq)
);
CREATE INDEX IF NOT EXISTS outbox_target ON outbox (tenant_id, conversation_id, target_seq)
    WHERE target_seq IS NOT NULL;
CREATE TABLE IF NOT EXISTS consumer_offset (
    group_name  TEXT PRIMARY KEY,
    next_offset INTEGER NOT NULL
);
"""
_COLUMNS = "log_offset, tenant_id, conversation_id, conversation_seq, kind, target_seq, payload, appended_at_ms"


class LocalOutbox(Outbox):
    """The log in a SQLite file under the store's state_dir (WAL; threads and processes).

    An append commits before it returns (``synchronous=FULL``), which is the local
    equivalent of acks=all: once ``append`` returned, a crash does not lose the entry.
    Concurrent appends of one process share a transaction and its fsync (group commit,
    :class:`~lab.store.plumbing.sqlite_file.GroupCommit`); each still returns after that COMMIT.
    """

    def __init__(self, path: Path | str, *, busy_timeout_seconds: float = SQLITE_BUSY_TIMEOUT_SECONDS,
                 clock_ms: Clock = wall_clock_ms) -> None:
        self.path = str(path)
        self._busy_timeout_seconds = busy_timeout_seconds
        self._clock_ms = clock_ms
        self._db = SqliteFile(path, schema=_SCHEMA, error=OutboxError, what="outbox",
                              busy_timeout_seconds=busy_timeout_seconds)
        self._appends = GroupCommit(self._db, self._append_group, self._append_one)

    def __repr__(self) -> str:
        return f"LocalOutbox({self.path!r})"

    def _session(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        return self._db.session()

    def _write(self, work: Callable[[sqlite3.Connection], Any]) -> Any:
        return self._db.write(work)

    @staticmethod
    def _entry(row: tuple, *, duplicate: bool = False) -> OutboxEntry:
        offset, tenant, conversation, seq, kind, target, payload, appended = row
        return OutboxEntry(offset=offset, appended_at_ms=appended, duplicate=duplicate,
                           record=OutboxRecord(tenant_id=uuid.UUID(tenant), conversation_id=uuid.UUID(conversation),
                                               conversation_seq=seq, kind=kind, target_seq=target,
                                               payload=json.loads(payload)))

    def append(self, record: OutboxRecord) -> OutboxEntry:
        if not isinstance(record, OutboxRecord):
            raise ValidationError("append takes an OutboxRecord", field="record")
        try:
            payload = json.dumps(dict(record.payload), separators=(",", ":"), sort_keys=True)
        except (TypeError, ValueError) as exc:
            raise OutboxError(f"outbox payload is not JSON-ready: {exc}") from exc
        return self._appends.submit((record, payload, self._clock_ms()))  # type: ignore[return-value]

    @classmethod
    def _append_group(cls, conn: sqlite3.Connection, items: list[tuple[OutboxRecord, str, int]]) -> list[OutboxEntry]:
        """One transaction of appends (lab.store.plumbing.sqlite_file.GroupCommit)."""
        return [cls._append_one(conn, item) for item in items]

    @classmethod
    def _append_one(cls, conn: sqlite3.Connection, item: tuple[OutboxRecord, str, int]) -> OutboxEntry:
        """A new key's entry is the record as given (its offset from the insert); a stored key
        is read back: first write wins. Alone (autocommit) the insert is its own transaction."""
        record, payload, appended_at_ms = item
        key = (str(record.tenant_id), str(record.conversation_id), record.conversation_seq)
        cur = conn.execute(
            "INSERT OR IGNORE INTO outbox (tenant_id, conversation_id, conversation_seq, kind, target_seq, "
            "payload, appended_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (*key, record.kind, record.target_seq, payload, appended_at_ms))
        if cur.rowcount == 1:
            return OutboxEntry(offset=cur.lastrowid, record=record, appended_at_ms=appended_at_ms)
        row = conn.execute(f"SELECT {_COLUMNS} FROM outbox WHERE tenant_id = ? AND conversation_id = ? "
                           "AND conversation_seq = ?", key).fetchone()
        return cls._entry(row, duplicate=True)

    def get(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID, conversation_seq: int) -> OutboxEntry | None:
        with self._session() as conn:
            row = conn.execute(f"SELECT {_COLUMNS} FROM outbox WHERE tenant_id = ? AND conversation_id = ? "
                               "AND conversation_seq = ?",
                               (str(tenant_id), str(conversation_id), int(conversation_seq))).fetchone()
        return None if row is None else self._entry(row)

    def controls_for(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID, target_seq: int,
                     kind: str) -> list[OutboxEntry]:
        with self._session() as conn:
            rows = conn.execute(f"SELECT {_COLUMNS} FROM outbox WHERE tenant_id = ? AND conversation_id = ? "
                                "AND target_seq = ? AND kind = ? ORDER BY log_offset",
                                (str(tenant_id), str(conversation_id), int(target_seq), kind)).fetchall()
        return [self._entry(row) for row in rows]

    def read(self, from_offset: int, limit: int = DEFAULT_READ_LIMIT, *, partition: int = 0) -> list[OutboxEntry]:
        _one_partition(partition)
        with self._session() as conn:
            rows = conn.execute(f"SELECT {_COLUMNS} FROM outbox WHERE log_offset >= ? ORDER BY log_offset LIMIT ?",
                                (int(from_offset), int(limit))).fetchall()
        return [self._entry(row) for row in rows]

    def end_offset(self, *, partition: int = 0) -> int:
        _one_partition(partition)
        with self._session() as conn:
            row = conn.execute("SELECT MAX(log_offset) FROM outbox").fetchone()
        return (row[0] or 0) + 1

    def commit(self, group: str, offset: int, *, partition: int = 0) -> int:
        _one_partition(partition)

        def work(conn: sqlite3.Connection) -> int:
            conn.execute("INSERT INTO consumer_offset (group_name, next_offset) VALUES (?, ?) "
                         "ON CONFLICT (group_name) DO UPDATE SET next_offset = MAX(next_offset, excluded.next_offset)",
                         (group, int(offset)))
            return conn.execute("SELECT next_offset FROM consumer_offset WHERE group_name = ?",
                                (group,)).fetchone()[0]
        return self._write(work)

    def committed(self, group: str, *, partition: int = 0) -> int:
        _one_partition(partition)
        with self._session() as conn:
            row = conn.execute("SELECT next_offset FROM consumer_offset WHERE group_name = ?", (group,)).fetchone()
        return 0 if row is None else row[0]

    def close(self) -> None:
        self._db.close()


class OutboxView:
    """Read-only view of a store's log (``store.log``): what fanout and the archiver consume,
    for tests, audits and operators to inspect. Appending and committing offsets belong to
    the store's paths, so the view has neither."""

    def __init__(self, outbox: Outbox) -> None:
        self._outbox = outbox

    def __repr__(self) -> str:
        return f"OutboxView({self._outbox!r})"

    def get(self, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str,
            conversation_seq: int) -> OutboxEntry | None:
        return self._outbox.get(parse_uuid(tenant_id), parse_uuid(conversation_id),
                                check_conversation_seq(conversation_seq))

    def controls_for(self, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str, target_seq: int,
                     kind: str) -> list[OutboxEntry]:
        return self._outbox.controls_for(parse_uuid(tenant_id), parse_uuid(conversation_id),
                                         check_conversation_seq(target_seq, column="target_seq"), kind)

    @property
    def partitions(self) -> int:
        return self._outbox.partitions

    def read(self, from_offset: int, limit: int = DEFAULT_READ_LIMIT, *, partition: int = 0) -> list[OutboxEntry]:
        return self._outbox.read(from_offset, limit, partition=partition)

    def end_offset(self, *, partition: int = 0) -> int:
        return self._outbox.end_offset(partition=partition)

    def committed(self, group: str, *, partition: int = 0) -> int:
        return self._outbox.committed(group, partition=partition)

    def lag(self, group: str) -> int:
        return self._outbox.lag(group)

    def scan(self) -> list[OutboxEntry]:
        """Every entry of every partition (audits, verification)."""
        return self._outbox.scan()


def _one_partition(partition: int) -> None:
    if partition != 0:
        raise ValidationError(f"the local outbox has one partition (0), not {partition!r}", partition=partition)


# name -> class, or "module:Class" imported on first use (confluent-kafka only when "kafka" is opened)
OUTBOXES: dict[str, type[Outbox] | str] = {"local": LocalOutbox, "kafka": "lab.store.outbox.kafka_log:KafkaOutbox"}


def open_outbox(name: str, **options: Any) -> Outbox:
    """An outbox by registry name, e.g. ``open_outbox("local", path=state_dir / "outbox.sqlite")``,
    ``open_outbox("kafka", services=ServicesConfig(...), topic="outbox.msglab")``."""
    try:
        cls = OUTBOXES[name]
    except KeyError:
        raise ValidationError(f"unknown outbox {name!r} (known: {', '.join(OUTBOXES)})", name=name) from None
    if isinstance(cls, str):
        module, _, attr = cls.partition(":")
        cls = getattr(importlib.import_module(module), attr)
    return cls(**options)
