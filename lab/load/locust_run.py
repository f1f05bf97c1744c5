"""One Locust run, written once: start the processes, watch them until they end, or stop them.

``lab load`` (one process, or a master and workers on loopback), ``lab load --master`` and
``lab load --worker`` all run Locust the same way (:func:`drive`): the caller's ``start`` starts
the processes and opens the start gate (or the web UI) and returns the plan with its ``t0``; a
CPU monitor samples the processes (:mod:`lab.load.loadgen_cpu`); ``watch`` waits until they
end (:func:`wait_until_done`: a live status, and a kill after the deadline so a frozen load
generator is a result, not a hang). Ctrl-C or SIGTERM (:func:`sigterm_as_interrupt`) stops them:
SIGINT to each, in-flight calls finish, then the caller writes the summary and audits.
"""
from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.load.loadgen_cpu import CpuMonitor
from lab.load.plan import LoadPlan
from lab.load.processes import Processes
from lab.load.progress import LiveStatus, LoadProgress, read_live_totals
from lab.measure.timing import wall_seconds

POLL_SECONDS = 0.5
STATUS_SECONDS = 1.0
KILL_GRACE_SECONDS = 90.0  # past the planned end and the stop timeout, a run still going is frozen


@dataclass(frozen=True, kw_only=True)
class RunEnd:
    """How a run ended: the plan it ran (with its t0), the CPU monitor, whether Ctrl-C or
    SIGTERM stopped it."""

    plan: LoadPlan
    cpu: CpuMonitor | None
    stopped: bool


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM ends a run the way Ctrl-C does (stop Locust, then summary and audit). SIGINT is
    set too: a shell starts background jobs with it ignored, and Python then never raises
    KeyboardInterrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(_sig: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def drive(plan: LoadPlan, procs: Processes, progress: LoadProgress, *, start: Callable[[LoadPlan], LoadPlan],
          watch: Callable[[LoadPlan], None], cpu_csv: Path, stopping: str, stop_grace_seconds: float) -> RunEnd:
    """The skeleton every Locust run shares: ``start(plan)`` (processes, readiness, start gate
    or web UI; returns the plan with its t0), the CPU monitor into ``cpu_csv``, ``watch(plan)``
    until the processes end; on Ctrl-C or SIGTERM ``stopping`` is reported and the processes
    get SIGINT, then SIGKILL after ``stop_grace_seconds``. The CPU monitor is stopped on
    return; the caller closes ``procs``."""
    cpu: CpuMonitor | None = None
    try:
        with sigterm_as_interrupt():
            try:
                plan = start(plan)
                cpu = CpuMonitor(procs.pids, cpu_csv, plan.t0 or wall_seconds())
                cpu.start()
                watch(plan)
            except KeyboardInterrupt:
                progress.done()
                progress.phase(stopping)
                procs.stop(stop_grace_seconds)
                return RunEnd(plan=plan, cpu=cpu, stopped=True)
    finally:
        if cpu is not None:
            cpu.stop()
    return RunEnd(plan=plan, cpu=cpu, stopped=False)


def wait_until_done(plan: LoadPlan, procs: Processes, progress: LoadProgress, *, stop_timeout_seconds: float) -> None:
    """Until the processes end: the live status about once a second; a headless run still going
    :data:`KILL_GRACE_SECONDS` after its planned end and stop timeout is killed."""
    t0 = plan.t0 or wall_seconds()
    deadline = t0 + plan.end_seconds + stop_timeout_seconds + KILL_GRACE_SECONDS if plan.start_gate else None
    next_status = 0.0
    rates = _LiveRates()
    while procs.running():
        now = wall_seconds()
        if deadline is not None and now > deadline:  # a frozen load generator is a result, not a hang
            procs.kill()
        if now >= next_status:
            live = read_live_totals(plan.load_dir) or {}
            progress.status(LiveStatus(elapsed_seconds=now - t0, total_seconds=plan.end_seconds if plan.start_gate
                                       else None, warmup_seconds=plan.warmup_seconds,
                                       **(live | rates.update(now, live))))
            next_status = now + STATUS_SECONDS
        time.sleep(POLL_SECONDS)


def wait_until_exit(procs: Processes) -> None:
    """Until the processes end, nothing else (a distributed worker: its master ends the run)."""
    while procs.running():
        time.sleep(POLL_SECONDS)


class _LiveRates:
    """calls/s and errors/s between two samples of Locust's running totals (its own per-second
    rate is 0 on a distributed master's history rows)."""

    WINDOW_SECONDS = 5.0

    def __init__(self) -> None:
        self.samples: list[tuple[float, int, int]] = []

    def update(self, now: float, live: dict[str, Any]) -> dict[str, float | None]:
        if "calls" not in live:
            return {}
        self.samples.append((now, live["calls"], live["errors"]))
        while len(self.samples) > 2 and now - self.samples[1][0] >= self.WINDOW_SECONDS:
            self.samples.pop(0)
        (t_a, c_a, e_a), (t_b, c_b, e_b) = self.samples[0], self.samples[-1]
        if t_b - t_a <= 0:
            return {"calls_per_second": None, "errors_per_second": None}
        return {"calls_per_second": (c_b - c_a) / (t_b - t_a), "errors_per_second": (e_b - e_a) / (t_b - t_a)}
