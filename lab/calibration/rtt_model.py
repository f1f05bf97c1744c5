"""A latency constant's cost as a function of the round trip: the per-request model fitted to
latencies measured at several emulated round trips, its held-out check, and a measured curve
moved to the deployment's round trip.

More: docs/calibration-internals.md (rtt_model).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lab.errors import CalibrationError

HELD_OUT_TOLERANCE = 0.10   # the model predicts a round trip it did not see within this share (mean over x)
US_PER_MS = 1000.0


@dataclass(frozen=True, kw_only=True)
class RttPoint:
    """The mean latency of requests of size ``x`` (IN keys, empty buckets) at an emulated round trip."""

    rtt_us: int
    x: float
    latency_ms: float
    n: int = 1          # requests behind the mean


@dataclass(frozen=True, kw_only=True)
class RttModel:
    """latency_ms = rtt_ms * (round_trips + round_trips_per_x * x) + base_ms + per_x_ms * x.

    ``round_trips`` (+ ``round_trips_per_x`` per unit of x) is how many sequential round trips a
    call waits for; ``base_ms`` and ``per_x_ms`` are what the client and the server spend."""

    round_trips: float
    round_trips_per_x: float
    base_ms: float
    per_x_ms: float
    rtts_us: tuple[int, ...]
    points: int

    def predict_ms(self, x: float, rtt_us: float) -> float:
        return (rtt_us / US_PER_MS) * (self.round_trips + self.round_trips_per_x * x) + self.base_ms + self.per_x_ms * x

    def added_ms(self, x: float, *, from_rtt_us: float, to_rtt_us: float) -> float:
        """What moving from one round trip to another adds to a call of size ``x`` (negative: saves)."""
        return (to_rtt_us - from_rtt_us) / US_PER_MS * (self.round_trips + self.round_trips_per_x * x)

    def describe(self, unit: str = "x") -> str:
        per = f" {self.round_trips_per_x:+.3g} per {unit}" if self.round_trips_per_x else ""
        return (f"latency = RTT x ({self.round_trips:.2f}{per}) + {self.base_ms:.3f} ms + {self.per_x_ms * 1000:.1f} µs "
                f"per {unit} (fitted at RTT {', '.join(_ms(r) for r in self.rtts_us)}; {self.points} points)")

    def to_json(self) -> dict[str, Any]:
        return {"round_trips": self.round_trips, "round_trips_per_x": self.round_trips_per_x, "base_ms": self.base_ms,
                "per_x_ms": self.per_x_ms, "rtts_us": list(self.rtts_us), "points": self.points}


@dataclass(frozen=True, kw_only=True)
class HeldOut:
    """The model fitted without one round trip, predicting that round trip's points."""

    rtt_us: int
    mean_abs_rel_error: float
    max_abs_rel_error: float
    points: int
    tolerance: float = HELD_OUT_TOLERANCE

    @property
    def ok(self) -> bool:
        return self.mean_abs_rel_error <= self.tolerance

    def describe(self) -> str:
        return (f"held out RTT {_ms(self.rtt_us)}: predicted within {100 * self.mean_abs_rel_error:.1f}% on average "
                f"(worst point {100 * self.max_abs_rel_error:.1f}%, {self.points} points; target "
                f"{100 * self.tolerance:g}%): {'met' if self.ok else 'MISSED'}")

    def to_json(self) -> dict[str, Any]:
        return {"rtt_us": self.rtt_us, "mean_abs_rel_error": self.mean_abs_rel_error,
                "max_abs_rel_error": self.max_abs_rel_error, "points": self.points, "tolerance": self.tolerance,
                "ok": self.ok}


def _ms(rtt_us: float) -> str:
    return f"{rtt_us / US_PER_MS:g} ms"


def fit_rtt_model(points: Sequence[RttPoint], *, per_x_round_trips: bool = True) -> RttModel:
    """Least squares over the points (each weighted by its requests' count, square-rooted).
    ``per_x_round_trips=False`` fixes ``round_trips_per_x`` at 0 (one request whatever its size)."""
    pts = [p for p in points if np.isfinite(p.latency_ms)]
    rtts = sorted({p.rtt_us for p in pts})
    xs = {p.x for p in pts}
    if len(rtts) < 2:
        raise CalibrationError(f"a round-trip model needs latencies at two round trips or more, got {rtts}",
                               rtts_us=rtts)
    if len(xs) < 2:
        raise CalibrationError("a round-trip model needs two sizes or more", sizes=sorted(xs))
    r = np.array([p.rtt_us / US_PER_MS for p in pts])
    x = np.array([p.x for p in pts], float)
    cols = [r, r * x, np.ones_like(r), x] if per_x_round_trips else [r, np.ones_like(r), x]
    a = np.column_stack(cols)
    w = np.sqrt(np.array([max(1, p.n) for p in pts], float))
    coef, *_ = np.linalg.lstsq(a * w[:, None], np.array([p.latency_ms for p in pts]) * w, rcond=None)
    if not per_x_round_trips:
        coef = np.array([coef[0], 0.0, coef[1], coef[2]])
    return RttModel(round_trips=float(coef[0]), round_trips_per_x=float(coef[1]), base_ms=float(coef[2]),
                    per_x_ms=float(coef[3]), rtts_us=tuple(rtts), points=len(pts))


