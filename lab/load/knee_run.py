"""``lab load --slo``: fixed-rate steps of one named run, chosen by :mod:`lab.load.knee_search`, each
judged on its measured window (verdict, node and machine CPU), then one audit and ``knee.json``.

More: docs/load-internals.md.
"""
from __future__ import annotations

import dataclasses
import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.cluster.admin import admin_for
from lab.cluster.config import ClusterConfig
from lab.cluster.connection import connect
from lab.cluster.services import ServicesConfig
from lab.errors import LabError
from lab.load.knee_check import HeldOutRate, check, predict
from lab.load.knee_search import IDLE_LIMIT_CORES, Knee, KneeStep, SearchPlan, Slo, next_rate
from lab.load.plan import LoadPlan, load_profile, t0_path
from lab.load.progress import NO_PROGRESS, LoadProgress
from lab.load.run_monitor import busy_cpu_seconds
from lab.load.runner import PER_USER_RATE, LoadOptions, LoadResult, audit_run, run_load
from lab.load.staircase_figure import write_knee_figure
from lab.load.summary import LoadSummary
from lab.load.verdict import LOADER_BOUND, MACHINE_BOUND, machine_bound, on_this_machine
from lab.measure.timing import wall_seconds
from lab.results.jsonio import read_json, write_json
from lab.results.run_folders import new_run_id

KNEE_SUBDIR = "knee"
KNEE_FILE = "knee.json"
SAMPLE_SECONDS = 0.5
IDLE_WINDOW_SECONDS = 2.0   # the node's idle CPU is read over this window before the first step
CALLS_MARGIN = 1.25         # a step runs long enough for this many times the calls its figure needs
MAX_STEP_SECONDS = 300.0


@dataclass(frozen=True, kw_only=True)
class KneeOptions:
    slo: Slo
    search: SearchPlan
    step_seconds: float = 20.0           # the shortest measured window of a step
    warmup_seconds: float = 5.0
    allow_loader_bound: bool = False
    held_out_share: float | None = None  # then one more step at this share of the knee checks the curve
    idle_wait_seconds: float = 0.0       # before the first step: wait up to this for the node to idle (0: one read)


@dataclass(frozen=True, kw_only=True)
class KneeResult:
    knee: Knee
    run_dir: Path
    path: Path
    figure: Path | None
    audit: Any = None
    shared_machine: bool = False
    rtt_us: int = 0                  # the round trip added to every request (lab.cluster.rtt_proxy)
    held_out: HeldOutRate | None = None  # the curve predicted at a rate it did not measure, then measured


def step_seconds(rate: float, options: KneeOptions) -> float:
    """A step's measured window: long enough for its percentile (``min_calls`` with a margin)."""
    need = CALLS_MARGIN * options.search.min_calls / rate
    return float(min(MAX_STEP_SECONDS, max(options.step_seconds, math.ceil(need))))


def step_users(base: LoadOptions, rate: float) -> int:
    """The users of a step: as given, else one per call/s (at least 8) rounded up to a multiple of the
    profile's weights, so every kind gets its share of the calls exactly."""
    if base.users is not None:
        return base.users
    total = sum(w for w in load_profile(base.profile).weights.values() if w > 0)
    need = max(8, math.ceil(rate / PER_USER_RATE))
    return total * math.ceil(need / total)


