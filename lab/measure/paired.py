"""The ratio of two methods measured in interleaved rounds (A B, B A, ...): one ratio per round,
summarised by its median, its range and the median's interval (:func:`paired_ratio`).

More: docs/measure-internals.md.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from lab.measure.stats import MIN_INTERVAL_ROUNDS, a_over_b, median_ci, relative_half_width

__all__ = ["DEFAULT_VOUCH_REL_HALF_WIDTH", "PairedRatio", "paired_ratio"]

# the median's 95 % interval within +-5 % of it: a ratio checked against a goal like 0.9x
DEFAULT_VOUCH_REL_HALF_WIDTH = 0.05
MET, NOT_MET, UNDECIDED = "met", "not met", "undecided"


@dataclass(frozen=True, kw_only=True)
class PairedRatio:
    """Per-round ratios a_i / b_i and their summary; ``median`` is None without rounds."""

    ratios: tuple[float, ...]
    undefined_rounds: int           # rounds whose ratio is not defined (a side missing or 0)
    median: float | None
    ci_low: float | None            # the median's 95 % bootstrap interval (None: too few rounds)
    ci_high: float | None
    low: float | None               # the range of the per-round ratios
    high: float | None
    rel_half_width: float | None    # the interval's half width over the median

    @property
    def rounds(self) -> int:
        return len(self.ratios)

    def vouched(self, max_rel_half_width: float = DEFAULT_VOUCH_REL_HALF_WIDTH) -> bool:
        """Enough rounds for an interval, and the interval within ``max_rel_half_width`` of the median."""
        return (self.rounds >= MIN_INTERVAL_ROUNDS and self.rel_half_width is not None
                and self.rel_half_width <= max_rel_half_width)

    def against(self, goal: float, *, at_least: bool) -> str:
        """"met", "not met" or "undecided": where the median's interval lies against ``goal``
        (``at_least``: the ratio should be >= goal, else <= goal). Without an interval: undecided."""
        if self.ci_low is None or self.ci_high is None:
            return UNDECIDED
        good, bad = (self.ci_low >= goal, self.ci_high < goal) if at_least else (self.ci_high <= goal,
                                                                                  self.ci_low > goal)
        return MET if good else NOT_MET if bad else UNDECIDED

    def to_json(self, digits: int | None = None) -> dict[str, Any]:
        r = (lambda x: x) if digits is None else (lambda x: None if x is None else round(x, digits))
        return {"rounds": self.rounds, "undefined_rounds": self.undefined_rounds, "median": r(self.median),
                "ci_low": r(self.ci_low), "ci_high": r(self.ci_high), "low": r(self.low), "high": r(self.high),
                "rel_half_width": r(self.rel_half_width), "ratios": [r(x) for x in self.ratios]}


def paired_ratio(a: Iterable[Any], b: Iterable[Any]) -> PairedRatio:
    """The per-round ratios ``a[i] / b[i]`` (:func:`~lab.measure.stats.a_over_b`; a round whose
    ratio is not defined is counted, not used) with their median, range and the median's interval."""
    a, b = list(a), list(b)
    if len(a) != len(b):
        raise ValueError(f"paired rounds need as many a as b values, got {len(a)} and {len(b)}")
    ratios = tuple(r for r in (a_over_b(x, y) for x, y in zip(a, b)) if r is not None and not math.isinf(r))
    undefined = len(a) - len(ratios)
    if not ratios:
        return PairedRatio(ratios=(), undefined_rounds=undefined, median=None, ci_low=None, ci_high=None, low=None,
                           high=None, rel_half_width=None)
    median, ci_low, ci_high = median_ci(ratios)
    return PairedRatio(ratios=ratios, undefined_rounds=undefined, median=median, ci_low=ci_low, ci_high=ci_high,
                       low=min(ratios), high=max(ratios), rel_half_width=relative_half_width(median, ci_low, ci_high))
