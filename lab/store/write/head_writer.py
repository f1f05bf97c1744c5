"""The conversation_head writer (design §2.4, §5.1 step 7).

The send path hands a :class:`~lab.store.write.head.HeadUpdate` to :class:`HeadWriter` after the ack;
a background worker applies it, so a slow or failing head never delays SEND_ACK nor fanout
(§7.4). Failures are retried and, when retries run out, counted (``head_update_failures``).

Monotonic. A blind write gives no ordering guarantee, so the writer compares in the
application and only then writes (§2.4); an update whose conversation_seq is below the head
is dropped and counted (``head_regressions_dropped``).

Normal mode compares against the head this writer last wrote, not a read-back. It assumes
what the design's normal mode is: ONE WRITER OWNS A CONVERSATION, so nobody else moves its
latest_conversation_seq between this writer's writes. The writer reads the head once per
conversation (the first update it applies there, or again after a write whose outcome is
unknown, which forgets the entry) and then keeps the value it wrote in a bounded LRU
(``cache_entries`` conversations; an evicted one is read again). A conversation whose
ownership moves (a failover, a writer restart on another node) must be written in failover
mode until the old owner is fenced out; a normal-mode writer beside another writer of the
same conversation could regress the head by the gap between their seqs, where the read-back
form only raced in its read-to-write gap. Requests per update: 1 (the write) instead of 2.

Batches. The worker takes every update queued so far, keeps per conversation only the highest
(a lower update queued before it is ``superseded``: the head skips straight to the newer one;
one queued after it is a dropped regression, as applying in order would have found), reads the
conversations it has no head for, and writes the rest concurrently (``concurrency`` in
flight), one write per conversation and batch, so one conversation's writes never overlap.
Under load the head thus keeps up with any number of senders with fewer writes than sends;
alone, an update is applied at once, as before.

Failover form (deviation, spec README "Testbed decisions"). §2.4's
``IF fencing_epoch < ? OR (fencing_epoch = ? AND head_version < ?)`` cannot run: CQL ``IF``
has no ``OR``. :meth:`HeadWriter.apply` in failover mode therefore reads (epoch, version) with
SERIAL consistency every time, evaluates that predicate in the application, and writes with the
compare-and-set ``IF fencing_epoch = <read> AND head_version = <read>``; losing the race
re-reads and retries (``head_cas_retries``). head_version is the conversation_seq of the
update, which only grows within a writer's epoch. Failover mode keeps no cache.
"""
from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import Future
from typing import Any

from lab.cluster.driver_errors import map_driver_errors
from lab.errors import ClusterError, CrashInjected, LabError, StoreError
from lab.store.plumbing.context import StoreContext
from lab.store.write.head import HEAD_KEY, HeadUpdate, seal_preview
from lab.store.rows.ids import check_bigint, check_conversation_seq, parse_uuid, u128_to_blob
from lab.store.plumbing.lru import Lru

__all__ = ["HEAD_CACHE_ENTRIES", "HEAD_WRITE_CONCURRENCY", "HEAD_WRITE_CQL", "HeadWriter"]

HEAD_WRITE_ATTEMPTS = 3
HEAD_RETRY_BACKOFF_SECONDS = 0.05
HEAD_CAS_ATTEMPTS = 8
HEAD_CACHE_ENTRIES = 65536      # conversations whose last-written head one writer remembers
HEAD_WRITE_CONCURRENCY = 32     # head requests in flight per batch
_IDLE_POLL_SECONDS = 0.5        # the worker checks this often whether the interpreter is exiting
_NO_HEAD = 0                    # latest_conversation_seq of a conversation without a head row

Key = tuple[uuid.UUID, uuid.UUID]
_HEAD_SETS = ("latest_conversation_seq = ?, last_message_id = ?, last_activity_id = ?, last_sender_id = ?, "
              "preview_or_placeholder = ?, updated_at = ?, fencing_epoch = ?, head_version = ?")
# the normal form's blind write (a module constant: the benchmark's send_floor issues this very text)
HEAD_WRITE_CQL = f"UPDATE {{ks}}.conversation_head SET {_HEAD_SETS} WHERE tenant_id = ? AND conversation_id = ?"


