"""A path as steps: one sans-IO walk (a generator that yields the requests it needs and receives
their answers) and its two drivers. :func:`run` answers each step on the calling thread
(``execute`` / ``execute_concurrent``, the synchronous API); :func:`start` chains the steps on the
driver's event loop (``execute_async`` + ``add_callbacks``, the walk resumed in the callback) and
completes a ``concurrent.futures.Future``: no native thread per call in flight. A blocking step
(a Redis call, the outbox append) never runs on the loop thread: :func:`start` uses its own
non-blocking form where it has one (a future), else hands it to a small pool.

More: docs/store-internals.md (``lab.store.plumbing.steps``).
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from lab.cluster.connection import Connection, Stmt
from lab.errors import InvalidState

__all__ = ["Blocking", "BlockingPool", "Cql", "Walk", "failed", "run", "start", "start_prepared"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Cql:
    """Statements issued together (one round trip); the answer: each one's rows (a list), in input order.
    ``concurrency``: at most that many in flight at once (0: all), on either driver."""

    items: tuple[tuple[Stmt, Sequence[Any]], ...]
    concurrency: int = 0


@dataclass(frozen=True, slots=True)
class Blocking:
    """A blocking call that is no driver statement; the answer: what it returns. ``start``: the
    same work without blocking (a future of its answer, or None where it cannot), for :func:`start`."""

    call: Callable[[], Any]
    start: Callable[[], Future[Any] | None] | None = None


Walk = Generator[Cql | Blocking, Any, T]


def run(walk: Walk[T], connection: Connection) -> T:
    """Drive ``walk`` on the calling thread; its result, or the first error raised on the way. A
    step's error is raised inside the walk, where it yielded, so the walk's ``finally`` (a lock
    it holds) runs before the error reaches the caller."""
    answer: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = walk.send(answer) if error is None else walk.throw(error)
        except StopIteration as stop:
            return stop.value
        answer, error = None, None
        try:
            if isinstance(step, Blocking):
                answer = step.call()
            elif len(step.items) == 1:
                stmt, params = step.items[0]
                answer = [list(connection.execute(stmt, params))]
            else:
                answer = [list(rows) for rows in connection.execute_concurrent(
                    step.items, concurrency=step.concurrency or len(step.items))]
        except BaseException as exc:
            error = exc


def start(walk: Walk[T], connection: Connection, pool: Callable[[], Executor]) -> Future[T]:
    """Drive ``walk`` on the driver's event loop: the first step is issued from the calling thread,
    each next one from the callback of the last. The future gets the walk's result, or the error
    that stopped it: a driver error mapped as :meth:`Connection.execute` maps it, or whatever the
    walk raised. ``pool()`` runs :class:`Blocking` steps (asked only when the walk yields one)."""
    future: Future[T] = Future()
    future.set_running_or_notify_cancel()  # a running future cannot be cancelled: it completes once
    _Drive(walk, connection, pool, future).resume(None)
    return future


class BlockingPool:
    """The threads of one path's blocking steps: made on first use (an instance is the ``pool``
    :func:`start` takes), stopped by :meth:`close` after the steps queued in it. Once closed it
    refuses (InvalidState: the walk's future gets it) instead of starting threads again."""

    __slots__ = ("_workers", "_name", "_lock", "_pool", "_closed")

    def __init__(self, workers: int, name: str) -> None:
        self._workers, self._name = workers, name
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._closed = False

    def __call__(self) -> Executor:
        with self._lock:
            if self._closed:
                raise InvalidState(f"the {self._name} pool is closed: its store was closed", pool=self._name)
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix=self._name)
            return self._pool

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        with self._lock:
            pool, self._pool, self._closed = self._pool, None, True
        if pool is not None:
            pool.shutdown(wait=True)


def start_prepared(walk: Walk[T], connection: Connection, pool: BlockingPool,
                   prepare: Callable[[], object]) -> Future[T]:
    """:func:`start` once ``prepare()`` has prepared the walk's statements on the calling thread (a
    prepare waits for the node: on the loop thread it would wait for itself); a failed prepare is
    the future's error, the walk closed before its first step. A path whose pool is closed (its
    store closed) starts nothing: InvalidState is the future's."""
    try:
        if pool.closed:
            raise InvalidState("the store is closed: an asynchronous call after close() starts nothing")
        prepare()
    except Exception as exc:
        walk.close()
        return failed(exc)
    return start(walk, connection, pool)


def failed(error: BaseException) -> Future[Any]:
    """A future that already holds ``error`` (a call that failed before its first step)."""
    future: Future[Any] = Future()
    future.set_exception(error)
    return future


