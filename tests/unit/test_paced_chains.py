"""run_paced_chains and run_loop_paced_chains (lab.bench.store_paths.callback_floors): chains started
at a fixed rate from the calling thread, or on an event loop's thread by its timer, never more than
``in_flight`` at once, each timed once, a chain that fails to start a failed call. Pure: the chains
are plain callables ended from other threads, the loop a plain asyncio loop, no server."""
from __future__ import annotations

import asyncio
import sys
import threading

import pytest

from lab.bench.store_paths.callback_floors import block_start_rate, run_loop_paced_chains, run_paced_chains, start_rate
from lab.measure.timing import NS_PER_SECOND, now_ns


def _ended_by_another_thread(running: list[int], most: list[int], lock: threading.Lock, hold: float):
    def chain(done):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])

        def end():
            with lock:
                running[0] -= 1
            done(None)
        threading.Timer(hold, end).start()
    return chain


@pytest.mark.parametrize("in_flight", [1, 3])
def test_chains_start_no_earlier_than_due_and_no_more_than_in_flight(in_flight):
    rate, n = 200.0, 24
    running, most, lock = [0], [0], threading.Lock()
    t0 = now_ns()
    timings = run_paced_chains([_ended_by_another_thread(running, most, lock, 0.02) for _ in range(n)],
                               in_flight=in_flight, rate=rate)
    assert len(timings) == n and all(t.error is None for t in timings)
    # chain i starts no earlier than i / rate after the schedule's start (taken after t0)
    for i, t in enumerate(timings):
        assert t.started_ns - t0 >= i * NS_PER_SECOND / rate - 1, i
        assert t.ended_ns >= t.started_ns
    assert 1 <= most[0] <= in_flight and running[0] == 0


def test_a_chain_that_fails_to_start_or_ends_twice_is_timed_once():
    def broken(_done):
        raise RuntimeError("no start")

    def twice(done):
        done(None)
        done(ValueError("again"))

    timings = run_paced_chains([broken, twice, twice], in_flight=2, rate=1000.0)
    assert [t.error for t in timings] == ["RuntimeError", None, None]
    assert run_paced_chains([], in_flight=2, rate=1000.0) == []


# ---- run_loop_paced_chains: the same schedule, each chain started on an event loop's thread ------------
class _Loop:
    """A real asyncio loop on a thread of its own, as the driver runs its reactor: ``create_timer``
    has the driver's connection-class signature and, like the driver's, returns a timer with
    ``cancel()`` (none with ``cancellable=False``); it counts the timers armed, neither fired nor
    cancelled. ``late_seconds``: how much later than asked a timer for a later time fires."""

    def __init__(self, *, cancellable: bool = True, late_seconds: float = 0.0) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.lock = threading.Lock()
        self.armed, self.most_armed, self.created = 0, 0, 0
        self.cancellable, self.late_seconds = cancellable, late_seconds

    def __enter__(self) -> _Loop:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()

    def create_timer(self, seconds, callback):
        with self.lock:
            self.armed += 1
            self.created += 1
            self.most_armed = max(self.most_armed, self.armed)
        timer = _Timer(self, callback)
        delay = seconds + (self.late_seconds if seconds > 0 else 0.0)
        self.loop.call_soon_threadsafe(self.loop.call_later, delay, timer.fire)
        return timer if self.cancellable else None


class _Timer:
    """One of _Loop's timers: it stops counting as armed once, when it fires or is cancelled first."""

    def __init__(self, owner: _Loop, callback) -> None:
        self.owner, self.callback, self.done = owner, callback, False

    def _disarm(self) -> bool:
        with self.owner.lock:
            first, self.done = not self.done, True
            if first:
                self.owner.armed -= 1
        return first

    def fire(self) -> None:
        if self._disarm():
            self.callback()

    def cancel(self) -> None:
        self._disarm()


def _ended_on(loop: _Loop | None, running, most, lock, hold: float, starters: list | None = None):
    """A chain held ``hold`` seconds, ended on ``loop``'s thread (where the driver's answers arrive)
    or, without one, on a thread of its own."""
    def chain(done):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
            if starters is not None:
                starters.append(threading.get_ident())

        def end():
            with lock:
                running[0] -= 1
            done(None)
        if loop is None:
            threading.Timer(hold, end).start()
        else:
            loop.loop.call_soon_threadsafe(loop.loop.call_later, hold, end)
    return chain


@pytest.mark.parametrize("in_flight", [1, 3])
def test_loop_paced_chains_start_on_the_loop_no_earlier_than_due_and_no_more_than_in_flight(in_flight):
    rate, n = 200.0, 24
    running, most, lock, starters = [0], [0], threading.Lock(), []
    with _Loop() as loop:
        t0 = now_ns()
        timings = run_loop_paced_chains([_ended_on(loop, running, most, lock, 0.02, starters) for _ in range(n)],
                                        in_flight=in_flight, rate=rate, create_timer=loop.create_timer)
        assert set(starters) == {loop.thread.ident}  # every chain started on the loop, none on this thread
    assert len(timings) == n and all(t.error is None for t in timings)
    for i, t in enumerate(timings):
        assert t.started_ns - t0 >= i * NS_PER_SECOND / rate - 1, i
        assert t.ended_ns >= t.started_ns
    assert [t.started_ns for t in timings] == sorted(t.started_ns for t in timings)  # in the schedule's order
    assert 1 <= most[0] <= in_flight and running[0] == 0
    # one timer armed at a time, and none left armed by the run (a chain's end may start the chain a
    # timer was for: the run cancels that one)
    assert loop.most_armed == 1 and loop.armed == 0