def held_out_check(points: Sequence[RttPoint], *, per_x_round_trips: bool = True,
                   tolerance: float = HELD_OUT_TOLERANCE) -> HeldOut | None:
    """Fit without an inner round trip (neither the least nor the greatest: an interpolation, as the
    deployment's round trip is) and predict its points; None with fewer than three round trips."""
    rtts = sorted({p.rtt_us for p in points})
    if len(rtts) < 3:
        return None
    held = rtts[len(rtts) // 2]
    model = fit_rtt_model([p for p in points if p.rtt_us != held], per_x_round_trips=per_x_round_trips)
    errors = [abs(model.predict_ms(p.x, p.rtt_us) - p.latency_ms) / p.latency_ms
              for p in points if p.rtt_us == held and p.latency_ms > 0]
    if not errors:
        return None
    return HeldOut(rtt_us=held, mean_abs_rel_error=float(np.mean(errors)), max_abs_rel_error=float(max(errors)),
                   points=len(errors), tolerance=tolerance)


def mean_points(samples: Iterable[Mapping[str, Any]], *, x: str, latency: str = "latency_ms",
                rtt: str = "rtt_us") -> list[RttPoint]:
    """One point per (round trip, x): the mean of the samples' latencies (each sample a mapping)."""
    groups: dict[tuple[int, float], list[float]] = {}
    for s in samples:
        groups.setdefault((int(s[rtt]), float(s[x])), []).append(float(s[latency]))
    return [RttPoint(rtt_us=k[0], x=k[1], latency_ms=float(np.mean(v)), n=len(v)) for k, v in sorted(groups.items())]


@dataclass(frozen=True, kw_only=True)
class RttSweep:
    """A constant's latencies at several round trips: the model, its check, the choice at the target."""

    measured_rtt_us: int            # the round trip the main measurement ran at (its curve)
    target_rtt_us: int | None       # the deployment's, when given
    model: RttModel
    held_out: HeldOut | None
    choice_at_target: Any = None    # the constant chosen from the curve moved to the target
    choice_by_rtt: Mapping[int, Any] | None = None   # the same rule at each round trip the sweep measured
    proxy_ms: float | None = None   # the proxy's own hop: the model at 0 ms less the direct curve (mean)

    def to_json(self) -> dict[str, Any]:
        return {"measured_rtt_us": self.measured_rtt_us, "target_rtt_us": self.target_rtt_us,
                "model": self.model.to_json(), "held_out": self.held_out.to_json() if self.held_out else None,
                "proxy_ms": self.proxy_ms,
                "choice_at_target": self.choice_at_target,
                "choice_by_rtt": {str(k): v for k, v in (self.choice_by_rtt or {}).items()}}


def choices_by_rtt(rtts_us: Iterable[int], choose: Callable[[int], Any]) -> dict[int, Any]:
    """``choose(rtt_us)`` at each round trip (the rule applied to the curve moved there)."""
    return {int(r): choose(int(r)) for r in sorted(set(rtts_us))}


def _choice(value: Any) -> str:
    return "no choice (the model moves the curve to no time: a fit of noise)" if value is None else str(value)


def rtt_text(sweep: RttSweep, what: str, unit: str = "key") -> str:
    """The conclusion's paragraph: where it was measured, the model, its check, the choice per round trip."""
    by = ", ".join(f"{_choice(v)} at {_ms(r)}" for r, v in (sweep.choice_by_rtt or {}).items())
    target = ("" if sweep.target_rtt_us is None else
              f" For the deployment's round trip of {_ms(sweep.target_rtt_us)}: **{_choice(sweep.choice_at_target)}**.")
    hop = ("" if sweep.proxy_ms is None else
           f" (the proxy's own hop, {sweep.proxy_ms:+.2f} ms against the direct curve, is in every swept point and "
           "left out: the direct curve is moved by the round-trip term only)")
    return (f"**Round trip**: measured at {_ms(sweep.measured_rtt_us)} added (the run's own) and through the "
            f"latency proxy at {', '.join(_ms(r) for r in sweep.model.rtts_us if r != sweep.measured_rtt_us)}; "
            f"{sweep.model.describe(unit)}{hop}; "
            f"{sweep.held_out.describe() if sweep.held_out else 'no held-out check (fewer than three round trips)'}."
            + (f" By round trip, {what} {by}." if by else "") + target)
