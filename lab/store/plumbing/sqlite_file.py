"""The local state files of the store (outbox, seq reservations, key store): SQLite in WAL mode.

One connection per process (a SQLite connection must not cross ``fork()``: a child opens its
own), shared by that process's threads under a lock; SQLite failures surface as the owner's
lab error. WAL lets readers run beside a writer of another process; the mode is stored in the
file, so only the first opener switches, and switching needs a moment of exclusivity that
SQLite refuses at once instead of waiting, hence the retry loop.
"""
from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from pathlib import Path
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from lab.errors import LabError

T = TypeVar("T")

SQLITE_BUSY_TIMEOUT_SECONDS = 30.0
_WAL_RETRY_SECONDS = 0.01


class SqliteFile:
    """A fork-safe, thread-shared SQLite connection to ``path`` with ``schema`` applied."""

    def __init__(self, path: Path | str, *, schema: str, error: type[LabError], what: str,
                 busy_timeout_seconds: float = SQLITE_BUSY_TIMEOUT_SECONDS, synchronous_full: bool = True,
                 secure_delete: bool = False, private: bool = False) -> None:
        self.path = str(path)
        self._schema = schema
        self._error = error
        self._what = what
        self._busy_timeout_seconds = busy_timeout_seconds
        self._synchronous_full = synchronous_full
        self._secure_delete = secure_delete
        self._private = private  # created 0600 (key material)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        with self.session():
            pass

    @contextlib.contextmanager
    def session(self) -> Iterator[sqlite3.Connection]:
        """The connection under the lock; SQLite failures become the owner's error."""
        with self._lock:
            try:
                yield self._connection()
            except sqlite3.Error as exc:
                raise self._error(f"{self._what} {self.path!r}: {exc}", path=self.path) from exc

    def write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` in one transaction holding the database write lock (``BEGIN
        IMMEDIATE``), so writers of other processes queue instead of interleaving."""
        with self.session() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = work(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return result

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None or self._pid != os.getpid():
            in_memory = self.path == ":memory:"
            if not in_memory:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
                if self._private and not os.path.exists(self.path):
                    os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
            conn = sqlite3.connect(self.path, timeout=self._busy_timeout_seconds, isolation_level=None,
                                   check_same_thread=False)
            if self._secure_delete:
                conn.execute("PRAGMA secure_delete = ON")
            if not in_memory:
                deadline = time.monotonic() + self._busy_timeout_seconds
                while conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    try:
                        conn.execute("PRAGMA journal_mode = WAL").fetchall()
                    except sqlite3.OperationalError:
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(_WAL_RETRY_SECONDS)
            if self._synchronous_full:
                conn.execute("PRAGMA synchronous = FULL")
            conn.executescript(self._schema)
            self._conn, self._pid = conn, os.getpid()
        return self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None


class _Waiter:
    """One queued item. ``wake`` is held until the waiter may go on: its result is in, or it was
    made the next leader (``lead``)."""

    __slots__ = ("item", "result", "error", "done", "lead", "wake")

    def __init__(self, item: object) -> None:
        self.item, self.result, self.error, self.done, self.lead = item, None, None, False, False
        self.wake = threading.Lock()
        self.wake.acquire()


class GroupCommit:
    """Group commit over a :class:`SqliteFile`: concurrent :meth:`submit` calls of one process
    share a write transaction, and so its one COMMIT (the fsync under ``synchronous=FULL``).

    Every caller still returns only after the COMMIT of the transaction that holds its item:
    the first caller to find no commit in progress becomes the leader, takes every item queued
    so far (its own among them), runs ``work(conn, items) -> results`` in one ``write``
    transaction (``one(conn, item)`` alone, when given and the batch is just the leader's: a
    single autocommit statement is its own transaction, one call into SQLite and one fsync
    instead of BEGIN, the statement and COMMIT), hands each waiter of the batch its result and
    wakes it, and makes the first
    caller queued meanwhile the next leader (only those threads wake: no herd re-checking a
    shared condition). A failed transaction (rolled back: none of its items is stored) raises
    its error to every caller of the group, each a fresh error of the file's own type carrying
    the cause.

    Why: appends from 8 sending threads each held the file's lock across their own COMMIT, so
    each waited behind up to 7 others' fsyncs (issue 13 profile: 9% of a send's wall time).
    """

    def __init__(self, db: SqliteFile, work: Callable[[sqlite3.Connection, list], list],
                 one: Callable[[sqlite3.Connection, Any], Any] | None = None) -> None:
        self._db = db
        self._work = work
        self._one = one  # a lone item: one autocommit statement (its own transaction) instead of three calls
        self._lock = threading.Lock()
        self._queue: list[_Waiter] = []
        self._committing = False
        self._pid = os.getpid()

    def submit(self, item: object) -> object:
        waiter = _Waiter(item)
        with self._lock:
            if self._pid != os.getpid():  # a forked child must not wait for its parent's leader
                self._queue, self._committing, self._pid = [], False, os.getpid()
            self._queue.append(waiter)
            waiter.lead = not self._committing
            self._committing = True
        if not waiter.lead:
            waiter.wake.acquire()  # released with the result, or to lead the next transaction
        if not waiter.done:
            with self._lock:
                batch, self._queue = self._queue, []
            self._lead(waiter, batch)
        if waiter.error is not None:
            raise waiter.error
        return waiter.result

    def _lead(self, own: _Waiter, batch: list[_Waiter]) -> None:
        try:
            if len(batch) == 1 and self._one is not None:
                with self._db.session() as conn:
                    results = [self._one(conn, own.item)]
            else:
                results = self._db.write(lambda conn: self._work(conn, [w.item for w in batch]))
            for w, result in zip(batch, results):
                w.result = result
        except BaseException as exc:
            for w in batch:
                w.error = exc if w is own or not isinstance(exc, LabError) else _copy_error(exc, len(batch))
        finally:
            with self._lock:
                following = self._queue[0] if self._queue else None
                if following is None:
                    self._committing = False
                else:
                    following.lead = True
            for w in batch:
                w.done = True
                if w is not own:
                    w.wake.release()
            if following is not None:
                following.wake.release()


def _copy_error(exc: LabError, items: int) -> LabError:
    """The error of a failed group transaction for one more of its callers (an exception
    instance must not be raised in two threads at once: each raise rewrites its traceback)."""
    copy = type(exc)(f"{exc.message} (one transaction of {items} grouped appends)", **exc.facts)
    copy.__cause__ = exc
    return copy
