"""What a load run measured (``load/summary.json``): :class:`LoadSummary` and how it is made.

After the Locust processes exit, :func:`summarize_run` merges the per-worker totals (HDR
histograms, ``load/totals/*.json``) into per-operation summaries, compares the achieved rate
with the requested one over the measured window, counts the acks, and, for a staircase,
summarises each step from the interval logs (:func:`step_summary`). Latencies in µs, rates in
calls per second, by :mod:`lab.measure`.
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.load.audit import AuditResult, read_acks
from lab.load.loadgen_cpu import CpuMonitor, CpuWindow
from lab.load.plan import LoadPlan
from lab.measure import LatencySummary, a_over_b, summarize_histogram
from lab.measure.hdr import OperationSummary, OpStats, merge_stats, new_histogram, read_interval_log, summarize

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
    alerts: Mapping[str, Any] | None = None
    requests: Mapping[str, Any] | None = None
    measured_seconds: float | None = None   # its tests' measured time (the web UI's run length)
    machine: Mapping[str, Any] | None = None  # a distributed run's worker: host, address, clock offset, CPU

    def to_json(self) -> dict[str, Any]:
        out = {"worker": self.worker, "pid": self.pid, "acks": self.acks, "driver": self.driver,
               "reactor": self.reactor, "alerts": self.alerts, "requests": self.requests,
               "measured_seconds": self.measured_seconds}
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

    def to_json(self) -> dict[str, Any]:
        out = {"start_s": self.start_s, "end_s": self.end_s, "requested_rate": self.requested_rate,
               "warmup": self.warmup, "achieved_rate": self.achieved_rate, "service_us": self.service_us.to_json(),
               "corrected_us": self.corrected_us.to_json()}
        if self.loadgen_cpu is not None:
            out["loadgen_cpu"] = self.loadgen_cpu.to_json()
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

    @property
    def workers_reporting(self) -> int:
        return len(self.workers)

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
        if self.audit is not None:
            out["audit"] = self.audit.to_json()
        return out


# ---- from a run's folder ----------------------------------------------------------------------
def _worker_totals(load_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((load_dir / "totals").glob("*.json"))]


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


def summarize_run(plan: LoadPlan, load_dir: Path, *, cpu: CpuMonitor | None = None,
                  exit_codes: Sequence[int | None] = (), parameters: Mapping[str, Any] | None = None,
                  interrupted: bool = False) -> LoadSummary:
    workers = _worker_totals(load_dir)
    stats = merge_stats({op: OpStats.from_json(v) for op, v in w["totals"].items()} for w in workers)
    seconds = plan.duration_seconds
    if seconds <= 0 or interrupted:  # the web UI, or a run stopped early: as long as the tests ran
        seconds = max((w.get("measured_seconds") or 0.0 for w in workers), default=0.0)
    allops = OpStats()
    for s in stats.values():
        allops.merge(s)
    achieved = allops.count / seconds if seconds > 0 else None
    requested = plan.requested_rate()
    if plan.fixed_rate and plan.warmup_seconds > 0:  # the measured window only
        requested = (sum(max(0.0, min(s.end_s, plan.end_seconds) - max(s.start_s, plan.warmup_seconds)) * s.rate
                         for s in plan.stages) / seconds)
    return LoadSummary(
        run_id=plan.run_id, profile=plan.profile, mode="fixed-rate" if plan.fixed_rate else "closed-loop",
        users=plan.users, processes=plan.workers, warmup_seconds=plan.warmup_seconds, measured_seconds=seconds,
        requested_rate=round(requested, 2) if requested else None,
        achieved_rate=round(achieved, 2) if achieved is not None else None,
        achieved_over_requested=a_over_b(achieved, requested, digits=4) if requested else None,
        operations=summarize(stats, elapsed_seconds=seconds, fixed_rate=plan.fixed_rate),
        all_operations=summarize({"all": allops}, elapsed_seconds=seconds, fixed_rate=plan.fixed_rate)["all"],
        acks=ack_counts(load_dir),
        workers=tuple(WorkerReport(worker=w["worker"], pid=w["pid"], acks=w["acks"], driver=w.get("driver"),
                                   reactor=w.get("reactor"), alerts=w.get("alerts"), requests=w.get("requests"),
                                   measured_seconds=w.get("measured_seconds"), machine=w.get("machine"))
                      for w in workers),
        workers_expected=plan.workers, locust=_locust_json(load_dir), locust_exit_codes=tuple(exit_codes),
        loadgen_cpu=(cpu.window(plan.warmup_seconds, plan.end_seconds) if plan.duration_seconds > 0
                     else cpu.window(0.0, math.inf)) if cpu is not None else None,
        steps=tuple(step_summary(plan, load_dir, cpu)) if len(plan.stages) > 1 else (),
        parameters=dict(parameters or {}))


def step_summary(plan: LoadPlan, load_dir: Path, cpu: CpuMonitor | None) -> list[StepSummary]:
    """Throughput and latencies per stage, from the interval logs (intervals start on t0 + k * interval)."""
    per_step = [{"service": new_histogram(), "corrected": new_histogram()} for _ in plan.stages]
    for path in sorted((load_dir / "hdr").glob("*.hlog")):
        for iv in read_interval_log(path):
            mid = iv.start_s + iv.length_s / 2
            for i, st in enumerate(plan.stages):
                if st.start_s <= mid < st.end_s:
                    per_step[i][iv.kind].add(iv.histogram)
                    break
    return [StepSummary(start_s=st.start_s, end_s=st.end_s, requested_rate=round(st.rate, 2),
                        warmup=st.end_s <= plan.warmup_seconds,
                        achieved_rate=round(h["service"].get_total_count() / (st.end_s - st.start_s), 2),
                        service_us=summarize_histogram(h["service"]), corrected_us=summarize_histogram(h["corrected"]),
                        loadgen_cpu=cpu.window(st.start_s, st.end_s) if cpu is not None else None)
            for st, h in zip(plan.stages, per_step)]
