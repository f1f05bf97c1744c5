"""Is a load run's latency the store's, or the load generator's? The verdict of a run or a step.

More: docs/load-internals.md.
"""
from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lab.load.pacing import short_of
from lab.measure import fit_linear

VALID = "valid"
LOADER_BOUND = "loader-bound"
MACHINE_BOUND = "machine-bound"
MACHINE_SHARE = 0.85          # CPU busy at or above this share of a machine the node shares: machine-bound
MAX_LOADER_CPU_PERCENT_OF_CORE = 70.0
MIN_ACHIEVED_SHARE = 0.97
MAX_LAG_GROWTH_MS = 50.0      # growth of the schedule lag over the window
MAX_ON_SCHEDULE_LAG_MS = 50.0  # mean lag of a generator that kept its schedule
MIN_LAG_POINTS = 4             # intervals needed to fit the lag's growth


@dataclass(frozen=True, kw_only=True)
class Limits:
    """The thresholds a verdict was decided with (recorded beside it)."""

    max_loader_cpu_percent_of_core: float = MAX_LOADER_CPU_PERCENT_OF_CORE
    max_machine_cpu_percent: float = 100 * MACHINE_SHARE  # a shared machine busy at this % or more: machine-bound
    min_achieved_share: float = MIN_ACHIEVED_SHARE
    max_lag_growth_ms: float = MAX_LAG_GROWTH_MS
    max_on_schedule_lag_ms: float = MAX_ON_SCHEDULE_LAG_MS

    def __post_init__(self) -> None:
        if not 0 < self.max_loader_cpu_percent_of_core:
            raise ValueError(f"max loader CPU must be > 0 % of a core, got {self.max_loader_cpu_percent_of_core}")
        if not 0 < self.max_machine_cpu_percent <= 100:
            raise ValueError(f"max machine CPU must be in (0, 100] %, got {self.max_machine_cpu_percent}")
        if not 0 < self.min_achieved_share <= 1:
            raise ValueError(f"min achieved share must be in (0, 1], got {self.min_achieved_share}")

    def to_json(self) -> dict[str, float]:
        return {"max_loader_cpu_percent_of_core": self.max_loader_cpu_percent_of_core,
                "max_machine_cpu_percent": self.max_machine_cpu_percent,
                "min_achieved_share": self.min_achieved_share, "max_lag_growth_ms": self.max_lag_growth_ms,
                "max_on_schedule_lag_ms": self.max_on_schedule_lag_ms}


@dataclass(frozen=True, kw_only=True)
class Reason:
    """One failed check: what was measured against which limit, and what to do."""

    check: str                 # loader_cpu | achieved_rate | schedule_lag | machine_cpu
    measured: float
    limit: float
    unit: str
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "measured": self.measured, "limit": self.limit, "unit": self.unit,
                "text": self.text}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Reason:
        return cls(check=data["check"], measured=float(data["measured"]), limit=float(data["limit"]),
                   unit=data.get("unit", ""), text=data.get("text", ""))


@dataclass(frozen=True, kw_only=True)
class LagTrend:
    """The schedule lag over the window: its mean and its fitted growth (ms)."""

    points: int
    mean_ms: float | None
    growth_ms: float | None = None           # slope x window length
    growth_ci_low_ms: float | None = None    # the slope's 95 % interval, times the window
    growth_ci_high_ms: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"points": self.points, "mean_ms": _round(self.mean_ms), "growth_ms": _round(self.growth_ms),
                "growth_ci_low_ms": _round(self.growth_ci_low_ms), "growth_ci_high_ms": _round(self.growth_ci_high_ms)}


def _round(v: float | None, digits: int = 2) -> float | None:
    return None if v is None or math.isnan(v) else round(v, digits)


@dataclass(frozen=True, kw_only=True)
class Verdict:
    verdict: str                                  # valid | loader-bound | machine-bound
    reasons: tuple[Reason, ...] = ()
    notes: tuple[str, ...] = ()                   # facts that do not make it loader-bound
    limits: Limits = field(default_factory=Limits)
    loader_cpu_percent_of_core: Mapping[str, float] = field(default_factory=dict)  # per load process
    lag: LagTrend | None = None

    @property
    def loader_bound(self) -> bool:
        return self.verdict == LOADER_BOUND

    @property
    def bound(self) -> bool:
        """The latencies are not the store's: the load generator's, or the machine's they share."""
        return self.verdict in (LOADER_BOUND, MACHINE_BOUND)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"verdict": self.verdict, "reasons": [r.to_json() for r in self.reasons],
                               "notes": list(self.notes), "limits": self.limits.to_json(),
                               "loader_cpu_percent_of_core": {k: round(v, 1) for k, v in
                                                              self.loader_cpu_percent_of_core.items()}}
        if self.lag is not None:
            out["lag"] = self.lag.to_json()
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Verdict | None:
        if not data:
            return None
        lim = data.get("limits") or {}
        lag = data.get("lag")
        return cls(verdict=data["verdict"], reasons=tuple(Reason.from_json(r) for r in data.get("reasons", ())),
                   notes=tuple(data.get("notes", ())), limits=Limits(**lim) if lim else Limits(),
                   loader_cpu_percent_of_core=dict(data.get("loader_cpu_percent_of_core") or {}),
                   lag=LagTrend(**lag) if lag else None)


