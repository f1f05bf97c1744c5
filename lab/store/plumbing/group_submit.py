"""Group submit: concurrent callers of one process share one round of work (a transaction, a
pipeline), each still returning only after the round that holds its item.

More: docs/store-internals.md.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from lab.errors import LabError

__all__ = ["DEFAULT_MAX_BATCH", "GroupSubmit"]

I = TypeVar("I")  # noqa: E741 - item
R = TypeVar("R")
DEFAULT_MAX_BATCH = 512  # items per round at most: bounds one round's latency and memory


class _Waiter:
    """One queued item. ``wake`` is held until the waiter may go on: its result is in, or it was
    made the next leader (``lead``)."""

    __slots__ = ("item", "result", "error", "done", "lead", "wake")

    def __init__(self, item: object) -> None:
        self.item, self.result, self.error, self.done, self.lead = item, None, None, False, False
        self.wake = threading.Lock()
        self.wake.acquire()


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
        self.rounds = 0  # rounds run (a round of one item counts): items / rounds is the grouping achieved

    def submit(self, item: I) -> R:
        waiter = _Waiter(item)
        with self._lock:
            if self._pid != os.getpid():  # a forked child must not wait for its parent's leader
                self._queue, self._busy, self._pid = [], False, os.getpid()
            self._queue.append(waiter)
            waiter.lead = not self._busy
            self._busy = True
        if not waiter.lead:
            waiter.wake.acquire()  # released with the result, or to lead the next round
        if not waiter.done:
            with self._lock:  # a leader is always the head of the queue: its item is in the round
                batch, self._queue = self._queue[:self._max_batch], self._queue[self._max_batch:]
            self._lead(waiter, batch)
        if waiter.error is not None:
            raise waiter.error
        return waiter.result  # type: ignore[return-value]

    def _lead(self, own: _Waiter, batch: list[_Waiter]) -> None:
        self.rounds += 1
        try:
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
            for w in batch:
                w.done = True
                if w is not own:
                    w.wake.release()
            if following is not None:
                following.wake.release()


def _copy_error(exc: LabError, items: int) -> LabError:
    """The error of a failed round for one more of its callers."""
    copy = type(exc)(f"{exc.message} (one round of {items} grouped items)", **exc.facts)
    copy.__cause__ = exc
    return copy
