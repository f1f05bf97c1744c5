"""The knee's curve checked at a rate it did not measure: node CPU and the target's percentile
predicted from the search's valid steps, then measured by one more step.

More: docs/load-internals.md (knee_check).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lab.load.knee_search import Knee, KneeStep
from lab.load.verdict import LOADER_BOUND, MACHINE_BOUND

CPU_TOLERANCE = 0.15       # node CPU predicted within this share of the measured
HELD_OUT_SHARE = 0.8       # the held-out rate: this share of the knee's


def interpolate(points: Sequence[tuple[float, float]], x: float) -> float | None:
    """Linear through the two points around ``x`` (or the two nearest when ``x`` is outside them);
    None with fewer than two distinct x."""
    pts = sorted({p[0]: p[1] for p in points}.items())
    if len(pts) < 2:
        return None
    below = [p for p in pts if p[0] <= x]
    above = [p for p in pts if p[0] > x]
    if below and above:
        (x0, y0), (x1, y1) = below[-1], above[0]
    elif below:
        (x0, y0), (x1, y1) = below[-2], below[-1]
    else:
        (x0, y0), (x1, y1) = above[0], above[1]
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def _valid(steps: Sequence[KneeStep]) -> list[KneeStep]:
    return [s for s in steps if s.verdict not in (LOADER_BOUND, MACHINE_BOUND) and s.achieved_rate > 0]


@dataclass(frozen=True, kw_only=True)
class Prediction:
    """What the search's valid steps say about ``rate`` (calls/s of the mix)."""

    rate: float
    node_cores: float | None
    latency_ms: float | None
    from_steps: tuple[int, ...]


def predict(knee: Knee, share: float = HELD_OUT_SHARE) -> Prediction | None:
    """The held-out rate (``share`` of the knee's requested rate) and its predicted node CPU and
    percentile, from the valid steps; None without a knee or two valid steps."""
    if knee.step is None:
        return None
    steps = _valid(knee.steps)
    rate = share * knee.step.requested_rate
    cpu = [(s.achieved_rate, s.node_cores) for s in steps if s.node_cores is not None]
    lat = [(s.achieved_rate, s.latency_ms) for s in steps if s.latency_ms is not None]
    node, latency = interpolate(cpu, rate), interpolate(lat, rate)
    if node is None and latency is None:
        return None
    return Prediction(rate=rate, node_cores=node, latency_ms=latency, from_steps=tuple(s.number for s in steps))


@dataclass(frozen=True, kw_only=True)
class HeldOutRate:
    """The prediction against the step that measured it (at its achieved rate, re-interpolated)."""

    predicted: Prediction
    step: KneeStep
    tolerance: float = CPU_TOLERANCE

    def _rel(self, predicted: float | None, measured: float | None) -> float | None:
        if predicted is None or measured is None or measured <= 0:
            return None
        return (predicted - measured) / measured

    @property
    def cpu_error(self) -> float | None:
        return self._rel(self.predicted.node_cores, self.step.node_cores)

    @property
    def latency_error(self) -> float | None:
        return self._rel(self.predicted.latency_ms, self.step.latency_ms)

    @property
    def valid(self) -> bool:
        return self.step.verdict not in (LOADER_BOUND, MACHINE_BOUND)

    @property
    def cpu_ok(self) -> bool | None:
        e = self.cpu_error
        return None if e is None or not self.valid else abs(e) <= self.tolerance

    def describe(self, percentile: str = "p99") -> str:
        p, s = self.predicted, self.step
        if not self.valid:
            return (f"held-out rate {p.rate:,.1f} calls/s: the step was {s.verdict}, so the curve is not checked "
                    "there")
        cpu = ("node CPU not measured" if self.cpu_error is None else
               f"node CPU predicted {p.node_cores:.3f} cores, measured {s.node_cores:.3f} "
               f"({100 * self.cpu_error:+.1f}%, target ±{100 * self.tolerance:g}%: "
               f"{'met' if self.cpu_ok else 'MISSED'})")
        lat = ("" if self.latency_error is None else
               f"; {percentile} predicted {p.latency_ms:,.1f} ms, measured {s.latency_ms:,.1f} ms "
               f"({100 * self.latency_error:+.1f}%)")
        return (f"held-out rate {s.achieved_rate:,.1f} calls/s ({s.sends_per_second:,.1f} sends/s; "
                f"{s.calls:,} calls): {cpu}{lat}; predicted from steps {', '.join(map(str, p.from_steps))}")

    def to_json(self) -> dict[str, Any]:
        p, s = self.predicted, self.step
        return {"asked_rate": s.requested_rate, "achieved_rate": s.achieved_rate, "sends_per_second": s.sends_per_second,
                "predicted_node_cores": p.node_cores, "measured_node_cores": s.node_cores,
                "predicted_latency_ms": p.latency_ms, "measured_latency_ms": s.latency_ms,
                "cpu_error": self.cpu_error, "latency_error": self.latency_error, "cpu_ok": self.cpu_ok,
                "tolerance": self.tolerance, "verdict": s.verdict, "from_steps": list(p.from_steps),
                "step": s.number, "calls": s.calls}


def check(knee: Knee, predicted: Prediction, step: KneeStep) -> HeldOutRate:
    """The prediction re-made at the rate the step achieved (a step may fall short of its asked rate)."""
    steps = _valid(knee.steps)
    cpu = [(s.achieved_rate, s.node_cores) for s in steps if s.node_cores is not None]
    lat = [(s.achieved_rate, s.latency_ms) for s in steps if s.latency_ms is not None]
    at = Prediction(rate=step.achieved_rate, node_cores=interpolate(cpu, step.achieved_rate),
                    latency_ms=interpolate(lat, step.achieved_rate), from_steps=predicted.from_steps)
    return HeldOutRate(predicted=at, step=step)