def lag_trend(series: Sequence[tuple[float, float]], window_seconds: float) -> LagTrend:
    """``series``: (seconds into the window, mean lag in ms of the calls of that interval)."""
    pts = [(t, v) for t, v in series if v is not None and not math.isnan(v)]
    if not pts:
        return LagTrend(points=0, mean_ms=None)
    mean = sum(v for _, v in pts) / len(pts)
    if len(pts) < MIN_LAG_POINTS or len({t for t, _ in pts}) < 3:
        return LagTrend(points=len(pts), mean_ms=mean)

    fit = fit_linear([[1.0, t] for t, _ in pts], [v for _, v in pts], ("intercept", "slope"))
    span = window_seconds if window_seconds > 0 else (max(t for t, _ in pts) - min(t for t, _ in pts))
    return LagTrend(points=len(pts), mean_ms=mean, growth_ms=fit.coefficients[1] * span,
                    growth_ci_low_ms=fit.ci_low[1] * span, growth_ci_high_ms=fit.ci_high[1] * span)


@dataclass(frozen=True, kw_only=True)
class MachineShare:
    """The busy CPU of the machine the node and the load generator share, over a window."""

    busy_cores: float
    cores: int


def judge(*, requested_rate: float | None, achieved_rate: float | None,
          loader_cpu_percent_of_core: Mapping[str, float | None], lag: LagTrend | None,
          limits: Limits | None = None, users: int | None = None, machine: MachineShare | None = None,
          window_seconds: float | None = None) -> Verdict:
    """The verdict of one window (a run's measured window, or one staircase step). With the window's
    length and its users, the achieved share allows for what the jittered schedule alone leaves
    outside a short window (:func:`lab.load.pacing.short_of`)."""
    limits = limits or Limits()
    cpu = {k: float(v) for k, v in loader_cpu_percent_of_core.items() if v is not None}
    reasons: list[Reason] = []
    notes: list[str] = []
    hot = {k: v for k, v in cpu.items() if v > limits.max_loader_cpu_percent_of_core}
    if hot:
        worst = max(hot, key=hot.get)
        reasons.append(Reason(
            check="loader_cpu", measured=round(hot[worst], 1), limit=limits.max_loader_cpu_percent_of_core,
            unit="% of one core",
            text=(f"load process {worst} used {hot[worst]:.0f}% of its core (limit "
                  f"{limits.max_loader_cpu_percent_of_core:g}%"
                  + (f"; {len(hot)} of {len(cpu)} processes over it" if len(cpu) > 1 else "")
                  + "): it queues calls behind its own work; add --processes or load machines")))
    growing = (lag is not None and lag.growth_ms is not None and lag.growth_ci_low_ms is not None
               and lag.growth_ms > limits.max_lag_growth_ms and lag.growth_ci_low_ms > 0)
    if growing:
        reasons.append(Reason(
            check="schedule_lag", measured=round(lag.growth_ms, 1), limit=limits.max_lag_growth_ms, unit="ms",
            text=(f"the schedule lag (corrected minus service latency) grew by {lag.growth_ms:,.0f} ms over the "
                  f"window (limit {limits.max_lag_growth_ms:g} ms): calls started later and later than due; "
                  "the generator fell behind (its CPU, or too few users for calls this slow: add --users)")))
    share = (achieved_rate / requested_rate) if requested_rate and achieved_rate is not None else None
    if share is not None and short_of(limits.min_achieved_share, achieved_rate=achieved_rate,
                                      requested_rate=requested_rate, users=users, seconds=window_seconds):
        on_schedule = (not hot and not growing and lag is not None and lag.mean_ms is not None
                       and lag.mean_ms <= limits.max_on_schedule_lag_ms)
        if on_schedule:
            notes.append(f"the store completed {100 * share:.1f}% of the requested rate while the generator kept its "
                         f"schedule (mean lag {lag.mean_ms:.1f} ms): the store did not keep up at this rate")
        else:
            reasons.append(Reason(
                check="achieved_rate", measured=round(share, 4), limit=limits.min_achieved_share, unit="share",
                text=(f"achieved {achieved_rate:,.1f} calls/s of {requested_rate:,.1f} requested "
                      f"({100 * share:.1f}%, limit {100 * limits.min_achieved_share:g}%): the load was not offered"
                      + (f" ({users:,} users)" if users else ""))))
    verdict = LOADER_BOUND if reasons else VALID
    share = limits.max_machine_cpu_percent / 100
    if machine is not None and machine_bound(busy_cores=machine.busy_cores, machine_cores=machine.cores, shared=True,
                                             share=share):
        reasons.append(Reason(
            check="machine_cpu", measured=round(machine.busy_cores, 2), limit=round(share * machine.cores, 2),
            unit="cores",
            text=(f"this machine's CPU was {machine.busy_cores:.2f} of its {machine.cores} cores busy (limit "
                  f"{share:.0%}) while the node runs on it: the node and the load generator shared the "
                  "cores, so the machine, not the store, set the limit; load from another machine")))
        verdict = LOADER_BOUND if verdict == LOADER_BOUND else MACHINE_BOUND
    return Verdict(verdict=verdict, reasons=tuple(reasons), notes=tuple(notes),
                   limits=limits, loader_cpu_percent_of_core=cpu, lag=lag)


def on_this_machine(hosts: Sequence[str]) -> bool:
    """Does the node run here (every contact point a loopback address): its CPU and the loader's share the cores."""
    def loopback(host: str) -> bool:
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return host == "localhost"
    return bool(hosts) and all(loopback(h) for h in hosts)


def machine_bound(*, busy_cores: float, machine_cores: int, shared: bool, share: float = MACHINE_SHARE) -> bool:
    """The node and the load generator on one machine, its cores near busy: the machine, not the
    store, set the limit (never a capacity figure). ``share`` 1.0 turns the check off: the busy
    share is taken at most 1 (a sample's jitter can read a little over)."""
    return shared and share < 1.0 and min(busy_cores / max(machine_cores, 1), 1.0) >= share
