"""The knee at a latency target: the rule that picks each step's rate and the highest rate of a
profile's mix whose corrected percentile meets the target with a valid verdict.

More: docs/load-internals.md.
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lab.errors import ConfigError
from lab.load.pacing import short_of
from lab.load.verdict import LOADER_BOUND, MACHINE_BOUND

MIN_CALLS = 1000          # calls a step needs before its p99 is a figure
IDLE_LIMIT_CORES = 0.15   # a node burning more than this per node before the load is not idle (idle: ~0.02)
KEEP_UP_SHARE = 0.90      # a step that completed less of its rate than this: the store did not keep up
MEETS, MISSES, TOO_FEW = "meets", "misses", "too few"
FOUND, NOT_REACHED, BOUND, NOT_MET = "found", "not reached", "bound", "not met"
PERCENTILES = ("p50", "p90", "p99", "p999")
_SLO = re.compile(r"\s*(p50|p90|p99|p999)\s*(?:<=|≤)\s*([0-9]+(?:\.[0-9]+)?)\s*(us|µs|ms|s)\s*", re.IGNORECASE)
_TO_MS = {"us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1000.0}


@dataclass(frozen=True, kw_only=True)
class Slo:
    """A latency target: ``percentile`` of the corrected latency at most ``limit_ms``."""

    percentile: str
    limit_ms: float

    def __post_init__(self) -> None:
        if self.percentile not in PERCENTILES or not (isinstance(self.limit_ms, (int, float)) and self.limit_ms > 0):
            raise ConfigError(f"latency target {self.percentile} <= {self.limit_ms} ms: the percentile is one of "
                              f"{', '.join(PERCENTILES)} and the limit > 0", percentile=self.percentile)

    @classmethod
    def parse(cls, text: str) -> Slo:
        m = _SLO.fullmatch(text or "")
        if m is None:
            raise ConfigError(f"latency target {text!r}: write it as p99<=50ms (p50, p90, p99 or p999; us, ms or s)",
                              slo=text)
        limit = float(m.group(2)) * _TO_MS[m.group(3).lower()]
        if limit <= 0:
            raise ConfigError(f"latency target {text!r}: the limit must be > 0", slo=text)
        return cls(percentile=m.group(1).lower(), limit_ms=limit)

    @property
    def text(self) -> str:
        return f"{self.percentile} <= {self.limit_ms:g} ms"


@dataclass(frozen=True, kw_only=True)
class SearchPlan:
    """A geometric ramp from ``start_rate`` by ``factor`` until a step fails, then bisection (geometric
    midpoints) until the bracket is within ``resolution`` or ``max_steps`` ran; never above ``max_rate``."""

    start_rate: float
    factor: float = 2.0
    resolution: float = 1.10
    max_steps: int = 8
    max_rate: float | None = None
    min_calls: int = MIN_CALLS

    def __post_init__(self) -> None:
        if not (self.start_rate > 0 and self.factor > 1 and self.resolution > 1 and self.max_steps >= 1
                and self.min_calls >= 1 and (self.max_rate is None or self.max_rate >= self.start_rate)):
            raise ConfigError("knee search: start rate > 0, factor > 1, resolution > 1, steps >= 1, "
                              "max rate >= start rate", start_rate=self.start_rate, factor=self.factor)


@dataclass(frozen=True, kw_only=True)
class KneeStep:
    """One fixed-rate step as measured: rates, calls, the target's percentile (corrected), verdict, CPU."""

    number: int
    requested_rate: float                  # calls/s of the mix asked for
    achieved_rate: float                   # calls/s completed in the measured window
    sends_per_second: float                # of which sends
    calls: int
    latency_ms: float | None               # the target's percentile of the corrected latency
    verdict: str                           # valid | loader-bound | machine-bound
    node_cores: float | None = None        # the node's CPU over the window, in cores (None: not measured)
    loadgen_cores: float | None = None
    machine_busy_cores: float | None = None
    load_dir: str = ""
    users: int = 0                         # the step's users (0: not known, no allowance for the schedule)
    measured_seconds: float = 0.0

    def kept_up(self) -> bool:
        """Completed at least ``KEEP_UP_SHARE`` of the calls asked for, less what the jittered schedule
        alone may leave outside a short window (:func:`lab.load.pacing.short_of`)."""
        return not short_of(KEEP_UP_SHARE, achieved_rate=self.achieved_rate, requested_rate=self.requested_rate,
                            users=self.users, seconds=self.measured_seconds)

    def outcome(self, slo: Slo, min_calls: int = MIN_CALLS) -> str:
        if self.verdict in (LOADER_BOUND, MACHINE_BOUND):
            return self.verdict
        if self.calls < min_calls or self.latency_ms is None:
            return TOO_FEW
        if not self.kept_up() or self.latency_ms > slo.limit_ms:
            return MISSES
        return MEETS

    def to_json(self, slo: Slo, min_calls: int = MIN_CALLS) -> dict[str, Any]:
        return {"step": self.number, "requested_rate": self.requested_rate, "achieved_rate": self.achieved_rate,
                "sends_per_second": self.sends_per_second, "calls": self.calls, "latency_ms": self.latency_ms,
                "verdict": self.verdict, "outcome": self.outcome(slo, min_calls), "node_cores": self.node_cores,
                "loadgen_cores": self.loadgen_cores, "machine_busy_cores": self.machine_busy_cores,
                "load_dir": self.load_dir, "users": self.users, "measured_seconds": self.measured_seconds}



