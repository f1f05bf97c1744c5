"""Group submit: concurrent callers of one process share one round of work (a transaction, a
pipeline), each still returning only after the round that holds its item. ``submit`` blocks and
may lead a round on its own thread; ``submit_async`` returns a future and never blocks: its
rounds run on one worker thread of the group's (never the caller's: it may be an event loop).

More: docs/store-internals.md.
"""
from __future__ import annotations

import functools
import logging
import os
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

from lab.errors import InvalidState, LabError

__all__ = ["DEFAULT_MAX_BATCH", "GroupSubmit"]

I = TypeVar("I")  # noqa: E741 - item
R = TypeVar("R")
DEFAULT_MAX_BATCH = 512  # items per round at most: bounds one round's latency and memory
_log = logging.getLogger(__name__)


class _Waiter:
    """One queued item. ``wake`` is held until the waiter may go on: its result is in, or it was
    made the next leader (``lead``)."""

    __slots__ = ("item", "result", "error", "done", "lead", "wake", "future")

    def __init__(self, item: object, future: Future | None = None) -> None:
        self.item, self.result, self.error, self.done, self.lead = item, None, None, False, False
        self.future = future  # an asynchronous caller's: completed instead of waking a thread
        if future is None:
            self.wake = threading.Lock()
            self.wake.acquire()

    def settle(self) -> None:
        """Hand the result (or error) to the caller."""
        if self.future is None:
            self.wake.release()
        elif self.error is not None:
            self.future.set_exception(self.error)
        else:
            self.future.set_result(self.result)


class _Worker:
    """The group's one thread for its asynchronous callers' rounds, in order: a hand-over is one put
    on a SimpleQueue (the send path makes one per round: a pool's submit and its future cost more).
    Started on first use; :meth:`close` stops it after the rounds handed over, then it refuses."""

    __slots__ = ("_jobs", "_lock", "_thread", "_closed")

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:  # under the lock: no job is put after close's stop mark
            if self._closed:
                raise InvalidState("the group's worker is closed: its store was closed")
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="group-submit", daemon=True)
                self._thread.start()
            self._jobs.put(job)

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                job()
            except BaseException:  # a round settles its own errors; this keeps the worker alive regardless
                _log.exception("group submit: a round failed outside its callers")

    def close(self) -> None:
        with self._lock:
            self._closed = True
            thread = self._thread
            if thread is not None:
                self._jobs.put(None)
        if thread is not None and thread is not threading.current_thread():
            thread.join()


class GroupSubmit(Generic[I, R]):
    """Leader/follower rounds over ``run_batch`` (see the module docstring)."""

    def __init__(self, run_batch: Callable[[list[I]], Sequence[R]], run_one: Callable[[I], R] | None = None, *,
                 max_batch: int = DEFAULT_MAX_BATCH) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be >= 1")
        self._run_batch = run_batch
        self._run_one = run_one
        self._max_batch = max_batch
        self._lock = threading.Lock()
        self._queue: list[_Waiter] = []
        self._busy = False
        self._pid = os.getpid()
        self._worker = _Worker()  # the asynchronous callers' rounds
        self.rounds = 0  # rounds run (a round of one item counts): items / rounds is the grouping achieved

    def submit(self, item: I) -> R:
        waiter = self._enqueue(_Waiter(item))
        if not waiter.lead:
            waiter.wake.acquire()  # released with the result, or to lead the next round
        if not waiter.done:
            self._round(waiter)
        if waiter.error is not None:
            raise waiter.error
        return waiter.result  # type: ignore[return-value]

    def submit_async(self, item: I) -> Future[R]:
        """:meth:`submit` without blocking: the future gets the result once the round that holds
        ``item`` is done (completed on the group's worker thread)."""
        future: Future[R] = Future()
        future.set_running_or_notify_cancel()  # it completes once, with the round
        waiter = self._enqueue(_Waiter(item, future))
        if waiter.lead:
            self._hand_over(waiter)
        return future

    def close(self) -> None:
        """Stop the worker thread of the asynchronous callers (after the rounds queued in it)."""
        self._worker.close()

    def _enqueue(self, waiter: _Waiter) -> _Waiter:
        with self._lock:
            if self._pid != os.getpid():  # a forked child must not wait for its parent's leader
                self._queue, self._busy, self._pid = [], False, os.getpid()
                self._worker = _Worker()
            self._queue.append(waiter)
            waiter.lead = not self._busy
            self._busy = True
        return waiter

    def _hand_over(self, waiter: _Waiter) -> None:
        """Run the round ``waiter`` leads on the worker thread (an asynchronous caller leads nothing itself)."""
        try:
            self._worker.submit(functools.partial(self._round, waiter))
        except InvalidState as exc:  # closed: the round fails here, without running (nothing blocks)
            self._round(waiter, refused=exc)

    def _round(self, waiter: _Waiter, refused: BaseException | None = None) -> None:
        with self._lock:  # a leader is always the head of the queue: its item is in the round
            batch, self._queue = self._queue[:self._max_batch], self._queue[self._max_batch:]
        self._lead(waiter, batch, refused)

    def _lead(self, own: _Waiter, batch: list[_Waiter], refused: BaseException | None = None) -> None:
        self.rounds += 1
        try:
            if refused is not None:
                raise refused
            if len(batch) == 1 and self._run_one is not None:
                results: Sequence[Any] = [self._run_one(own.item)]
            else:
                results = self._run_batch([w.item for w in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"a round of {len(batch)} items returned {len(results)} results")
            for w, result in zip(batch, results):
                w.result = result
        except BaseException as exc:
            for w in batch:
                w.error = exc if w is own or not isinstance(exc, LabError) else _copy_error(exc, len(batch))
        finally:
            with self._lock:
                following = self._queue[0] if self._queue else None
                if following is None:
                    self._busy = False
                else:
                    following.lead = True
            if following is not None:
                if following.future is None:
                    following.wake.release()
                else:
                    self._hand_over(following)
            for w in batch:
                w.done = True
                if w is not own or w.future is not None:
                    w.settle()


def _copy_error(exc: LabError, items: int) -> LabError:
    """The error of a failed round for one more of its callers."""
    copy = type(exc)(f"{exc.message} (one round of {items} grouped items)", **exc.facts)
    copy.__cause__ = exc
    return copy
