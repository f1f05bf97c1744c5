"""What a load run measured (``load/summary.json``): :class:`LoadSummary` and how it is made.

More: docs/load-internals.md.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.load.audit import AuditResult, read_acks
from lab.load.loadgen_cpu import CpuMonitor, CpuWindow
from lab.load.live_counts import LiveCounts, read_counts
from lab.load.loader_sizing import steady_window
from lab.load.operation_cpu import APPORTIONED_NOTE, FUTURE, OperationCpu, apportion
from lab.load.plan import LoadPlan
from lab.load.verdict import Limits, MachineShare, Verdict, judge, lag_trend
from lab.measure import LatencySummary, a_over_b, summarize_histogram
from lab.measure.hdr import OperationSummary, OpStats, new_histogram, read_interval_log, summarize

Machine = Callable[[float, float], MachineShare | None]  # busy cores of a shared machine over [start_s, end_s]
UNITS = {"latency": "microseconds", "rate": "calls per second"}
ACK_PHASES = ("prior", "seed", "warmup", "measured", "after")


@dataclass(frozen=True, kw_only=True)
class AckCounts:
    """Acknowledged sends by phase of the run; replays (answered from client_dedup) apart.
    ``prior``: sends of earlier loads of the same run id (``lab.load.load_folders``); ``seed``: this
    run's seed, sent before Locust started; neither is in the measured operations."""

    prior: int = 0
    seed: int = 0
    warmup: int = 0
    measured: int = 0
    after: int = 0
    replayed: int = 0

    @property
    def total_new(self) -> int:
        return self.prior + self.seed + self.warmup + self.measured + self.after

    def to_json(self) -> dict[str, int]:
        return {"prior": self.prior, "seed": self.seed, "warmup": self.warmup, "measured": self.measured,
                "after": self.after, "replayed": self.replayed, "total_new": self.total_new}


@dataclass(frozen=True, kw_only=True)
class WorkerReport:
    """What one Locust worker reported at its end (``load/totals/<worker>.json``)."""

    worker: str
    pid: int
    acks: int
    driver: str | None = None      # native-threads | gevent
    reactor: str | None = None     # the driver's connection class
    call_paths: Mapping[str, str] | None = None  # operation -> thread | future | gevent (lab.load.operation_cpu)
    alerts: Mapping[str, Any] | None = None
    requests: Mapping[str, Any] | None = None
    measured_seconds: float | None = None   # its tests' measured time (the web UI's run length)
    machine: Mapping[str, Any] | None = None  # a distributed run's worker: host, address, clock offset, CPU

    def to_json(self) -> dict[str, Any]:
        out = {"worker": self.worker, "pid": self.pid, "acks": self.acks, "driver": self.driver,
               "reactor": self.reactor, "call_paths": self.call_paths, "alerts": self.alerts,
               "requests": self.requests, "measured_seconds": self.measured_seconds}
        if self.machine is not None:
            out["machine"] = dict(self.machine)
        return out


@dataclass(frozen=True, kw_only=True)
class StepSummary:
    """One stage of the stage table (a staircase step): requested vs achieved rate, latencies."""

    start_s: float
    end_s: float
    requested_rate: float
    warmup: bool
    achieved_rate: float
    service_us: LatencySummary
    corrected_us: LatencySummary
    loadgen_cpu: CpuWindow | None = None
    verdict: Verdict | None = None       # measured steps: valid or loader-bound

    def to_json(self) -> dict[str, Any]:
        out = {"start_s": self.start_s, "end_s": self.end_s, "requested_rate": self.requested_rate,
               "warmup": self.warmup, "achieved_rate": self.achieved_rate, "service_us": self.service_us.to_json(),
               "corrected_us": self.corrected_us.to_json()}
        if self.loadgen_cpu is not None:
            out["loadgen_cpu"] = self.loadgen_cpu.to_json()
        if self.verdict is not None:
            out["verdict"] = self.verdict.to_json()
        return out