class CpuSampler:
    """The node's CPU seconds (the admin's readings) and the machine's busy seconds, every half second,
    on a thread: any window of the run is read from the samples around it."""

    def __init__(self, read_node: Callable[[], float | None]) -> None:
        self._read_node = read_node
        self.samples: list[tuple[float, float | None, float]] = []
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="knee-cpu", daemon=True)

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while True:
            try:
                node = self._read_node()
            except LabError as exc:
                node, self.error = None, str(exc)
            self.samples.append((wall_seconds(), node, busy_cpu_seconds()))
            if self._stop.wait(SAMPLE_SECONDS):
                return

    def window(self, start: float, end: float) -> tuple[float | None, float | None]:
        """(node cores, machine busy cores) over [start, end] from the samples inside it."""
        inside = [s for s in list(self.samples) if start <= s[0] <= end]
        if len(inside) < 2 or inside[-1][0] - inside[0][0] <= 0:
            return None, None
        (t0, n0, m0), (t1, n1, m1) = inside[0], inside[-1]
        node = (n1 - n0) / (t1 - t0) if n0 is not None and n1 is not None else None
        return node, (m1 - m0) / (t1 - t0)


def idle_node_cores(sampler: CpuSampler, *, nodes: int, wait_seconds: float) -> float | None:
    """The node's CPU per node over the last IDLE_WINDOW_SECONDS before the load, once it fell to
    IDLE_LIMIT_CORES or ``wait_seconds`` passed (None: the admin reads no node CPU)."""
    deadline = wall_seconds() + wait_seconds
    while True:
        start = wall_seconds()
        time.sleep(IDLE_WINDOW_SECONDS)
        node, _ = sampler.window(start, wall_seconds())
        if node is None:
            return None
        if node / nodes <= IDLE_LIMIT_CORES or wall_seconds() >= deadline:
            return node / nodes


def measured_step(number: int, result: LoadResult, sampler: CpuSampler, slo: Slo, *, shared: bool) -> KneeStep:
    s: LoadSummary = result.summary
    t0 = float(t0_path(result.load_dir).read_text())
    start = t0 + s.warmup_seconds
    node, busy = sampler.window(start, start + s.measured_seconds)
    cpu = s.loadgen_cpu
    loadgen = (cpu.mean_percent_of_machine * cpu.cores / 100 if cpu is not None and cpu.cores
               and cpu.mean_percent_of_machine is not None else None)
    verdict = s.verdict.verdict if s.verdict is not None else "valid"
    share = s.verdict.limits.max_machine_cpu_percent / 100 if s.verdict is not None else 1.0
    if verdict != LOADER_BOUND and busy is not None and machine_bound(busy_cores=busy, machine_cores=os.cpu_count() or 1,
                                                                      shared=shared, share=share):
        verdict = MACHINE_BOUND
    corrected = s.all_operations.corrected_us
    latency = getattr(corrected, slo.percentile, None) if corrected is not None else None
    sends = s.operations.get("send")
    seconds = s.measured_seconds or 1.0
    return KneeStep(number=number, requested_rate=s.requested_rate or 0.0, achieved_rate=s.achieved_rate or 0.0,
                    sends_per_second=(sends.count / seconds) if sends is not None else 0.0,
                    calls=s.all_operations.count, latency_ms=None if latency is None else latency / 1000,
                    verdict=verdict, node_cores=node, loadgen_cores=loadgen, machine_busy_cores=busy,
                    load_dir=str(result.load_dir), users=s.users or 0, measured_seconds=s.measured_seconds or 0.0)


