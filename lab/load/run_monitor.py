"""The runner's look at a running load, once a second: status, metrics, sizing, a staircase's stop.

More: docs/load-internals.md.
"""
from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from lab.load.live_counts import EDGE_SECONDS, LiveCounts, read_counts
from lab.load.loader_sizing import (LoaderCost, Sizing, SizingBook, changed_note, size, steady_window, usable_cores, warmup_cost,
                                   window_cost)
from lab.load.metrics_endpoint import LiveState, MetricsServer
from lab.load.pacing import Stage
from lab.load.plan import LoadPlan
from lab.load.progress import LiveStatus, LoadProgress
from lab.load.staircase_figure import write_figure
from lab.load.summary import LoadSummary, judge_window, summarize_run
from lab.load.verdict import Limits, MachineShare, Verdict

SIZING_LEAD_SECONDS = 1.0   # the sizing is said this long before the warmup ends (the poll is once a second)
MIN_SIZING_SECONDS = 2.0    # a warmup shorter than this cannot say much: sized from the learned cost only


@dataclass(frozen=True, kw_only=True)
class StepStop:
    """A staircase step that was loader- or machine-bound: the run stops after it."""

    number: int          # 1-based among the measured steps
    stage: Stage
    verdict: Verdict


class RunMonitor:
    def __init__(self, plan: LoadPlan, progress: LoadProgress, *, limits: Limits | None = None,
                 metrics: MetricsServer | None = None, driver: str = "threads", shared: bool = False) -> None:
        self.plan = plan
        self.progress = progress
        self.limits = limits or Limits()
        self.metrics = metrics
        self.driver = driver
        self.counts = LiveCounts()
        self.sizing: Sizing | None = None
        self.warmup_cost: LoaderCost | None = None
        self.stopped: StepStop | None = None
        self._judged = 0
        self._last_calls = -1
        self._steps = [s for s in plan.stages if s.end_s > plan.warmup_seconds] if len(plan.stages) > 1 else []
        self.shared = shared                         # the node runs on this machine: its busy CPU is sampled
        self._machine: list[tuple[float, float]] = []  # (wall seconds, busy CPU seconds of the machine)

    def machine_share(self, start_s: float, end_s: float) -> MachineShare | None:
        """The machine's busy cores over [start_s, end_s] (seconds after t0), from the samples inside it;
        None when the node does not share this machine or too few samples fall inside."""
        t0 = self.plan.t0
        if not self.shared or not t0:
            return None
        inside = [m for m in list(self._machine) if t0 + start_s <= m[0] <= t0 + end_s]
        if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
            return None
        busy = (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])
        return MachineShare(busy_cores=busy, cores=os.cpu_count() or 1)

    def poll(self, now_wall: float) -> bool:
        """Read the counts, report them; True when the run should stop now (a loader-bound step)."""
        plan = self.plan
        self.counts = counts = read_counts(plan.load_dir)
        if self.shared:
            self._machine.append((now_wall, busy_cpu_seconds()))
        t0 = plan.t0 or now_wall
        elapsed = now_wall - t0
        # the stage's rate now (before t0 the first, after the end the last: what was asked of the run)
        rate = plan.requested_rate(min(max(elapsed, 0.0), plan.end_seconds - 1e-6)) if plan.fixed_rate else None
        cpu = [c for c in (p.last_cpu_percent() for p in counts.processes) if c is not None]
        active = counts.in_flight > 0 or counts.calls + counts.warmup_calls != self._last_calls
        self._last_calls = counts.calls + counts.warmup_calls
        self.progress.status(LiveStatus(
            elapsed_seconds=elapsed, total_seconds=plan.end_seconds if plan.start_gate else None,
            warmup_seconds=plan.warmup_seconds, active=active, calls=counts.calls,
            calls_per_second=counts.achieved_rate(), requested_rate=rate, errors=counts.errors,
            outcomes=counts.outcomes, in_flight=counts.in_flight, late=counts.late_calls,
            warmup_calls=counts.warmup_calls, loader_cpu_percent=max(cpu) if cpu else None,
            processes=max(1, len(counts.processes))))
        if self.metrics is not None:
            self.metrics.update(LiveState(counts=counts, run_id=plan.run_id, profile=plan.profile,
                                          mode="fixed-rate" if plan.fixed_rate else "closed-loop",
                                          requested_rate=rate, loader_bound=self._live_bound(counts, elapsed)))
        self._size_at_warmup_end(counts, elapsed)
        return self._judge_steps(counts)

    def _live_bound(self, counts: LiveCounts, elapsed: float) -> bool | None:
        """The CPU check over the measured window so far (the rate and lag checks need its end)."""
        start = self.plan.warmup_seconds
        if elapsed <= start + 1:
            return None
        cpu = [c for c in counts.cpu_percent_by_process(start, elapsed).values() if c is not None]
        return bool(cpu) and max(cpu) > self.limits.max_loader_cpu_percent_of_core

    def _size_at_warmup_end(self, counts: LiveCounts, elapsed: float) -> None:
        plan = self.plan
        if (self.warmup_cost is not None or not plan.fixed_rate or plan.warmup_seconds < MIN_SIZING_SECONDS
                or elapsed < plan.warmup_seconds - SIZING_LEAD_SECONDS):
            return
        upto = min(elapsed, plan.warmup_seconds)
        cost = warmup_cost(profile=plan.profile, driver=self.driver, cpu_seconds=counts.cpu_seconds(0.0, upto),
                           finished=counts.warmup_calls, started=counts.started_calls(0.0, upto))
        if cost is None:
            return
        self.warmup_cost = cost
        top = max(s.rate for s in plan.stages)
        self.sizing = size(top, cost, processes=plan.workers,
                           max_cpu_percent_of_core=self.limits.max_loader_cpu_percent_of_core)
        warn = "" if self.sizing.enough else "; the measured window will be loader-bound"
        note = changed_note(plan.workers, "processes this run started with", self.sizing)
        self.progress.phase(self.sizing.advice() + note + warn)

    def _judge_steps(self, counts: LiveCounts) -> bool:
        if self.stopped is not None or not self._steps or not counts.processes:
            return self.stopped is not None
        reported = min((p.timeline[-1].t if p.timeline else -math.inf) for p in counts.processes)
        while self._judged < len(self._steps) and reported >= self._steps[self._judged].end_s - EDGE_SECONDS:
            st = self._steps[self._judged]
            start = max(st.start_s, self.plan.warmup_seconds)
            calls, _cpu, _lag = counts.window(start, st.end_s)
            verdict = judge_window(self.plan, counts, start, st.end_s, achieved=calls / (st.end_s - start),
                                   limits=self.limits, machine=self.machine_share)
            self._judged += 1
            if verdict.bound:
                self.stopped = StepStop(number=self._judged, stage=st, verdict=verdict)
                why = "; ".join(r.text for r in verdict.reasons)
                self.progress.phase(f"staircase step {self._judged} ({st.rate:,.1f} calls/s) is {verdict.verdict}: {why}. "
                                    "Stopping: the steps above it would measure the load generator; the store's "
                                    "capacity was not reached")
                return True
        return False


