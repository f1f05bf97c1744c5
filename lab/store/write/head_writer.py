"""The conversation_head writer (design §2.4, §5.1 step 7): a background worker that applies
the sends' head updates in batches, monotonic and fenced, and the failover compare-and-set form.

More: docs/store-internals.md.
"""
from __future__ import annotations

import logging
import threading
import time
import uuid
from concurrent.futures import Future
from typing import Any

from lab.errors import ClusterError, CrashInjected, InListTooLong, LabError, StoreError
from lab.store.plumbing.context import StoreContext
from lab.store.write.head import HEAD_KEY, HeadUpdate, seal_preview
from lab.store.write.head_requests import HEAD_GROUP_PARTITIONS, ReadGroupSize, read_heads, write_heads
from lab.store.rows.ids import check_bigint, check_conversation_seq, parse_uuid, u128_to_blob
from lab.store.plumbing.lru import Lru
from lab.store.write.fencing import Fencing

__all__ = ["HEAD_CACHE_ENTRIES", "HEAD_GROUP_PARTITIONS", "HEAD_READ_CQL", "HEAD_READ_GROUP_CQL", "HEAD_WRITE_CONCURRENCY", "HEAD_WRITE_CQL", "HeadWriter"]

HEAD_WRITE_ATTEMPTS = 3
HEAD_RETRY_BACKOFF_SECONDS = 0.05
HEAD_CAS_ATTEMPTS = 8
HEAD_CACHE_ENTRIES = 65536      # conversations whose latest H one writer remembers (history hints)
HEAD_WRITE_CONCURRENCY = 32     # head requests in flight per batch
_IDLE_POLL_SECONDS = 0.5        # the worker checks this often whether the interpreter is exiting
_NO_HEAD = 0                    # latest_conversation_seq of a conversation without a head row
_log = logging.getLogger(__name__)

Key = tuple[uuid.UUID, uuid.UUID]
_HEAD_SETS = ("latest_conversation_seq = ?, last_message_id = ?, last_activity_id = ?, last_sender_id = ?, "
              "preview_or_placeholder = ?, updated_at = ?, fencing_epoch = ?, head_version = ?")
# the normal form's read before its blind write, and the write (module constants: the benchmark's
# send_floor issues the write's very text; it leaves the read out, so a send makes one request per
# head write more than its floor: §2.4's compare and the fencing check, both required)
HEAD_READ_CQL = ("SELECT latest_conversation_seq, fencing_epoch, head_version FROM {ks}.conversation_head "
                 "WHERE tenant_id = ? AND conversation_id = ?")
HEAD_READ_GROUP_CQL = ("SELECT conversation_id, latest_conversation_seq, fencing_epoch, head_version "
                       "FROM {ks}.conversation_head WHERE tenant_id = ? AND conversation_id IN ?")
HEAD_WRITE_CQL = f"UPDATE {{ks}}.conversation_head SET {_HEAD_SETS} WHERE tenant_id = ? AND conversation_id = ?"