@pytest.mark.parametrize("cancellable", [True, False])
def test_a_timer_whose_chain_an_end_started_is_not_left_armed(cancellable):
    """Timers for a later time fire an hour late, so chain 1, due 50 ms after chain 0, is started by
    chain 0's end (100 ms after it started) while its timer is still armed: the run cancels that
    timer when it ends. A timer without cancel() is left to fire and find nothing due."""
    running, most, lock = [0], [0], threading.Lock()
    with _Loop(cancellable=cancellable, late_seconds=3600.0) as loop:
        timings = run_loop_paced_chains([_ended_on(loop, running, most, lock, 0.1) for _ in range(2)],
                                        in_flight=2, rate=20.0, create_timer=loop.create_timer)
        assert len(timings) == 2 and all(t.error is None for t in timings)
        assert 1 <= loop.created <= 2  # chain 1's timer, unless the first wake-up found it due already
        assert loop.armed == (0 if cancellable else loop.created - 1)


def test_a_chain_held_back_by_the_cap_is_started_by_an_end_on_another_thread():
    """Every chain due at once (a rate far above what one in flight sustains): the cap holds them, and
    each end, here on a thread of its own, starts the next: nothing stalls, never two at once."""
    running, most, lock = [0], [0], threading.Lock()
    with _Loop() as loop:
        timings = run_loop_paced_chains([_ended_on(None, running, most, lock, 0.002) for _ in range(20)],
                                        in_flight=1, rate=1e6, create_timer=loop.create_timer)
    assert len(timings) == 20 and all(t.error is None for t in timings)
    assert most[0] == 1 and running[0] == 0
    assert all(a.ended_ns <= b.started_ns for a, b in zip(timings, timings[1:]))  # one after the other


def test_a_loop_paced_chain_that_fails_to_start_ends_twice_or_ends_inline_is_timed_once():
    def broken(_done):
        raise RuntimeError("no start")

    def twice(done):
        done(None)
        done(ValueError("again"))

    with _Loop() as loop:
        timings = run_loop_paced_chains([broken, twice, twice], in_flight=2, rate=1000.0,
                                        create_timer=loop.create_timer)
        assert [t.error for t in timings] == ["RuntimeError", None, None]
        # chains that end inside their start, more of them than Python's recursion limit: pump's loop
        # starts the next, no end calls back into it
        inline = [lambda done: done(None)] * (sys.getrecursionlimit() + 100)
        timings = run_loop_paced_chains(inline, in_flight=1, rate=1e6, create_timer=loop.create_timer)
        assert len(timings) == len(inline) and all(t.error is None for t in timings)
        created = loop.created
        assert run_loop_paced_chains([], in_flight=2, rate=1000.0, create_timer=loop.create_timer) == []
        assert loop.created == created  # no chains: no timer


def test_the_start_rate_counts_the_starts_not_the_last_answer():
    """A paced floor is given the rate the other side started its calls at: the starts after the
    first over the first-to-last start span, whatever the last call's latency; None without a span."""
    from lab.measure import Timing

    starts = [0, 10_000_000, 20_000_000, 30_000_000, 40_000_000]  # every 10 ms, out of order below
    timings = [Timing(s, s + 50_000_000) for s in reversed(starts)]  # each answered 50 ms later
    assert start_rate(timings) == pytest.approx(100.0)
    assert start_rate(timings[:1]) is None and start_rate([]) is None
    assert start_rate([Timing(5, 6), Timing(5, 9)]) is None  # started together: no rate


def test_a_block_s_start_rate_falls_back_to_its_throughput_only_without_starts():
    """The rate a paced floor is given: the block's starts when they span time, else its calls over
    its elapsed time (never a division by zero)."""
    from lab.measure import Timing

    assert block_start_rate([], calls=50, elapsed_ns=NS_PER_SECOND // 2) == pytest.approx(100.0)
    assert block_start_rate([Timing(5, 6), Timing(5, 9)], calls=2, elapsed_ns=NS_PER_SECOND) == pytest.approx(2.0)
    assert block_start_rate([], calls=3, elapsed_ns=0) == 3 * NS_PER_SECOND  # at least 1 ns
    starts = [Timing(s, s + 50_000_000) for s in (0, 10_000_000, 20_000_000)]  # every 10 ms
    assert block_start_rate(starts, calls=3, elapsed_ns=NS_PER_SECOND) == pytest.approx(100.0)  # not 3/s
