"""Crash-point injection for the write path, the archiver and recall/edit.

More: docs/store-internals.md.
"""
from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable

from lab.errors import CrashInjected, ValidationError

# (point, where it sits) in the order each path reaches them.
CRASH_POINTS: dict[str, str] = {
    # write path, design §5.1
    "after_allocate": "ids allocated, before the client_dedup reservation",
    "after_reserve": "client_dedup RESERVED written (step 1)",
    "after_record": "message_record + message_index written (step 3)",
    "after_outbox": "outbox append done (step 4)",
    "after_commit": "client_dedup COMMITTED (step 5)",
    "before_ack": "about to return SEND_ACK (step 6)",
    "before_head": "async conversation_head update about to run (step 7)",
    "head_retry": "a conversation_head update failed on the cluster and is about to be retried (step 7)",
    # archiver (§2.1 note)
    "archiver_after_read": "archiver read a batch from the outbox",
    "archiver_after_write": "archiver wrote the batch, offset not yet committed",
    "archiver_after_commit": "archiver committed its offset",
    # recall / edit (§5.3)
    "after_recall_log": "recall CONTROL event in the log, message_record not yet updated (S-7)",
    "after_recall_update": "recall's message_record update done",
    "after_edit_log": "edit CONTROL event in the log, message_record not yet updated",
    "after_edit_update": "edit's message_record update done",
}


class FaultPlan:
    """Which crash points are armed, and how often each was reached.

    ``arm(point, times=1)`` fires on the next ``times`` hits (``times=None``: every hit).
    ``hits`` counts every visit, armed or not, so a test can check a point was reached.
    """

    def __init__(self, armed: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self._armed: dict[str, int | None] = {}
        self._interleaved: dict[str, Callable[[], object]] = {}
        self.hits: Counter[str] = Counter()
        self.fired: Counter[str] = Counter()
        for point in armed:
            self.arm(point)

    def arm(self, point: str, *, times: int | None = 1) -> FaultPlan:
        if point not in CRASH_POINTS:
            raise ValidationError(f"unknown crash point {point!r}; known: {', '.join(CRASH_POINTS)}", point=point)
        with self._lock:
            self._armed[point] = times
        return self

    def interleave(self, point: str, fn: Callable[[], object]) -> FaultPlan:
        """Run ``fn`` once, the next time a path reaches ``point`` (then carry on)."""
        if point not in CRASH_POINTS:
            raise ValidationError(f"unknown crash point {point!r}; known: {', '.join(CRASH_POINTS)}", point=point)
        with self._lock:
            self._interleaved[point] = fn
        return self

    def disarm(self, point: str | None = None) -> None:
        with self._lock:
            if point is None:
                self._armed.clear()
            else:
                self._armed.pop(point, None)

    def hit(self, point: str) -> None:
        if point not in CRASH_POINTS:  # a typo in a path must not become a silent no-op
            raise ValidationError(f"unknown crash point {point!r}", point=point)
        with self._lock:
            self.hits[point] += 1
            between = self._interleaved.pop(point, None)
            if between is None and point not in self._armed:
                return  # the common case: one lock, nothing to do
        if between is not None:
            between()  # outside the lock: it may drive other paths that reach points too
        with self._lock:
            if point not in self._armed:
                return
            remaining = self._armed[point]
            if remaining is not None:
                if remaining <= 1:
                    del self._armed[point]
                else:
                    self._armed[point] = remaining - 1
            self.fired[point] += 1
        raise CrashInjected(f"crash injected at {point}: {CRASH_POINTS[point]}", point=point)

    def __repr__(self) -> str:
        with self._lock:
            return f"FaultPlan(armed={sorted(self._armed)})"