@dataclass(frozen=True, kw_only=True)
class LoadSummary:
    run_id: str
    profile: str
    mode: str                                  # fixed-rate | closed-loop
    users: int
    processes: int
    warmup_seconds: float
    measured_seconds: float
    requested_rate: float | None
    achieved_rate: float | None
    achieved_over_requested: float | None
    operations: Mapping[str, OperationSummary]
    all_operations: OperationSummary
    acks: AckCounts
    workers: tuple[WorkerReport, ...]
    workers_expected: int
    locust: Mapping[str, Any] | None = None    # Locust's own request and failure counts per name
    locust_exit_codes: tuple[int | None, ...] = ()
    loadgen_cpu: CpuWindow | None = None
    steps: tuple[StepSummary, ...] = ()
    parameters: Mapping[str, Any] = field(default_factory=dict)
    audit: AuditResult | None = None
    verdict: Verdict | None = None
    in_flight_at_end: OperationSummary | None = None  # due before the window's end, finished after: not achieved
    in_flight_by_operation: Mapping[str, int] = field(default_factory=dict)
    warmup_calls: int = 0
    loader_cpu_ms_per_call: float | None = None        # the load processes' CPU over the window / its calls
    #                                                    (None unless as many calls started as finished in it)
    calls_started: int | None = None                   # calls the load processes started in the window
    staircase_stopped_at_step: int | None = None       # 1-based: the first loader-bound step (a staircase stops)
    sizing: Mapping[str, Any] | None = None            # what the rate needs of the loader (lab.load.loader_sizing)
    operation_cpu: Mapping[str, OperationCpu] = field(default_factory=dict)  # loader CPU per operation
    services: Mapping[str, Any] = field(default_factory=dict)  # the outbox and hot window the stores used
    rtt_us: int = 0                                    # round trip the run added (lab.cluster.rtt_proxy); 0: direct
    proxy_cpu: CpuWindow | None = None                 # the latency proxies' CPU over the measured window

    @property
    def workers_reporting(self) -> int:
        return len(self.workers)

    @property
    def loader_bound(self) -> bool:
        return self.verdict is not None and self.verdict.bound

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "run_id": self.run_id, "profile": self.profile, "mode": self.mode, "users": self.users,
            "processes": self.processes, "warmup_seconds": self.warmup_seconds,
            "measured_seconds": self.measured_seconds, "units": UNITS, "requested_rate": self.requested_rate,
            "achieved_rate": self.achieved_rate, "achieved_over_requested": self.achieved_over_requested,
            "operations": {op: s.to_json() for op, s in self.operations.items()},
            "all_operations": self.all_operations.to_json(), "acks": self.acks.to_json(),
            "workers": [w.to_json() for w in self.workers], "workers_reporting": self.workers_reporting,
            "workers_expected": self.workers_expected, "locust": self.locust,
            "locust_exit_codes": list(self.locust_exit_codes), "parameters": dict(self.parameters)}
        if self.loadgen_cpu is not None:
            out["loadgen_cpu"] = self.loadgen_cpu.to_json()
        if self.steps:
            out["steps"] = [s.to_json() for s in self.steps]
            out["staircase_stopped_at_step"] = self.staircase_stopped_at_step
        if self.audit is not None:
            out["audit"] = self.audit.to_json()
        if self.verdict is not None:
            out["verdict"] = self.verdict.to_json()
        out["in_flight_at_end"] = {"count": self.in_flight_at_end.count if self.in_flight_at_end else 0,
                                   "by_operation": dict(self.in_flight_by_operation),
                                   "corrected_us": (self.in_flight_at_end.corrected_us.to_json()
                                                    if self.in_flight_at_end and self.in_flight_at_end.corrected_us
                                                    else None)}
        out["warmup_calls"] = self.warmup_calls
        out["loader_cpu_ms_per_call"] = self.loader_cpu_ms_per_call
        out["calls_started"] = self.calls_started
        if self.sizing is not None:
            out["sizing"] = dict(self.sizing)
        if self.operation_cpu:
            out["operation_cpu"] = {"note": APPORTIONED_NOTE, **{op: c.to_json() for op, c in self.operation_cpu.items()}}
        if self.services:
            out["services"] = dict(self.services)
        out["rtt_us"] = self.rtt_us
        if self.proxy_cpu is not None:
            out["proxy_cpu"] = self.proxy_cpu.to_json()
        return out


# ---- from a run's folder ----------------------------------------------------------------------
def ack_counts(load_dir: Path) -> AckCounts:
    counts = dict.fromkeys((*ACK_PHASES, "replayed"), 0)
    for path in sorted((load_dir / "acks").glob("*.csv")):
        for ack in read_acks(path):
            key = "replayed" if ack.replayed else ack.phase
            counts[key] = counts.get(key, 0) + 1
    return AckCounts(**{k: counts[k] for k in (*ACK_PHASES, "replayed")})


def _locust_json(load_dir: Path) -> dict[str, Any] | None:
    path = load_dir / "locust.json"
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError:
        return None
    return {e["name"]: {"num_requests": e["num_requests"], "num_failures": e["num_failures"]}
            for e in data if isinstance(e, dict) and "name" in e}


