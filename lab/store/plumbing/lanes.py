"""Lanes: several group-submit rounds in flight at once, one per lane (the hot window's puts, a
Redis connection per lane).

More: docs/store-internals.md.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from lab.store.plumbing.group_submit import DEFAULT_MAX_BATCH, GroupSubmit

__all__ = ["Lanes"]

I = TypeVar("I")  # noqa: E741 - item
R = TypeVar("R")


class Lanes(Generic[I, R]):
    """Group submit over ``run_batches`` (one per lane); see the module docstring."""

    def __init__(self, run_batches: Sequence[Callable[[list[I]], Sequence[R]]], *,
                 max_batch: int = DEFAULT_MAX_BATCH) -> None:
        if not run_batches:
            raise ValueError("lanes need at least one run_batch")
        self._lanes = [GroupSubmit(run, max_batch=max_batch) for run in run_batches]
        self._callers = [0] * len(self._lanes)  # callers in each lane: queued or in its round
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self.most_in_flight = 0  # lanes busy at once, at most (1 would mean the lanes never overlapped)

    def __len__(self) -> int:
        return len(self._lanes)

    @property
    def rounds(self) -> int:
        """Rounds run on every lane: items / rounds is the grouping achieved."""
        return sum(lane.rounds for lane in self._lanes)

    def submit(self, item: I) -> R:
        with self._lock:
            if self._pid != os.getpid():  # a forked child's lanes hold none of its parent's callers
                self._callers, self._pid = [0] * len(self._lanes), os.getpid()
            callers = self._callers
            lane = callers.index(min(callers))
            callers[lane] += 1
            busy = sum(1 for n in callers if n)
            if busy > self.most_in_flight:
                self.most_in_flight = busy
        try:
            return self._lanes[lane].submit(item)
        finally:
            with self._lock:
                self._callers[lane] -= 1