class _Drive:
    """One walk in flight: resumed by the callback of each step, exactly one step at a time."""

    __slots__ = ("walk", "connection", "pool", "future")

    def __init__(self, walk: Walk[Any], connection: Connection, pool: Callable[[], Executor],
                 future: Future[Any]) -> None:
        self.walk, self.connection, self.pool, self.future = walk, connection, pool, future

    def resume(self, answer: Any) -> None:
        try:
            step = self.walk.send(answer)
        except StopIteration as stop:
            self.future.set_result(stop.value)
            return
        except BaseException as exc:  # the walk's own error (validation, S-4): the caller's, not the loop's
            self.future.set_exception(exc)
            return
        try:
            if isinstance(step, Blocking):
                pending = step.start() if step.start is not None else None
                (pending if pending is not None else self.pool().submit(step.call)).add_done_callback(self._blocked)
            else:
                self._issue(step.items, step.concurrency)
        except BaseException as exc:
            self.fail(exc)

    def fail(self, error: BaseException) -> None:
        self.walk.close()
        self.future.set_exception(error)

    def _blocked(self, done: Future[Any]) -> None:
        error = done.exception()
        if error is not None:
            self.fail(error)
        else:
            self.resume(done.result())

    def _issue(self, items: Sequence[tuple[Stmt, Sequence[Any]]], concurrency: int) -> None:
        """Fire ``items``, at most ``concurrency`` in flight (0: all; a sliding window, as
        ``execute_concurrent``'s); resume with their rows once all answered, or fail with the first
        error in input order once every started one settled: none is started after an error."""
        n = len(items)
        if n == 1:  # most steps: no window to keep
            self._fire(items, 0, self._settle_one)
            return
        window = concurrency or n
        if window >= n > 0:  # all at once (a page's head and bucket, a send's record and index): no window either
            self._fire_all(items)
            return
        rows: list[Any] = [None] * n
        errors: list[BaseException | None] = [None] * n
        lock = threading.Lock()
        # started, running, failed, pumping (one thread starts statements at a time), finished
        st = {"started": 0, "running": 0, "failed": False, "pumping": False, "finished": False}

        def pump() -> None:
            """Start what the window allows; the last to find nothing running finishes. One pump at
            a time, so an answer that arrives inline (inside ``add_callbacks``) never recurses."""
            with lock:
                if st["pumping"]:
                    return  # the running pump re-reads the window before it stops
                st["pumping"] = True
            while True:
                with lock:
                    i = None
                    if not st["failed"] and st["started"] < n and st["running"] < window:
                        i = st["started"]
                        st["started"] += 1
                        st["running"] += 1
                    else:
                        st["pumping"] = False
                        done = st["running"] == 0 and not st["finished"]
                        st["finished"] |= done
                if i is None:
                    break
                self._fire(items, i, settle)
            if done:
                self._settled(rows, errors)

        def settle(i: int, result: Any, error: BaseException | None) -> None:
            rows[i], errors[i] = result, error
            with lock:
                st["running"] -= 1
                st["failed"] |= error is not None
            pump()

        pump()

    def _fire_all(self, items: Sequence[tuple[Stmt, Sequence[Any]]]) -> None:
        """:meth:`_issue` when the window holds every statement: each started in turn (none after an
        error has arrived), the walk resumed or failed by whichever settles last."""
        n = len(items)
        rows: list[Any] = [None] * n
        errors: list[BaseException | None] = [None] * n
        lock = threading.Lock()
        state = [n, False]  # not yet settled (started or not), an error arrived

        def settle(i: int, result: Any, error: BaseException | None, count: int = 1) -> None:
            rows[i], errors[i] = result, error
            with lock:
                state[0] -= count
                state[1] |= error is not None
                last = state[0] == 0
            if last:
                self._settled(rows, errors)

        for i in range(n):
            if state[1]:  # an error arrived: the rest is never started, and settles as such
                settle(i, None, None, n - i)
                return
            self._fire(items, i, settle)

    def _settled(self, rows: list[Any], errors: list[BaseException | None]) -> None:
        """A step's statements all settled: the walk resumed with their rows, or failed with the first
        error in input order."""
        first = next((e for e in errors if e is not None), None)
        if first is not None:
            self.fail(first)
        else:
            self.resume(rows)

    def _fire(self, items: Sequence[tuple[Stmt, Sequence[Any]]], i: int,
              settle: Callable[[int, Any, BaseException | None], None]) -> None:
        """Start ``items[i]``; ``settle(i, rows, error)`` once it answered (or failed to start)."""
        stmt, params = items[i]
        try:
            response = self.connection.execute_async(stmt, params)  # raises lab errors already
        except BaseException as exc:
            settle(i, None, exc)
            return
        self._collect(response, stmt, i, settle)

    def _settle_one(self, _i: int, rows: Any, error: BaseException | None) -> None:
        if error is not None:
            self.fail(error)
        else:
            self.resume([rows])

    def _collect(self, response: Any, stmt: Stmt, i: int,
                 settle: Callable[[int, Any, BaseException | None], None]) -> None:
        """Every row of one statement, page after page (the driver re-fires the callbacks per page)."""
        collected: list[Any] = []

        def answered(page: Any) -> None:
            try:
                if page:
                    collected.extend(page)
                if response.has_more_pages:
                    response.start_fetching_next_page()
                    return
            except BaseException as exc:
                settle(i, None, self.connection.translate_error(exc, stmt))
                return
            settle(i, collected, None)

        def errored(error: BaseException) -> None:
            settle(i, None, self.connection.translate_error(error, stmt))

        response.add_callbacks(answered, errored)