def _all(stats: Mapping[str, OpStats]) -> OpStats:
    out = OpStats()
    for s in stats.values():
        out.merge(s)
    return out


def requested_over(plan: LoadPlan, start_s: float, end_s: float) -> float | None:
    """The plan's mean rate over [start_s, end_s] (seconds after t0); None in a closed loop."""
    if not plan.fixed_rate or end_s <= start_s:
        return None
    calls = sum(max(0.0, min(s.end_s, end_s) - max(s.start_s, start_s)) * s.rate for s in plan.stages)
    return calls / (end_s - start_s)


def cpu_window(counts: LiveCounts, start_s: float, end_s: float) -> CpuWindow | None:
    """The load processes' CPU over a stretch, from their timelines (% of one core, all together)."""
    n, mean, top = counts.cpu_total(start_s, end_s)
    if not n or mean is None:
        return None
    cores = os.cpu_count() or 1
    return CpuWindow(samples=n, mean_percent_of_one_core=round(mean, 1), max_percent_of_one_core=round(top, 1),
                     mean_percent_of_machine=round(mean / cores, 1), cores=cores)


def judge_window(plan: LoadPlan, counts: LiveCounts, start_s: float, end_s: float, *, achieved: float | None,
                 limits: Limits | None, machine: Machine | None = None) -> Verdict:
    """The verdict of [start_s, end_s] (seconds after t0): its processes' CPU, its rate, its lag, and
    (``machine``: the busy CPU of a machine the node shares, over a window) the machine's."""
    requested = requested_over(plan, start_s, end_s)
    lag = None
    if plan.fixed_rate:
        _calls, _cpu, series = counts.window(start_s, end_s)
        lag = lag_trend(series, end_s - start_s)
    return judge(requested_rate=requested, achieved_rate=achieved, lag=lag, limits=limits, users=plan.users,
                 window_seconds=end_s - start_s if plan.fixed_rate else None,
                 loader_cpu_percent_of_core=counts.cpu_percent_by_process(start_s, end_s),
                 machine=machine(start_s, end_s) if machine is not None else None)


def summarize_run(plan: LoadPlan, load_dir: Path, *, cpu: CpuMonitor | None = None,
                  exit_codes: Sequence[int | None] = (), parameters: Mapping[str, Any] | None = None,
                  interrupted: bool = False, limits: Limits | None = None,
                  stopped_at_step: int | None = None, machine: Machine | None = None) -> LoadSummary:
    """``cpu`` (the runner's psutil samples) is not read: the processes report their own
    CPU in their snapshots, which a distributed master receives from every machine."""
    counts = read_counts(load_dir)
    stats = counts.operations
    seconds = counts.measured_seconds  # each process's measured part: the plan's, unless stopped early
    if plan.duration_seconds > 0 and not interrupted and stopped_at_step is None and seconds <= 0:
        seconds = plan.duration_seconds
    allops = _all(stats)
    achieved = counts.achieved_rate()
    web = plan.duration_seconds <= 0
    start_s = 0.0 if web else plan.warmup_seconds
    end_s = math.inf if web else plan.warmup_seconds + seconds
    if stopped_at_step is not None:  # a staircase stopped after its first loader-bound step: it ends there
        measured_stages = [st for st in plan.stages if st.end_s > plan.warmup_seconds]
        end_s = min(end_s, measured_stages[stopped_at_step - 1].end_s)
        seconds = end_s - start_s
    requested = requested_over(plan, start_s, end_s) if not web else None
    late = counts.late
    late_all = _all(late)
    cpu_seconds = counts.cpu_seconds(start_s, end_s)
    started = counts.started_calls(start_s, end_s)
    steady = steady_window(finished=allops.count, started=started)  # else the CPU per finished call is not the cost
    steps = (tuple(step_summary(plan, load_dir, counts, limits=limits, upto_s=end_s, machine=machine))
             if len(plan.stages) > 1 else ())
    verdict = judge_window(plan, counts, start_s, end_s, achieved=achieved, limits=limits, machine=machine)
    if stopped_at_step is not None:  # the run is judged by the step that stopped it
        bound = [st.verdict for st in steps if st.verdict is not None and st.verdict.bound]
        if bound:
            verdict = dataclasses.replace(bound[0], notes=(*bound[0].notes, (
                f"the staircase stopped at step {stopped_at_step}: the store's capacity was not reached")))
    return LoadSummary(
        run_id=plan.run_id, profile=plan.profile, mode="fixed-rate" if plan.fixed_rate else "closed-loop",
        users=plan.users, processes=plan.workers, warmup_seconds=plan.warmup_seconds,
        measured_seconds=round(seconds, 3),
        requested_rate=round(requested, 2) if requested else None,
        achieved_rate=round(achieved, 2) if achieved is not None else None,
        achieved_over_requested=a_over_b(achieved, requested, digits=4) if requested else None,
        operations=summarize(stats, elapsed_seconds=seconds, fixed_rate=plan.fixed_rate),
        all_operations=summarize({"all": allops}, elapsed_seconds=seconds, fixed_rate=plan.fixed_rate)["all"],
        acks=ack_counts(load_dir),
        workers=tuple(WorkerReport(worker=p.worker, pid=p.pid, acks=int(p.extra.get("acks", 0)),
                                   driver=p.extra.get("driver"), reactor=p.extra.get("reactor"),
                                   call_paths=p.extra.get("call_paths"),
                                   alerts=p.extra.get("alerts"), requests=p.extra.get("requests"),
                                   measured_seconds=p.measured_seconds, machine=p.extra.get("machine"))
                      for p in counts.processes),
        workers_expected=plan.workers, locust=_locust_json(load_dir), locust_exit_codes=tuple(exit_codes),
        loadgen_cpu=cpu_window(counts, start_s, end_s),
        steps=steps, parameters=dict(parameters or {}), verdict=verdict,
        in_flight_at_end=summarize({"late": late_all}, elapsed_seconds=0, fixed_rate=plan.fixed_rate)["late"],
        in_flight_by_operation={op: s.count for op, s in sorted(late.items())}, warmup_calls=counts.warmup_calls,
        loader_cpu_ms_per_call=round(1000 * cpu_seconds / allops.count, 4) if cpu_seconds and steady else None,
        calls_started=started, staircase_stopped_at_step=stopped_at_step,
        operation_cpu=operation_cpu(counts, stats, cpu_seconds) if steady else {})