def next_rate(plan: SearchPlan, steps: Sequence[KneeStep], slo: Slo) -> float | None:
    """The next step's rate, or None when the search is over. A bound step ends it (the steps above
    would measure the machine or the loader); a step with too few calls is never a pass."""
    if not steps:
        return plan.start_rate
    if len(steps) >= plan.max_steps:
        return None
    outcomes = [(s.requested_rate, s.outcome(slo, plan.min_calls)) for s in steps]
    if any(o in (LOADER_BOUND, MACHINE_BOUND) for _, o in outcomes):
        return None
    passed = [r for r, o in outcomes if o == MEETS]
    failed = [r for r, o in outcomes if o != MEETS]
    if not failed:
        top = max(passed)
        if plan.max_rate is not None and top >= plan.max_rate:
            return None
        return top * plan.factor if plan.max_rate is None else min(top * plan.factor, plan.max_rate)
    hi = min(failed)
    below = [r for r in passed if r < hi]
    if not below:
        return None
    lo = max(below)
    return None if hi / lo <= plan.resolution else math.sqrt(lo * hi)


@dataclass(frozen=True, kw_only=True)
class Knee:
    """The search's answer: the highest step that met the target (None when none did) and why it ended."""

    slo: Slo
    plan: SearchPlan
    steps: tuple[KneeStep, ...]
    nodes: int = 1
    idle_node_cores: float | None = None   # per node, just before the first step (None: not measured)

    @property
    def busy_before(self) -> bool:
        """The node burnt more than IDLE_LIMIT_CORES before the load began: other clients or its own
        work (compaction) share what the steps measured."""
        return self.idle_node_cores is not None and self.idle_node_cores > IDLE_LIMIT_CORES

    def outcomes(self) -> list[str]:
        return [s.outcome(self.slo, self.plan.min_calls) for s in self.steps]

    @property
    def step(self) -> KneeStep | None:
        met = [s for s, o in zip(self.steps, self.outcomes()) if o == MEETS]
        return max(met, key=lambda s: s.requested_rate) if met else None

    @property
    def status(self) -> str:
        outcomes = self.outcomes()
        if any(o in (LOADER_BOUND, MACHINE_BOUND) for o in outcomes):
            return BOUND
        if self.step is None:
            return NOT_MET
        return FOUND if any(s.requested_rate > self.step.requested_rate and o != MEETS
                            for s, o in zip(self.steps, outcomes)) else NOT_REACHED

    def to_json(self) -> dict[str, Any]:
        k = self.step
        return {"slo": {"percentile": self.slo.percentile, "limit_ms": self.slo.limit_ms, "text": self.slo.text},
                "search": {"start_rate": self.plan.start_rate, "factor": self.plan.factor,
                           "resolution": self.plan.resolution, "max_steps": self.plan.max_steps,
                           "max_rate": self.plan.max_rate, "min_calls": self.plan.min_calls},
                "status": self.status, "nodes": self.nodes, "idle_node_cores": self.idle_node_cores,
                "busy_before": self.busy_before,
                "knee": None if k is None else {
                    "step": k.number, "calls_per_second": k.achieved_rate, "requested_rate": k.requested_rate,
                    "sends_per_second": k.sends_per_second,
                    "sends_per_second_per_node": k.sends_per_second / self.nodes,
                    "calls_per_second_per_node": k.achieved_rate / self.nodes,
                    "latency_ms": k.latency_ms, "node_cores": k.node_cores},
                "steps": [s.to_json(self.slo, self.plan.min_calls) for s in self.steps],
                "statement": self.statement()}

    def statement(self) -> str:
        """One line: the capacity, what it is, and how far to trust it."""
        return self.capacity_line() + (
            f"; **the node was busy before the load** ({self.idle_node_cores:.2f} cores per node idle, more than "
            f"{IDLE_LIMIT_CORES:g}: another client or its own compaction shared every step)" if self.busy_before else "")

    def capacity_line(self) -> str:
        k, where = self.step, f"{self.slo.text}"
        per = "per node" if self.nodes == 1 else f"per node ({self.nodes} nodes)"
        if k is None:
            first = self.steps[0] if self.steps else None
            why = ("the search stopped at a loader- or machine-bound step" if self.status == BOUND
                   else "not met at the lowest rate tried")
            return (f"capacity: no rate met {where}: {why}"
                    + (f" ({first.requested_rate:,.1f} calls/s)" if first is not None else ""))
        cpu = f", node CPU {100 * k.node_cores:.0f}% of a core" if k.node_cores is not None else ", node CPU not measured"
        line = (f"capacity: {k.sends_per_second / self.nodes:,.1f} sends/s ({k.achieved_rate / self.nodes:,.1f} calls/s "
                f"of the mix) {per} at {where}{cpu}")
        if self.status == NOT_REACHED:
            line += "; a lower bound: every step met the target (raise --slo-max or --slo-steps)"
        elif self.status == BOUND:
            line += "; a lower bound: the search stopped at a loader- or machine-bound step above it"
        return line