class HeadWriter:
    """Applies head updates on one background thread (``submit``) or inline (``apply``)."""

    def __init__(self, ctx: StoreContext, *, fencing_epoch: int = 0, failover: bool = False,
                 cache_entries: int = HEAD_CACHE_ENTRIES, concurrency: int = HEAD_WRITE_CONCURRENCY,
                 fencing: Fencing | None = None, group_partitions: int = HEAD_GROUP_PARTITIONS) -> None:
        self.ctx = ctx
        self.fencing_epoch = check_bigint(fencing_epoch, column="fencing_epoch")
        self.fencing = fencing if fencing is not None else Fencing(ctx, epoch=self.fencing_epoch)
        self.failover = failover
        self.concurrency = concurrency
        self.group_partitions = max(1, group_partitions)  # writes per unlogged batch
        self.read_groups = ReadGroupSize(self.group_partitions)  # lowered when the server refuses an IN read
        self._last: Lru[Key, int] = Lru(cache_entries)  # conversation -> latest seq written or read
        self._cond = threading.Condition()
        self._queue: list[tuple[HeadUpdate | None, Future]] = []  # None: a drain barrier
        self._thread: threading.Thread | None = None
        self._closed = False
        self._sets = _HEAD_SETS

    def last_written(self, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str) -> int | None:
        """The latest H this writer wrote or read for the conversation, if it remembers one:
        the history reader's guess of the bucket a latest page starts in."""
        seq = self._last.get((parse_uuid(tenant_id), parse_uuid(conversation_id)))
        return seq or None

    # -- statements ---------------------------------------------------------------------------
    def _select(self):
        return self.ctx.prepare(HEAD_READ_CQL, key_columns=HEAD_KEY)

    def _select_group(self):
        return self.ctx.prepare(HEAD_READ_GROUP_CQL)

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
                self._settle(future, lambda u=update: self._apply_counted(u))
        else:
            self._apply_blind_batch(list(winners.values()))
        for future in barriers:
            future.set_result(None)

    def _apply_blind_batch(self, winners: list[tuple[HeadUpdate, Future]]) -> None:
        """Normal mode, a batch: read the heads of its conversations (grouped: lab.store.write.
        head_requests), compare, then write the updates that move a head (grouped); what failed
        is retried one at a time."""
        retry: list[tuple[HeadUpdate, Future]] = []
        refused: list[tuple[HeadUpdate, Future]] = []  # their IN read was over the server's limit
        writes: list[tuple[HeadUpdate, Future]] = []
        statements = []
        conn, size, read_size = self.ctx.connection, self.group_partitions, self.read_groups.size
        heads = read_heads(conn, [u for u, _ in winners], single=self._select(), grouped=self._select_group(),
                           group_size=read_size, concurrency=self.concurrency)
        for (update, future), (row, error) in zip(winners, heads):
            if isinstance(error, InListTooLong):
                self._shrink_read_groups(error, sent=read_size)
                refused.append((update, future))
                continue
            if error is not None:
                retry.append((update, future))
                continue
            verdict = self._judge(update, row)
            if verdict != "write":
                future.set_result(verdict)
                continue
            try:
                statements.append((self._update(), (*self._values(update), update.tenant_id, update.conversation_id)))
            except LabError:  # e.g. the conversation's DEK was erased: retrying cannot help
                self.ctx.alerts.incr("head_update_failures")
                future.set_result("failed")
                continue
            writes.append((update, future))
        for (update, future), error in zip(writes, write_heads(conn, statements, group_size=size,
                                                               concurrency=self.concurrency)):
            if error is None:
                self._last.put((update.tenant_id, update.conversation_id), update.conversation_seq, keep_max=True)
                future.set_result("written")
            else:
                retry.append((update, future))
        for update, future in refused:  # alone (no IN list), a first attempt: no retry counted
            self._settle(future, lambda u=update: self._apply_counted(u))
        for update, future in retry:  # one at a time, with backoff, as a lone update would be
            self._settle(future, lambda u=update: self._apply_counted(u, failed_once=True))

    def _shrink_read_groups(self, error: InListTooLong, *, sent: int) -> None:
        new = self.read_groups.refused(error, sent=sent)
        if new is None:  # another group of this batch already lowered it
            return
        self.ctx.alerts.incr("head_group_shrinks")
        _log.warning("conversation_head: the server refused an IN read of %s partitions (limit %s, %s); "
                     "this writer now reads heads in groups of %d", getattr(error, "size", None) or sent,
                     getattr(error, "limit", None), getattr(error, "setting", None) or "unknown setting", new)

    @staticmethod
    def _settle(future: Future, apply: Any) -> None:
        try:
            future.set_result(apply())
        except CrashInjected as exc:  # a crash point on this thread: the update dies there
            future.set_exception(exc)

    def _apply_counted(self, update: HeadUpdate, *, failed_once: bool = False) -> str:
        """``apply`` with §5.1 step 7's retries; ``failed_once``: a first attempt (in a batch)
        already failed on the cluster, so the first call here is a retry."""
        attempts = HEAD_WRITE_ATTEMPTS - 1 if failed_once else HEAD_WRITE_ATTEMPTS
        for attempt in range(attempts):
            if failed_once or attempt:
                self.ctx.alerts.incr("head_update_retries")
                self.ctx.faults.hit("head_retry")
            try:
                return self.apply(update)
            except ClusterError:  # transient: timeouts, unavailable replicas
                if attempt + 1 == attempts:
                    break
                time.sleep(HEAD_RETRY_BACKOFF_SECONDS * (attempt + 1))
            except CrashInjected:
                raise
            except LabError:  # e.g. the conversation's DEK was erased: retrying cannot help
                break
        # Nobody waits on this future: an uncounted failure would be invisible.
        self.ctx.alerts.incr("head_update_failures")
        return "failed"

    def apply(self, update: HeadUpdate, *, replay: bool = False) -> str:
        """Apply now. Returns "written", "unchanged" (same seq already there) or "dropped".
        ``replay`` (recovery re-driving the head from the log): an update below the head is
        old news, "unchanged" and not alerted."""
        return self._apply_cas(update, replay=replay) if self.failover else self._apply_blind(update, replay=replay)

    def _remember(self, update: HeadUpdate, latest: int | None) -> None:
        if latest is not None:
            self._last.put((update.tenant_id, update.conversation_id), latest, keep_max=True)

    def _judge(self, update: HeadUpdate, row: Any, *, replay: bool = False) -> str:
        """Normal mode's comparison with the head as read (None: no head yet): "write", or the verdict."""
        if row is None:
            return "write"
        self._remember(update, row.latest_conversation_seq)
        if self.fencing.saw(update.tenant_id, update.conversation_id, row.fencing_epoch):
            self.ctx.alerts.incr("head_regressions_dropped")  # writing would take the head from a higher epoch
            return "dropped"
        return self._compare(update, row.latest_conversation_seq, replay=replay)

    def _apply_blind(self, update: HeadUpdate, *, replay: bool = False) -> str:
        key = (update.tenant_id, update.conversation_id)
        verdict = self._judge(update, self.ctx.connection.execute(self._select(), key).one(), replay=replay)
        if verdict != "write":
            return verdict
        self.ctx.connection.execute(self._update(), (*self._values(update), *key))
        self._last.put(key, update.conversation_seq, keep_max=True)
        return "written"

    def _compare(self, update: HeadUpdate, latest: int | None, *, replay: bool = False) -> str:
        verdict = _order(update, latest, replay=replay)
        if verdict == "dropped":
            self.ctx.alerts.incr("head_regressions_dropped")
        return verdict

    def _apply_cas(self, update: HeadUpdate, *, replay: bool = False) -> str:
        key = (update.tenant_id, update.conversation_id)
        insert = self.ctx.prepare(
            "INSERT INTO {ks}.conversation_head (tenant_id, conversation_id, latest_conversation_seq, last_message_id, "
            "last_activity_id, last_sender_id, preview_or_placeholder, updated_at, fencing_epoch, head_version) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) IF NOT EXISTS")
        cas = self.ctx.prepare(f"UPDATE {{ks}}.conversation_head SET {self._sets} WHERE tenant_id = ? AND "
                               "conversation_id = ? IF fencing_epoch = ? AND head_version = ?")
        marker = self.ctx.prepare("UPDATE {ks}.conversation_head SET fencing_epoch = ?, head_version = ? "
                                  "WHERE tenant_id = ? AND conversation_id = ? IF fencing_epoch = ? AND head_version = ?")
        for _ in range(HEAD_CAS_ATTEMPTS):
            row = self.ctx.connection.execute(self._select(), key, consistency="SERIAL").one()
            if row is None:
                if self.ctx.connection.execute(insert, (*key, *self._values(update))).one()[0]:
                    self._last.put(key, update.conversation_seq, keep_max=True)
                    return "written"
                self.ctx.alerts.incr("head_cas_retries")
                continue
            epoch, version, latest = row.fencing_epoch, row.head_version, row.latest_conversation_seq
            self._remember(update, latest)
            if self.fencing.saw(update.tenant_id, update.conversation_id, epoch):
                self.ctx.alerts.incr("head_regressions_dropped")  # fenced out by a higher epoch
                return "dropped"
            # §2.4's predicate, evaluated here because CQL IF has no OR. A missing epoch or
            # version (a row written before fencing existed) loses to any fenced writer.
            newer_epoch = epoch is None or self.fencing_epoch > epoch
            newer = newer_epoch or version is None or update.conversation_seq > version
            order = _order(update, latest, replay=replay)
            if order == "write" and newer:
                if self.ctx.connection.execute(cas, (*self._values(update), *key, epoch, version)).one()[0]:
                    self._last.put(key, update.conversation_seq, keep_max=True)
                    return "written"
            elif newer_epoch and latest is not None:
                # the takeover marker: this epoch owns the conversation from now on; latest stays
                if self.ctx.connection.execute(marker, (self.fencing_epoch, latest, *key, epoch, version)).one()[0]:
                    return self._compare(update, latest, replay=replay)
            elif order == "write":  # same epoch, its version at or past this seq: not this update's to move
                self.ctx.alerts.incr("head_regressions_dropped")
                return "dropped"
            else:
                return self._compare(update, latest, replay=replay)
            self.ctx.alerts.incr("head_cas_retries")
        self.ctx.alerts.incr("head_update_failures")
        return "failed"


def _order(update: HeadUpdate, latest: int | None, *, replay: bool = False) -> str:
    """Where ``update`` stands against the head's latest_conversation_seq: "write" (it moves the
    head), "unchanged" (the same seq: a resumed send re-submitting its head; or an old one that
    recovery replays) or "dropped" (a regression)."""
    if latest is None or latest < update.conversation_seq:
        return "write"
    if latest == update.conversation_seq or replay:
        return "unchanged"
    return "dropped"