def run_knee(config: ClusterConfig, base: LoadOptions, options: KneeOptions, *, progress: LoadProgress | None = None,
             services: ServicesConfig | None = None) -> KneeResult:
    """Steps of one named run (seeded once; each step in ``<run>/knee``, ``knee-2``, ...) until the
    search ends; one audit of every acknowledged send at the end; ``knee.json`` and ``knee.png``."""
    progress = progress or NO_PROGRESS
    run_id = base.run_id or new_run_id()
    shared = on_this_machine(config.contact_points)
    steps: list[KneeStep] = []
    last: LoadResult | None = None
    held_out: HeldOutRate | None = None
    idle: float | None = None
    with connect(config) as conn:
        admin = admin_for(config, conn)
        nodes = max(1, len(conn.hosts()))

        def node_seconds() -> float | None:
            readings = admin.cpu_readings()
            return sum(r.cpu_seconds for r in readings) if readings else None

        def one_step(rate: float, what: str) -> KneeStep:
            nonlocal last
            seconds = step_seconds(rate, options)
            progress.phase(f"{what}: {rate:,.1f} calls/s of the {base.profile} mix for "
                           f"{seconds:g} s (+{options.warmup_seconds:g} s warmup); target {options.slo.text}")
            last = run_load(config, dataclasses.replace(
                base, rate=rate, users=step_users(base, rate), staircase_max=None, duration_seconds=seconds,
                warmup_seconds=options.warmup_seconds, run_id=run_id, load_subdir=KNEE_SUBDIR, audit=False),
                progress=progress, services=services)
            step = measured_step(len(steps) + 1, last, sampler, options.slo, shared=shared)
            progress.phase(step_line(step, options))
            return step

        try:
            with CpuSampler(node_seconds) as sampler:
                idle = idle_node_cores(sampler, nodes=nodes, wait_seconds=options.idle_wait_seconds)
                if idle is not None and idle > IDLE_LIMIT_CORES:
                    progress.phase(f"the node burns {idle:.2f} cores per node before the load (idle is ~0.02): "
                                   "another client or compaction will share every step")
                while (rate := next_rate(options.search, steps, options.slo)) is not None:
                    steps.append(one_step(rate, f"knee step {len(steps) + 1}"))
                found = Knee(slo=options.slo, plan=options.search, steps=tuple(steps), nodes=nodes,
                             idle_node_cores=idle)
                predicted = predict(found, options.held_out_share) if options.held_out_share else None
                if predicted is not None:
                    held = one_step(predicted.rate, f"held-out step at {100 * options.held_out_share:g}% of the knee")
                    held_out = check(found, predicted, held)
                    progress.phase(held_out.describe(options.slo.percentile))
        finally:
            admin.close()
    run_dir = last.run_dir if last is not None else Path(base.results).resolve() / run_id
    audit = None
    if last is not None and base.audit:
        plan = LoadPlan.from_json(read_json(last.load_dir / "parameters.json")["plan"])
        progress.phase("audit: every acknowledged send of every step read back, and against the "
                       f"{(services or ServicesConfig()).outbox} outbox")
        audit = audit_run(config, plan, services=services)
    knee = Knee(slo=options.slo, plan=options.search, steps=tuple(steps), nodes=nodes, idle_node_cores=idle)
    out = knee.to_json() | {"run_id": run_id, "profile": base.profile, "shared_machine": shared,
                            "rtt_us": config.rtt_us,
                            "machine_cores": os.cpu_count() or 1, "node_cpu_error": sampler.error,
                            "audit": None if audit is None else audit.to_json(),
                            "held_out_rate": None if held_out is None else held_out.to_json()}
    path = run_dir / KNEE_FILE
    write_json(path, out)
    figure = write_knee_figure(knee, run_dir, title=f"knee {run_id} ({base.profile}): {options.slo.text}")
    return KneeResult(knee=knee, run_dir=run_dir, path=path, figure=figure, audit=audit, shared_machine=shared,
                      rtt_us=config.rtt_us, held_out=held_out)


def step_line(step: KneeStep, options: KneeOptions) -> str:
    lat = f"{options.slo.percentile} {step.latency_ms:,.1f} ms" if step.latency_ms is not None else "no latency"
    cpu = (f"; node {step.node_cores:.2f} cores" if step.node_cores is not None else "") + (
        f", machine {step.machine_busy_cores:.2f} of {os.cpu_count() or 1} cores busy"
        if step.machine_busy_cores is not None else "")
    return (f"knee step {step.number}: {step.achieved_rate:,.1f} of {step.requested_rate:,.1f} calls/s "
            f"({step.sends_per_second:,.1f} sends/s), {step.calls:,} calls, {lat}: "
            f"{step.outcome(options.slo, options.search.min_calls)}{cpu}")
