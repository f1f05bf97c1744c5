"""Lanes: several group-submit rounds in flight at once, one per lane (the hot window's puts, a
Redis connection per lane).

One :class:`~lab.store.plumbing.group_submit.GroupSubmit` runs one round at a time. Where a round
is a network round trip and callers rarely arrive together, that queues more than it saves: the
hot window's puts under 8 sending threads rode rounds of 1.2 puts on average, and 78% of a put's
time was its caller waiting for the round in flight before its own (py-spy of ``lab bench store
--outboxes``). Here each lane is a group submit of its own over its own ``run_batch`` (its own
connection), and a caller takes the lane with the fewest callers in it: a free lane while there
is one (so up to ``len(lanes)`` rounds are in flight at once), and only when every lane is busy
does it queue for the next round of the least loaded one (grouping where it saves a round trip).
Among equals the lowest-numbered lane wins, so a lone caller always uses lane 0 (one connection,
kept warm). A round fails only its own callers; the other lanes go on. Fork-safe: a child starts
with idle lanes (each group submit drops its parent's queue).
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
