"""The driver's own floors: a path's statements chained through the driver's callbacks
(``execute_async(...).add_callbacks(...)``), ``in_flight`` chains at a time from one thread, no
thread per call: what the statements cost the client when nothing waits on a native thread. The
send's chain may also append to an outbox of its own, continuing from the append's future. Chains
run as fast as they end, or at a fixed rate started from the calling thread or from the driver's
own event loop on its timer.

More: docs/bench-internals.md.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from lab.bench.store_paths.floors import SendFloorPlan
from lab.cluster.connection import Connection, Stmt
from lab.measure import Timing
from lab.load.pacing import FixedRateSchedule
from lab.measure.timing import NS_PER_SECOND, now_ns
from lab.store import Outbox

__all__ = ["Chain", "CreateTimer", "Done", "block_start_rate", "page_chain", "run_chains", "run_loop_paced_chains",
           "run_paced_chains", "send_chain", "start_rate"]

Done = Callable[[BaseException | None], None]   # a chain's end: None, or the error that stopped it
Chain = Callable[[Done], None]                  # starts a chain; it calls done exactly once
# an event loop's timer: callback() on the loop's thread after seconds (the driver's connection class's
# create_timer(timeout, callback))
CreateTimer = Callable[[float, Callable[[], None]], Any]


def _issue(conn: Connection, stmt: Stmt, params: Sequence[Any], then: Callable[[Any], None], done: Done) -> None:
    """Fire one statement; ``then(rows)`` on the driver's I/O thread when it answers, ``done(error)``
    if it fails."""
    def answered(rows: Any) -> None:
        try:
            then(rows)
        except Exception as exc:  # on the I/O thread the driver would only log it: the chain would stall
            done(exc)

    try:
        future = conn.execute_async(stmt, params)
    except Exception as exc:
        done(exc)
        return
    future.add_callbacks(answered, done)


def _together(conn: Connection, items: Sequence[tuple[Stmt, Sequence[Any]]], then: Callable[[list[Any]], None],
              done: Done) -> None:
    """Fire ``items`` at once; ``then(results in input order)`` when the last answers, ``done(error)``
    (once) if any fails."""
    results: list[Any] = [None] * len(items)
    state = {"left": len(items), "failed": False}
    lock = threading.Lock()

    def one(i: int) -> Callable[[Any], None]:
        def ok(rows: Any) -> None:
            results[i] = rows
            with lock:
                state["left"] -= 1
                last = state["left"] == 0 and not state["failed"]
            if last:
                then(results)
        return ok

    def failed(error: BaseException | None) -> None:
        with lock:
            first, state["failed"] = not state["failed"], True
        if first:
            done(error)

    for i, (stmt, params) in enumerate(items):
        _issue(conn, stmt, params, one(i), failed)


def send_chain(conn: Connection, plan: SendFloorPlan, outbox: Outbox | None = None) -> Chain:
    """The send floor's plan as one chain, each step started by the previous one's callback: the
    fencing read (a conversation's first call), the reservation (applied, or the chain fails),
    record + index together, the plan's ``log_record`` appended to ``outbox`` (``append_async``:
    its group commit's round, the chain going on from the future's callback, as the store's send
    does; a duplicate entry fails the chain), COMMITTED, the head read, the head write. The
    blocking append (``log_append``) would block the I/O thread: a plan with one is refused."""
    if plan.log_append is not None:
        raise ValueError("a callback chain never blocks: build its plans with outbox=False (log_record=True and "
                         "an outbox of its own for the append)")
    if plan.log_record is not None and outbox is None:
        raise ValueError("a plan with a log record needs the outbox its chain appends to")

    def start(done: Done) -> None:
        def head_write(_: Any = None) -> None:
            _issue(conn, *plan.head_write, lambda _rows: done(None), done)

        def head_read(_: Any = None) -> None:
            if plan.head_read is None:
                head_write()
            else:
                _issue(conn, *plan.head_read, head_write, done)

        def commit(_: Any = None) -> None:
            _issue(conn, *plan.commit, head_read, done)

        def appended(future: Future[Any]) -> None:
            try:  # on the group commit's thread, whose futures would only log an error: the chain would stall
                if future.result().duplicate:
                    raise RuntimeError("callback floor: the log held this message's coordinate already")
            except Exception as exc:
                done(exc)
                return
            commit()

        def logged(_: Any) -> None:
            if plan.log_record is None:
                commit()
                return
            pending = outbox.append_async(plan.log_record)  # type: ignore[union-attr]
            if pending is None:
                raise ValueError(f"{outbox!r} has no asynchronous append")
            pending.add_done_callback(appended)

        def reserved(rows: Any) -> None:
            if not rows or not rows[0][0]:
                done(RuntimeError("callback floor: the reservation was not applied"))
            else:
                _together(conn, plan.record_and_index, logged, done)

        def reserve(_: Any = None) -> None:
            _issue(conn, *plan.reserve, reserved, done)

        if plan.fencing_read is None:
            reserve()
        else:
            _issue(conn, *plan.fencing_read, reserve, done)
    return start


def page_chain(conn: Connection, items: Sequence[tuple[Stmt, Sequence[Any]]], expected: int) -> Chain:
    """The latest page's floor as one chain: the head's bounds and the bucket read together, the
    bucket's rows counted (fewer than ``expected``: the chain fails)."""
    def start(done: Done) -> None:
        def fetched(results: list[Any]) -> None:
            rows = len(results[1]) if results[1] is not None else 0
            done(None if rows == expected else RuntimeError(f"callback floor: {rows} rows, {expected} expected"))
        _together(conn, items, fetched, done)
    return start