class HeadWriter:
    """Applies head updates on one background thread (``submit``) or inline (``apply``)."""

    def __init__(self, ctx: StoreContext, *, fencing_epoch: int = 0, failover: bool = False,
                 cache_entries: int = HEAD_CACHE_ENTRIES, concurrency: int = HEAD_WRITE_CONCURRENCY) -> None:
        self.ctx = ctx
        self.fencing_epoch = check_bigint(fencing_epoch, column="fencing_epoch")
        self.failover = failover
        self.concurrency = concurrency
        self._last: Lru[Key, int] = Lru(cache_entries)  # conversation -> latest seq written or read
        self._cond = threading.Condition()
        self._queue: list[tuple[HeadUpdate | None, Future]] = []  # None: a drain barrier
        self._thread: threading.Thread | None = None
        self._closed = False
        self._sets = _HEAD_SETS

    def last_written(self, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str) -> int | None:
        """The head this writer last wrote (or read) for the conversation, if it remembers one:
        the history reader's guess of the bucket a latest page starts in."""
        seq = self._last.get((parse_uuid(tenant_id), parse_uuid(conversation_id)))
        return seq or None

    # -- statements ---------------------------------------------------------------------------
    def _select(self):
        return self.ctx.prepare("SELECT latest_conversation_seq, fencing_epoch, head_version FROM {ks}.conversation_head "
                                "WHERE tenant_id = ? AND conversation_id = ?", key_columns=HEAD_KEY)

    def _update(self):
        return self.ctx.prepare(HEAD_WRITE_CQL)

    def _values(self, update: HeadUpdate) -> tuple:
        seq = check_conversation_seq(update.conversation_seq)
        return (seq, u128_to_blob(update.message_id), u128_to_blob(update.last_activity_id), update.sender_id,
                seal_preview(self.ctx, update), self.ctx.clock_ms(), self.fencing_epoch, seq)

    # -- queueing -----------------------------------------------------------------------------
    def submit(self, update: HeadUpdate | None) -> Future:
        """Queue ``update``; never raises for the update's own failures (they are counted). The
        future's result is the verdict: "written", "unchanged", "superseded", "dropped", "failed"."""
        future: Future = Future()
        with self._cond:
            if self._closed:
                raise StoreError("the head writer is closed")
            self._queue.append((update, future))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="conversation-head")
                self._thread.start()
            self._cond.notify()
        return future

    def drain(self, timeout_seconds: float | None = None) -> None:
        """Wait until every update submitted so far has been applied (batches run in order)."""
        if self._closed:
            return
        self.submit(None).result(timeout=timeout_seconds)

    def close(self) -> None:
        """Apply what is queued, then stop the worker."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    # a store never closed must not keep the interpreter from exiting
                    if not self._cond.wait(_IDLE_POLL_SECONDS) and not threading.main_thread().is_alive():
                        return
                if not self._queue:
                    return
                batch, self._queue = self._queue, []
            try:
                self._apply_batch(batch)
            except BaseException as exc:  # a bug must not kill the worker and hang every drain()
                for update, future in batch:
                    if not future.done():
                        if update is None:
                            future.set_result(None)
                        else:
                            self.ctx.alerts.incr("head_update_failures")
                            future.set_exception(exc)

    # -- batches ------------------------------------------------------------------------------
    def _apply_batch(self, batch: list[tuple[HeadUpdate | None, Future]]) -> None:
        winners: dict[Key, tuple[HeadUpdate, Future]] = {}
        barriers = []
        for update, future in batch:
            if update is None:
                barriers.append(future)
                continue
            if not future.set_running_or_notify_cancel():
                continue
            try:
                self.ctx.faults.hit("before_head")
            except CrashInjected as exc:  # the update dies here, as its thread would
                future.set_exception(exc)
                continue
            key = (update.tenant_id, update.conversation_id)
            held = winners.get(key)
            if held is None or update.conversation_seq > held[0].conversation_seq:
                if held is not None:
                    held[1].set_result("superseded")
                winners[key] = (update, future)
            elif update.conversation_seq == held[0].conversation_seq:
                future.set_result("unchanged")
            else:  # queued after a newer update of its conversation: in order, it would be dropped
                self.ctx.alerts.incr("head_regressions_dropped")
                future.set_result("dropped")
        if self.failover:
            for update, future in winners.values():
                future.set_result(self._apply_counted(update))
        else:
            self._apply_blind_batch(list(winners.values()))
        for future in barriers:
            future.set_result(None)

    def _apply_blind_batch(self, winners: list[tuple[HeadUpdate, Future]]) -> None:
        unknown = [(u, f) for u, f in winners if self._last.get((u.tenant_id, u.conversation_id)) is None]
        retry: list[tuple[HeadUpdate, Future]] = []
        for (update, future), (row, error) in zip(unknown, self._gather(
                [(self._select(), (u.tenant_id, u.conversation_id)) for u, _ in unknown])):
            if error is None:
                self._remember_row(update, row)
            else:
                retry.append((update, future))
        unread = {id(u) for u, _ in retry}
        writes: list[tuple[HeadUpdate, Future]] = []
        statements = []
        for update, future in winners:
            key = (update.tenant_id, update.conversation_id)
            if id(update) in unread:
                continue
            verdict = self._compare(update, self._last.get(key))
            if verdict != "write":
                future.set_result(verdict)
                continue
            try:
                statements.append((self._update(), (*self._values(update), *key)))
            except LabError:  # e.g. the conversation's DEK was erased: retrying cannot help
                self.ctx.alerts.incr("head_update_failures")
                future.set_result("failed")
                continue
            writes.append((update, future))
        for (update, future), (_, error) in zip(writes, self._gather(statements)):
            key = (update.tenant_id, update.conversation_id)
            if error is None:
                self._last.put(key, update.conversation_seq, keep_max=True)
                future.set_result("written")
            else:
                self._last.forget(key)  # the write may or may not have landed: read it next time
                retry.append((update, future))
        for update, future in retry:  # one at a time, with backoff, as a lone update would be
            future.set_result(self._apply_counted(update, attempts=HEAD_WRITE_ATTEMPTS - 1))

    def _gather(self, statements: list[tuple[Any, tuple]]) -> list[tuple[Any, BaseException | None]]:
        """Each statement's first row (or None) and error, ``concurrency`` in flight; unlike
        ``execute_concurrent`` one failure does not cost the others their results."""
        conn = self.ctx.connection
        out: list[tuple[Any, BaseException | None]] = []
        for start in range(0, len(statements), self.concurrency):
            chunk = statements[start:start + self.concurrency]
            futures = [conn.execute_async(stmt, params) for stmt, params in chunk]
            for (stmt, _), fut in zip(chunk, futures):
                try:
                    with map_driver_errors(stmt.info.table, conn.dialect):
                        out.append((fut.result().one(), None))
                except Exception as exc:  # the one-at-a-time retry sorts transient from fatal
                    out.append((None, exc))
        return out

    # -- one update ---------------------------------------------------------------------------
    def _apply_counted(self, update: HeadUpdate, *, attempts: int = HEAD_WRITE_ATTEMPTS) -> str:
        for attempt in range(attempts):
            try:
                return self.apply(update)
            except ClusterError:  # transient: timeouts, unavailable replicas
                if attempt + 1 == attempts:
                    break
                time.sleep(HEAD_RETRY_BACKOFF_SECONDS * (attempt + 1))
            except LabError:  # e.g. the conversation's DEK was erased: retrying cannot help
                break
        # Nobody waits on this future: an uncounted failure would be invisible.
        self.ctx.alerts.incr("head_update_failures")
        return "failed"

    def apply(self, update: HeadUpdate) -> str:
        """Apply now. Returns "written", "unchanged" (same seq already there) or "dropped"."""
        return self._apply_cas(update) if self.failover else self._apply_blind(update)

    def _remember_row(self, update: HeadUpdate, row: Any) -> None:
        latest = None if row is None else row.latest_conversation_seq
        self._last.put((update.tenant_id, update.conversation_id), _NO_HEAD if latest is None else latest,
                       keep_max=True)

    def _apply_blind(self, update: HeadUpdate) -> str:
        key = (update.tenant_id, update.conversation_id)
        latest = self._last.get(key)
        if latest is None:  # first update of this conversation here: read the head once
            self._remember_row(update, self.ctx.connection.execute(self._select(), key).one())
            latest = self._last.get(key)
        verdict = self._compare(update, latest)
        if verdict != "write":
            return verdict
        values = self._values(update)
        try:
            self.ctx.connection.execute(self._update(), (*values, *key))
        except BaseException:
            self._last.forget(key)
            raise
        self._last.put(key, update.conversation_seq, keep_max=True)
        return "written"

    def _compare(self, update: HeadUpdate, latest: int | None) -> str:
        if latest is not None and latest > update.conversation_seq:
            self.ctx.alerts.incr("head_regressions_dropped")
            return "dropped"
        if latest == update.conversation_seq:
            return "unchanged"  # a resumed send re-submitting the same head
        return "write"

    def _apply_cas(self, update: HeadUpdate) -> str:
        key = (update.tenant_id, update.conversation_id)
        insert = self.ctx.prepare(
            "INSERT INTO {ks}.conversation_head (tenant_id, conversation_id, latest_conversation_seq, last_message_id, "
            "last_activity_id, last_sender_id, preview_or_placeholder, updated_at, fencing_epoch, head_version) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) IF NOT EXISTS")
        cas = self.ctx.prepare(f"UPDATE {{ks}}.conversation_head SET {self._sets} WHERE tenant_id = ? AND "
                               "conversation_id = ? IF fencing_epoch = ? AND head_version = ?")
        for _ in range(HEAD_CAS_ATTEMPTS):
            row = self.ctx.connection.execute(self._select(), key, consistency="SERIAL").one()
            if row is None:
                applied = self.ctx.connection.execute(insert, (*key, *self._values(update))).one()
            else:
                epoch, version = row.fencing_epoch, row.head_version
                # §2.4's predicate, evaluated here because CQL IF has no OR. A missing epoch or
                # version (a row written before fencing existed) loses to any fenced writer.
                newer = (epoch is None or self.fencing_epoch > epoch
                         or (self.fencing_epoch == epoch and (version is None or update.conversation_seq > version)))
                verdict = self._compare(update, row.latest_conversation_seq)
                if not newer:
                    if verdict == "write":  # same seq ahead but fenced out: still a dropped regression
                        self.ctx.alerts.incr("head_regressions_dropped")
                        return "dropped"
                    return verdict
                if verdict != "write":
                    return verdict
                applied = self.ctx.connection.execute(cas, (*self._values(update), *key, epoch, version)).one()
            if applied[0]:
                return "written"
            self.ctx.alerts.incr("head_cas_retries")
        self.ctx.alerts.incr("head_update_failures")
        return "failed"
