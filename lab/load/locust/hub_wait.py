"""A greenlet waits on a ``concurrent.futures.Future`` that another thread completes: one hub wakeup.

More: docs/load-internals.md.
"""
from __future__ import annotations

from collections import deque
from concurrent.futures import Future
from typing import Any

from gevent.hub import Waiter, get_hub

__all__ = ["HubWaiter"]


class HubWaiter:
    """One per process, made in the thread that runs its gevent hub. :meth:`wait` parks the calling
    greenlet until a future completes, on whatever thread (the driver's event loop). The future's
    done-callback only queues the greenlet's :class:`~gevent.hub.Waiter` and sends the hub's one
    async watcher (libev's ``ev_async_send``, safe from any thread, coalesced while pending); the
    hub then resumes every queued greenlet. gevent's Event and AsyncResult are for one thread only."""

    def __init__(self) -> None:
        self._hub = get_hub()
        self._ready: deque[Waiter] = deque()
        self._waiting = 0
        self._watcher = self._hub.loop.async_()
        self._watcher.start(self._resume_ready)
        self._watcher.ref = False  # referenced only while a greenlet waits: an idle one keeps no loop alive

    def wait(self, future: Future[Any]) -> None:
        """Return once ``future`` is done (its result or error is the caller's to take); the other
        greenlets run meanwhile."""
        if future.done():
            return
        waiter = Waiter(self._hub)
        ready, send = self._ready, self._watcher.send

        def done(_f: Future[Any]) -> None:  # on the completing thread: nothing that blocks, nothing that raises
            ready.append(waiter)
            send()

        self._waiting += 1
        if self._waiting == 1:
            self._watcher.ref = True
        try:
            future.add_done_callback(done)
            waiter.get()
        finally:
            self._waiting -= 1
            if not self._waiting:
                self._watcher.ref = False

    def _resume_ready(self) -> None:
        ready = self._ready
        while ready:
            ready.popleft().switch(None)

    def close(self) -> None:
        """Stop the watcher (in the hub's thread, once no greenlet waits)."""
        self._watcher.stop()
        self._watcher.close()
