"""The knee across repeated searches of one plan: each search's knee, their median with an interval
when there are enough of them (else their range), and whether they agree.

One search is a point: on a shared 2-core machine the same mix's knee moved ±17% between three
searches of one evening. More: docs/load-internals.md (knee_spread).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from lab.load.knee_search import BOUND, FOUND, NOT_MET, NOT_REACHED, Knee
from lab.measure.stats import MIN_INTERVAL_ROUNDS, TOO_FEW_ROUNDS, median_ci

KNEE_AGREEMENT = 0.20      # searches whose knees lie within ±this of their median agree
_STATUS_ORDER = (BOUND, NOT_MET, NOT_REACHED, FOUND)  # the aggregate takes the weakest


@dataclass(frozen=True, kw_only=True)
class KneeSpread:
    """Every search's knee (the first ran first) and what they say together, per node in sends/s."""

    knees: tuple[Knee, ...]

    def __post_init__(self) -> None:
        if not self.knees:
            raise ValueError("a knee spread needs at least one search")

    def rates(self) -> list[float]:
        """Sends/s per node of every search that found a rate meeting the target."""
        return [k.step.sends_per_second / k.nodes for k in self.knees if k.step is not None]

    @property
    def status(self) -> str:
        """found only when every search found its knee; else the weakest search's status."""
        return min((k.status for k in self.knees), key=_STATUS_ORDER.index)

    def estimate(self) -> tuple[float | None, float | None, float | None]:
        """(median, low, high) of the searches' knees: the interval only from MIN_INTERVAL_ROUNDS searches."""
        return self._estimate

    @cached_property
    def _estimate(self) -> tuple[float | None, float | None, float | None]:  # a bootstrap: computed once
        rates = self.rates()
        if not rates:
            return None, None, None
        mid, low, high = median_ci(rates)
        return float(mid), low, high

    def spread(self) -> float | None:
        """Half the range over the median (±): None with fewer than two knees."""
        rates, mid = self.rates(), self.estimate()[0]
        return None if len(rates) < 2 or not mid else (max(rates) - min(rates)) / 2 / mid

    @property
    def agree(self) -> bool | None:
        s = self.spread()
        return None if s is None else s <= KNEE_AGREEMENT

    def representative(self) -> Knee:
        """The search whose knee is nearest the median (the first on a tie; the first without any):
        its steps stand for the knee's latency, CPU and operation counts."""
        mid = self.estimate()[0]
        with_step = [k for k in self.knees if k.step is not None]
        if mid is None or not with_step:
            return self.knees[0]
        return min(with_step, key=lambda k: abs(k.step.sends_per_second / k.nodes - mid))

    def range_text(self) -> str:
        """The searches' range and spread, or why there is none."""
        rates, s = self.rates(), self.spread()
        if s is None:
            return "no range: fewer than two searches found a knee"
        return (f"range {min(rates):,.1f}-{max(rates):,.1f}, ±{100 * s:.0f}%, "
                + ("within" if self.agree else "**wider than**") + f" ±{100 * KNEE_AGREEMENT:.0f}%")

    def describe(self) -> str:
        """One sentence: the searches' knees, their median and its interval or range, and agreement."""
        n, rates = len(self.knees), self.rates()
        if n == 1:
            return "one search: the knee has no interval (run more searches for its spread)"
        mid, low, high = self.estimate()
        if mid is None:
            return f"{n} searches, none found a rate meeting the target"
        each = ", ".join(f"{r:,.1f}" for r in rates)
        missing = n - len(rates)
        text = f"{n} searches: {each} sends/s per node" + (f" ({missing} found none)" if missing else "")
        text += f"; median {mid:,.1f}"
        if low is not None and high is not None:
            text += f" (95% CI {low:,.1f}-{high:,.1f})"
        else:
            text += f" ({TOO_FEW_ROUNDS}: {MIN_INTERVAL_ROUNDS} searches give one)"
        return text + (f"; {self.range_text()}" if self.spread() is not None else "")

    def to_json(self) -> dict[str, Any]:
        mid, low, high = self.estimate()
        rates = self.rates()
        return {"searches": len(self.knees), "status": self.status, "median": mid, "ci_low": low, "ci_high": high,
                "range": [min(rates), max(rates)] if rates else None, "spread": self.spread(), "agree": self.agree,
                "agreement": KNEE_AGREEMENT,
                "knees": [{"status": k.status, "sends_per_second_per_node":
                           None if k.step is None else k.step.sends_per_second / k.nodes,
                           "calls_per_second_per_node": None if k.step is None else k.step.achieved_rate / k.nodes,
                           "latency_ms": None if k.step is None else k.step.latency_ms,
                           "node_cores": None if k.step is None else k.step.node_cores, "steps": len(k.steps),
                           "idle_node_cores": k.idle_node_cores, "busy_before": k.busy_before}
                          for k in self.knees]}
