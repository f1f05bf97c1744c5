"""run_paced_chains (lab.bench.store_paths.callback_floors): chains started at a fixed rate from the
calling thread, never more than ``in_flight`` at once, each timed once, a chain that fails to
start a failed call. Pure: the chains are plain callables ended from other threads, no server."""
from __future__ import annotations

import threading

import pytest

from lab.bench.store_paths.callback_floors import run_paced_chains
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
