"""A lock that a walk on the driver's event loop can wait for without blocking the loop.

``acquire`` blocks the calling thread, as ``threading.Lock`` does; ``acquire_async`` never blocks:
its future completes once the lock is the caller's. ``release`` (from any thread) hands the lock
to the longest waiter, blocking or not, so it is never free while someone waits for it.

More: docs/store-internals.md.
"""
from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import Future

__all__ = ["HandoffLock"]


class HandoffLock:
    """A FIFO lock for threads and futures alike (see the module docstring)."""

    __slots__ = ("_mutex", "_held", "_waiters")

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._held = False
        self._waiters: deque[threading.Lock | Future[None]] = deque()

    def try_acquire(self) -> bool:
        """Take the lock if it is free; never waits."""
        with self._mutex:
            if self._held:
                return False
            self._held = True
            return True

    def acquire(self) -> None:
        """Take the lock, waiting on this thread for it."""
        with self._mutex:
            if not self._held:
                self._held = True
                return
            gate = threading.Lock()
            gate.acquire()
            self._waiters.append(gate)
        gate.acquire()  # released by the hand-over: the lock is this thread's now

    def acquire_async(self) -> Future[None]:
        """A future completed once the lock is the caller's (at once when it is free)."""
        future: Future[None] = Future()
        future.set_running_or_notify_cancel()
        with self._mutex:
            if self._held:
                self._waiters.append(future)
                return future
            self._held = True
        future.set_result(None)
        return future

    def release(self) -> None:
        """Hand the lock to the longest waiter, or free it."""
        with self._mutex:
            if not self._held:
                raise RuntimeError("release of a HandoffLock that is not held")
            if not self._waiters:
                self._held = False
                return
            following = self._waiters.popleft()  # the lock stays held: it changes hands
        if isinstance(following, Future):
            following.set_result(None)  # its walk resumes here, on the releasing thread
        else:
            following.release()

    def __enter__(self) -> HandoffLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
