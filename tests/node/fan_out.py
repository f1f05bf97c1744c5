"""Fan-out of racing callers for the race tests (test_concurrency.py, test_control_races.py):
threads released together by a gate, and spawned processes that report through one queue.

What each caller does stays with its test (``concurrent_sends.py``, ``control_races.py``); this
module is only the plumbing that makes them start at the same instant and collects what they saw.
A module of its own (not a test file) because spawned children import their target by module name.
"""
from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable
from typing import Any

KILL_AFTER_SECONDS = 30  # a child still alive this long after its report is killed (by handle)


def fan_out(threads: int, call: Callable[[int], dict[str, Any]], before_start: Any = None) -> list[dict[str, Any]]:
    """Run ``call(i)`` for i in range(threads), one thread each, all released at the same instant;
    each call's row, or ``{"error": ...}`` if it raised (the test fails on it). ``before_start``
    runs once every thread waits at the gate (e.g. a cross-process barrier)."""
    gate = threading.Barrier(threads + 1)
    out: list[dict[str, Any]] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        gate.wait()
        try:
            row = call(i)
        except Exception as exc:  # reported to the test, which fails on it
            row = {"error": f"{type(exc).__name__}: {exc}"}
        with lock:
            out.append(row)

    workers = [threading.Thread(target=one, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    if before_start is not None:
        before_start()  # e.g. a cross-process barrier: every process opens its gate together
    gate.wait()
    for w in workers:
        w.join()
    return out


def fan_out_processes(target: Callable[..., None], args: Callable[[int], tuple], processes: int,
                      timeout_seconds: float) -> list[tuple[int, list, str | None]]:
    """Spawn ``processes`` children running ``target(barrier, results, *args(i))``; they share one
    barrier (to start each race together) and put one ``(node_id, rounds, error)`` report each on
    ``results``. Returns the reports; fails if any child reported an error."""
    spawn = multiprocessing.get_context("spawn")  # the parent's driver threads must not be forked
    barrier = spawn.Barrier(processes, timeout=timeout_seconds)
    results = spawn.Queue()
    procs = [spawn.Process(target=target, args=(barrier, results, *args(i))) for i in range(processes)]
    for p in procs:
        p.start()
    try:
        reports = [results.get(timeout=timeout_seconds) for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=KILL_AFTER_SECONDS)
            if p.is_alive():  # only our own child, by handle
                p.kill()
    failed = [(node, err) for node, _, err in reports if err]
    assert not failed, failed
    return reports