def run_chains(chains: Sequence[Chain], *, in_flight: int) -> list[Timing]:
    """Run ``chains``, ``in_flight`` at a time: the calling thread starts the first ones, and each
    chain's end (on the driver's I/O thread) starts the next; the calling thread waits for the last.
    Returns each chain's Timing in input order (a failed chain: its error's type)."""
    n = len(chains)
    if n == 0:
        return []
    lock = threading.Lock()
    ends = _Ends(n, lock)
    state = {"next": 0}
    local = threading.local()  # a chain that ends inline (an error before any I/O) starts the next in a loop

    def start_one() -> None:
        with lock:
            i = state["next"]
            if i >= n:
                return
            state["next"] = i + 1
        ends.start(chains, i, lambda last: None if last else launch())

    def launch() -> None:
        if getattr(local, "active", False):
            local.pending += 1
            return
        local.active, local.pending = True, 1
        try:
            while local.pending:
                local.pending -= 1
                start_one()
        finally:
            local.active = False

    for _ in range(min(in_flight, n)):
        launch()
    return ends.wait()


def start_rate(timings: Sequence[Timing]) -> float | None:
    """The rate ``timings``' calls were started at, per second: the starts after the first over the
    time from the first start to the last (None with fewer than two starts, or all at once). A paced
    floor given this rate starts its chains as that side started its calls; a block's own throughput
    would be lower by its last call's latency."""
    if len(timings) < 2:
        return None
    first, last = min(t.started_ns for t in timings), max(t.started_ns for t in timings)
    return None if last <= first else (len(timings) - 1) * NS_PER_SECOND / (last - first)


def block_start_rate(timings: Sequence[Timing], *, calls: int, elapsed_ns: int) -> float:
    """The rate a block's calls started at (:func:`start_rate`), or, where the starts give none, its
    throughput: ``calls`` over ``elapsed_ns`` (at least 1 ns). The rate a paced floor is given."""
    rate = start_rate(timings)
    return calls * NS_PER_SECOND / max(1, elapsed_ns) if rate is None else rate


def run_paced_chains(chains: Sequence[Chain], *, in_flight: int, rate: float) -> list[Timing]:
    """:func:`run_chains`' chains started at ``rate`` per second instead of as fast as they end: the
    calling thread starts chain ``i`` when it is due (``i / rate`` seconds after the first; one sleep
    per chain, whose wake-ups the side's CPU pays), never more than ``in_flight`` at once. A floor
    issued at another side's rate, since client CPU per call falls as the rate rises."""
    n = len(chains)
    if n == 0:
        return []
    slots = threading.BoundedSemaphore(in_flight)
    ends = _Ends(n, threading.Lock())
    schedule = FixedRateSchedule.for_rate(rate, start_ns=now_ns())
    for i in range(n):
        wait_ns = schedule.due_ns(i) - now_ns()
        if wait_ns > 0:
            time.sleep(wait_ns / NS_PER_SECOND)
        slots.acquire()
        ends.start(chains, i, lambda _last: slots.release())
    return ends.wait()


