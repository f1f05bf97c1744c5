"""One Locust run, written once: start the processes, watch them until they end, or stop them.

More: docs/load-internals.md.
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
from lab.load.progress import LoadProgress
from lab.load.run_monitor import RunMonitor
from lab.measure.timing import wall_seconds

POLL_SECONDS = 0.5
STATUS_SECONDS = 1.0
KILL_GRACE_SECONDS = 90.0  # past the planned end and the stop timeout, a run still going is frozen
STOP_LEAD_SECONDS = 1.5    # an early stop is published this far ahead: every process reads it in time


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


def write_stop(plan: LoadPlan, lead_seconds: float = STOP_LEAD_SECONDS) -> float:
    """Publish an early stop (Ctrl-C, a staircase's loader-bound step) before Locust is signalled,
    ``lead_seconds`` ahead (each process reads it once an interval): every process ends its
    measured window there and starts no call after it. Returns when it takes effect."""
    at = wall_seconds() + lead_seconds
    tmp = plan.load_dir / "stop.tmp"
    tmp.write_text(repr(at))
    tmp.replace(plan.stop_path())
    return at


def stop_at_published(plan: LoadPlan) -> None:
    """Publish the stop and wait until it has taken effect (a headless run with a start gate)."""
    if plan.start_gate:
        at = write_stop(plan)
        time.sleep(max(0.0, at - wall_seconds()) + POLL_SECONDS)


def drive(plan: LoadPlan, procs: Processes, progress: LoadProgress, *, start: Callable[[LoadPlan], LoadPlan],
          watch: Callable[[LoadPlan], None], cpu_csv: Path, stopping: str, stop_grace_seconds: float,
          publish_stop: bool = True) -> RunEnd:
    """The skeleton every Locust run shares: ``start(plan)`` (processes, readiness, start gate
    or web UI; returns the plan with its t0), the CPU monitor into ``cpu_csv``, ``watch(plan)``
    until the processes end; on Ctrl-C or SIGTERM ``stopping`` is reported and the processes
    get SIGINT (after the stop is published, ``publish_stop``), then SIGKILL after
    ``stop_grace_seconds``. The CPU monitor is stopped on return; the caller closes ``procs``."""
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
                if publish_stop:
                    stop_at_published(plan)
                procs.stop(stop_grace_seconds)
                return RunEnd(plan=plan, cpu=cpu, stopped=True)
    finally:
        if cpu is not None:
            cpu.stop()
    return RunEnd(plan=plan, cpu=cpu, stopped=False)


def wait_until_done(plan: LoadPlan, procs: Processes, monitor: RunMonitor, *, stop_timeout_seconds: float,
                    stop_grace_seconds: float) -> None:
    """Until the processes end: the run monitor once a second (live status, metrics, sizing, a
    staircase's loader-bound step, which stops the run here); a headless run still going
    :data:`KILL_GRACE_SECONDS` after its planned end and stop timeout is killed."""
    monitor.plan = plan  # with its t0
    t0 = plan.t0 or wall_seconds()
    deadline = t0 + plan.end_seconds + stop_timeout_seconds + KILL_GRACE_SECONDS if plan.start_gate else None
    next_status = 0.0
    while procs.running():
        now = wall_seconds()
        if deadline is not None and now > deadline:  # a frozen load generator is a result, not a hang
            procs.kill()
        if now >= next_status:
            if monitor.poll(now):  # the steps above a loader-bound one would measure the load generator
                monitor.progress.phase("stopping Locust: in-flight calls finish")
                stop_at_published(plan)
                procs.stop(stop_grace_seconds)
                break
            next_status = now + STATUS_SECONDS
        time.sleep(POLL_SECONDS)
    monitor.poll(wall_seconds())  # the final counts, for the metrics endpoint's last scrape