def operation_cpu(counts: LiveCounts, stats: Mapping[str, OpStats], process_cpu_seconds: float | None,
                  ) -> dict[str, OperationCpu]:
    """Loader CPU per operation over the measured window (lab.load.operation_cpu), when every worker
    timed its calls' callers (native-thread workers; a gevent worker cannot); the processes' CPU
    over the window comes from their timelines, as the verdict's does. An operation is on the
    future path when any worker ran it there (all run one plan, so all or none)."""
    caller = [p.extra.get("caller_cpu_seconds") for p in counts.processes]
    if not caller or any(c is None for c in caller):
        return {}
    summed: dict[str, float] = {}
    for c in caller:
        for op, value in c.items():
            summed[op] = summed.get(op, 0.0) + value
    paths: dict[str, str] = {}
    for p in counts.processes:
        for op, path in (p.extra.get("call_paths") or {}).items():
            paths[op] = FUTURE if FUTURE in (path, paths.get(op)) else path
    return apportion({op: s.count for op, s in stats.items()}, summed, process_cpu_seconds, paths)


def step_summary(plan: LoadPlan, load_dir: Path, counts: LiveCounts, *, limits: Limits | None = None,
                 upto_s: float = math.inf, machine: Machine | None = None) -> list[StepSummary]:
    """Throughput, latencies and the verdict per stage, from the interval logs (intervals start on
    t0 + k * interval; calls counted where they finished) and the processes' timelines. Stages
    after ``upto_s`` (a staircase stopped at a loader-bound step) did not run and are left out."""
    per_step = [{"service": new_histogram(), "corrected": new_histogram()} for _ in plan.stages]
    for path in sorted((load_dir / "hdr").glob("*.hlog")):
        for iv in read_interval_log(path):
            mid = iv.start_s + iv.length_s / 2
            for i, st in enumerate(plan.stages):
                if st.start_s <= mid < st.end_s:
                    per_step[i][iv.kind].add(iv.histogram)
                    break
    out = []
    for st, h in zip(plan.stages, per_step):
        if st.start_s >= upto_s - 1e-6:
            break
        end = min(st.end_s, upto_s)
        warmup = st.end_s <= plan.warmup_seconds
        achieved = round(h["service"].get_total_count() / (end - st.start_s), 2)
        out.append(StepSummary(start_s=st.start_s, end_s=end, requested_rate=round(st.rate, 2), warmup=warmup,
                               achieved_rate=achieved, service_us=summarize_histogram(h["service"]),
                               corrected_us=summarize_histogram(h["corrected"]),
                               loadgen_cpu=cpu_window(counts, st.start_s, end),
                               verdict=None if warmup else judge_window(plan, counts, st.start_s, end,
                                                                        achieved=achieved, limits=limits,
                                                                        machine=machine)))
    return out