def run_loop_paced_chains(chains: Sequence[Chain], *, in_flight: int, rate: float,
                          create_timer: CreateTimer) -> list[Timing]:
    """:func:`run_paced_chains`' schedule (chain ``i`` due ``i / rate`` seconds after the first, never
    more than ``in_flight`` at once), each chain started on an event loop's thread instead of the
    calling one: by a timer of ``create_timer`` (one armed at a time, for the next chain due), or by
    the end of a chain when the cap held a due one back. Each wake-up starts every chain due by then
    (a late timer does not slow the rate). With the driver's own timer the chains start where their
    answers arrive, so none wakes the loop from another thread; the calling thread only waits. A
    timer still pending when the run ends (its chain started by an end) is cancelled, where the
    timer object has ``cancel()`` (the driver's do)."""
    n = len(chains)
    if n == 0:
        return []
    lock = threading.Lock()
    ends = _Ends(n, lock)
    # "armed": the pending timer's cell, holding the timer once create_timer returned it, or None when
    # no timer is pending; "over": the run ended (a timer created after that cancels itself)
    state: dict[str, Any] = {"next": 0, "armed": [None], "over": False}
    local = threading.local()  # a chain that ends inside pump() (before any I/O): pump's loop goes on
    schedule = FixedRateSchedule.for_rate(rate, start_ns=now_ns())

    def ended(last: bool) -> None:
        if not last and not getattr(local, "pumping", False):
            pump()

    def fired() -> None:
        with lock:
            state["armed"] = None
        pump()

    def arm(seconds: float, cell: list[Any]) -> None:
        timer = create_timer(seconds, fired)
        with lock:
            cell[0], over = timer, state["over"]
        if over:
            _cancel(timer)

    def pump() -> None:
        """Start every chain due now that the cap lets run; arm a timer for the next one unless one
        is armed already or the cap holds it (a chain's end then pumps)."""
        arm_ns = 0
        cell: list[Any] | None = None  # the timer to arm's, when this pump arms one
        local.pumping = True
        try:
            while True:
                with lock:
                    i = state["next"]
                    # in flight: the chains started less those ended (ends.left counts down under this lock)
                    if i >= n or i - (n - ends.left) >= in_flight:
                        return
                    wait_ns = schedule.due_ns(i) - now_ns()
                    if wait_ns > 0:
                        if state["armed"] is None:
                            state["armed"] = cell = [None]
                            arm_ns = wait_ns
                        break
                    state["next"] = i + 1
                ends.start(chains, i, ended)
        finally:
            local.pumping = False
        if cell is not None:
            arm(arm_ns / NS_PER_SECOND, cell)

    arm(0.0, state["armed"])  # even the first chain starts on the loop
    timings = ends.wait()
    with lock:  # left armed, the timer would fire once more and find nothing due
        state["over"], cell = True, state["armed"]
        pending = None if cell is None else cell[0]
    _cancel(pending)
    return timings


def _cancel(timer: Any) -> None:
    """``timer.cancel()`` where it has one (the driver's Timer and AsyncioTimer: once cancelled, one
    that has not fired never calls back)."""
    cancel = getattr(timer, "cancel", None)
    if cancel is not None:
        cancel()


class _Ends:
    """The chains' ends of one run: each one's Timing (input order), each end counted once (a chain
    that ends twice, or fails to start, is timed once); :meth:`wait` returns them once the last ended."""

    def __init__(self, n: int, lock: threading.Lock) -> None:
        self.timings: list[Timing | None] = [None] * n
        self.left, self.lock, self.finished = n, lock, threading.Event()

    def start(self, chains: Sequence[Chain], i: int, then: Callable[[bool], None]) -> None:
        """Start chain ``i``, timed from now; at its end ``then(last)``: whether it was the run's last end."""
        started = now_ns()

        def done(error: BaseException | None) -> None:
            with self.lock:
                if self.timings[i] is not None:
                    return  # ended once already
                self.timings[i] = Timing(started, now_ns(), None if error is None else type(error).__name__)
                self.left -= 1
                last = self.left == 0
            if last:
                self.finished.set()
            then(last)
        try:
            chains[i](done)
        except Exception as exc:  # a chain that could not start is a failed call, not a stall
            done(exc)

    def wait(self) -> list[Timing]:
        self.finished.wait()
        return [t for t in self.timings if t is not None]
