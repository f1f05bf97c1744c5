"""The local outbox: the commit log in a SQLite file under the store's state_dir (registry name
"local", the default). One partition; offsets are the table's autoincrement key; consumer groups'
offsets are a second table. It keeps every semantic of the interface in :mod:`lab.store.outbox`.
"""
from __future__ import annotations

import contextlib
import json
import sqlite3
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from lab.errors import OutboxError, ValidationError
from lab.store.outbox import DEFAULT_READ_LIMIT, Outbox, OutboxEntry, OutboxRecord, payload_from_wire
from lab.store.plumbing.sqlite_file import SQLITE_BUSY_TIMEOUT_SECONDS, GroupCommit, SqliteFile
from lab.store.plumbing.wall_clock import Clock, wall_clock_ms
from lab.store.rows.encoded import WIRE_JSON

__all__ = ["LocalOutbox"]

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
                                               conversation_seq=seq, target_seq=target,
                                               payload=payload_from_wire(kind, json.loads(payload))))

    def append(self, record: OutboxRecord) -> OutboxEntry:
        return self.prepare(record)()

    def append_async(self, record: OutboxRecord) -> Future[OutboxEntry]:
        """The append in the group commit's next round, run on its worker thread."""
        payload = self._payload(record)
        return self._appends.submit_async((record, payload, self._clock_ms()))

    def prepare(self, record: OutboxRecord) -> Callable[[], OutboxEntry]:
        """The payload serialised now; the returned call appends it (group commit, its own
        ``appended_at_ms`` taken when it runs)."""
        payload = self._payload(record)
        return lambda: self._appends.submit((record, payload, self._clock_ms()))  # type: ignore[return-value]

    @staticmethod
    def _payload(record: OutboxRecord) -> str:
        if not isinstance(record, OutboxRecord):
            raise ValidationError("append takes an OutboxRecord", field="record")
        return WIRE_JSON(record.payload.to_wire())

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
        self._appends.close()  # the asynchronous appends' rounds, before the file they write
        self._db.close()


def _one_partition(partition: int) -> None:
    if partition != 0:
        raise ValidationError(f"the local outbox has one partition (0), not {partition!r}", partition=partition)