def finish_summary(plan: LoadPlan, monitor: RunMonitor, *, home: Path, interrupted: bool, web: bool,
                   exit_codes: list[int | None], parameters: dict[str, Any]) -> LoadSummary:
    """The summary from the processes' final snapshots, the loader cost it measured (learned for
    ``--processes auto``), what the rate needs of the loader, a staircase's figure."""
    stopped = monitor.stopped.number if monitor.stopped is not None else None
    summary = summarize_run(plan, plan.load_dir, exit_codes=exit_codes, parameters=parameters,
                            interrupted=interrupted, limits=monitor.limits, stopped_at_step=stopped,
                            machine=monitor.machine_share if monitor.shared else None)
    limit = monitor.limits.max_loader_cpu_percent_of_core
    calls = summary.all_operations.count
    learned = window_cost(profile=plan.profile, driver=monitor.driver, run_id=plan.run_id, finished=calls,
                          started=summary.calls_started,
                          cpu_seconds=(summary.loader_cpu_ms_per_call or 0.0) * calls / 1000)
    book = SizingBook(home)
    # only a steady measured window teaches the book; else the advice uses the book's (steady windows of earlier
    # runs), or this warmup's (calls it started: an underestimate when they pile up in flight)
    cost = learned or book.get(plan.profile, monitor.driver) or monitor.warmup_cost
    sizing: dict[str, Any] = {"processes": plan.workers, "usable_cores": usable_cores(),
                              "max_loader_cpu_percent_of_core": limit, "cost": cost.to_json() if cost else None}
    if not steady_window(finished=calls, started=summary.calls_started) and calls:
        sizing["not_measured"] = (f"loader CPU per call not measured in this window: {summary.calls_started:,} calls "
                                  f"started, {calls:,} finished (calls piled up in flight: the store did not keep "
                                  "up; not a steady state)")
    top = max((s.rate for s in plan.stages), default=None)
    if cost is not None and top is not None:
        need = size(top, cost, processes=plan.workers, max_cpu_percent_of_core=limit)
        before = monitor.sizing
        note = (changed_note(before.processes_needed, f"at the end of the warmup ({before.cost.cpu_ms_per_call:.2f} ms "
                             "per call)", need) if before is not None
                else changed_note(plan.workers, "processes this run started with", need))
        sizing.update(processes_needed=need.processes_needed, machines_needed=need.machines_needed,
                      advice=need.advice() + note)
    if learned is not None and not web and not interrupted:
        book.put(learned)
    summary = dataclasses.replace(summary, sizing=sizing)
    if summary.steps:
        write_figure([s.to_json() for s in summary.steps], plan.load_dir,
                     title=f"staircase {plan.run_id} ({plan.profile}): latency vs rate (hollow: loader- or machine-bound)")
    return summary


def busy_cpu_seconds() -> float:
    """This machine's CPU seconds spent busy since boot, over all its cores."""
    t = psutil.cpu_times()
    return t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0) + getattr(t, "steal", 0.0)
