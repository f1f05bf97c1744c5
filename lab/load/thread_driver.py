"""A fixed-rate load from a thread pool inside the caller's process: the notebooks' load generator.

More: docs/load-internals.md.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from lab.load.pacing import FixedRateSchedule
from lab.load.verdict import LagTrend, Limits, judge
from lab.measure import Stopwatch, now_ns
from lab.measure.hdr import OpStats, latencies_us


def drive(call: Callable[[int], Any], *, rate: float, seconds: float, workers: int) -> tuple[OpStats, float]:
    """Issue ``call(k)`` at ``rate``/s for ``seconds`` from ``workers`` threads (call k due at
    start + k/rate, whatever earlier calls did); returns the latencies (service and corrected,
    µs) and the wall seconds until the last call ended."""
    stats, lock = OpStats(), threading.Lock()
    n = max(1, int(round(rate * seconds)))
    schedule = FixedRateSchedule.for_rate(rate, start_ns=now_ns() + 5_000_000)

    def one(k: int, due: int) -> None:
        started = now_ns()
        error = None
        try:
            call(k)
        except Exception as exc:  # a failed call is recorded with its latency, never dropped
            error = type(exc).__name__
        service, corrected = latencies_us(started_ns=started, ended_ns=now_ns(), due_ns=due)
        with lock:
            stats.record(service, corrected, error=error)

    watch = Stopwatch()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for k in range(n):
            due = schedule.due_ns(k)
            wait = (due - now_ns()) / 1e9
            if wait > 0:
                time.sleep(wait)
            pool.submit(one, k, due)
    return stats, watch.seconds()


def loader_bound(window: Any, limits: Limits | None = None) -> bool:
    """Was this window's driving loader-bound (``lab.load.verdict``: this process over its CPU
    limit, or the rate not offered while calls started late)? Windows from before the check
    (no ``loadgen_cpu_percent_of_core``) count as not."""
    pct = getattr(window, "loadgen_cpu_percent_of_core", None)
    if pct is None or (isinstance(pct, float) and np.isnan(pct)):
        return False
    lag = getattr(window, "lag_ms", None)
    v = judge(requested_rate=window.rate_requested or None, achieved_rate=getattr(window, "rate_driven", None),
              loader_cpu_percent_of_core={"notebook": float(pct)}, limits=limits,
              lag=LagTrend(points=1, mean_ms=float(lag)) if lag is not None and not np.isnan(lag) else None)
    return v.loader_bound
