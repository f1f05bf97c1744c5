"""The one significance test of the lab: do two runs differ, and by how much?

More: docs/measure-internals.md.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lab.measure.percentiles import histogram_percentiles, percentile
from lab.measure.stats import CONFIDENCE

TEST_NAME = "welch-t on log per-interval medians, AR(1)-corrected"
MIN_INTERVALS = 20   # windows per side below which no test is made (short series inflate the false-positive rate)
MAX_RHO = 0.98
RHO_MARGIN = 0.75    # standard errors added to the estimated persistence (a one-sided ~77% upper bound)
MIN_EFFECTIVE = 2.0  # effective (independent) windows per side below which no test is made
_DECAY_FROM_R1 = 0.2  # r2/r1 is read as the decay only when r1 is clearly positive


@dataclass(frozen=True, kw_only=True)
class IntervalTest:
    """Outcome of :func:`interval_test`. ``ratio``: B over A, geometric means of the
    per-window medians, with its ``confidence`` interval; ``test`` and ``p_value`` are None
    when no test was made (``reason`` says why)."""

    test: str | None
    n_a: int
    n_b: int
    ratio: float | None
    ratio_ci_low: float | None
    ratio_ci_high: float | None
    p_value: float | None
    autocorrelation: float | None
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"test": self.test, "intervals_a": self.n_a, "intervals_b": self.n_b, "ratio_b_over_a": self.ratio,
                "ratio_ci_low": self.ratio_ci_low, "ratio_ci_high": self.ratio_ci_high, "p_value": self.p_value,
                "autocorrelation": self.autocorrelation, "no_test_reason": self.reason}


def window_medians(windows: Iterable[Any]) -> list[float]:
    """The median of each window (a sequence of samples or an HdrHistogram), in order; empty
    windows are left out (a rare operation has no call in most seconds)."""
    out = []
    for w in windows:
        if hasattr(w, "get_total_count"):
            if w.get_total_count():
                out.append(float(histogram_percentiles(w, [50.0])[0]))
        else:
            m = percentile(w, 50.0)
            if m is not None:
                out.append(m)
    return out


def _autocorrelation(series: Sequence[np.ndarray], lag: int) -> float:
    """The lag-``lag`` autocorrelation pooled over ``series``, each centred on its own mean."""
    num = sum(float(((x[:-lag] - x.mean()) * (x[lag:] - x.mean())).sum()) for x in series if len(x) > lag)
    den = sum(float(((x - x.mean()) ** 2).sum()) for x in series)
    return num / den if den > 0 else 0.0


def persistence(series: Sequence[np.ndarray]) -> float:
    """The ``rho`` the test corrects with (module docstring): bias-corrected r1 or the decay
    r2/r1, whichever is larger, plus :data:`RHO_MARGIN` standard errors, in [0, MAX_RHO]."""
    m = sum(len(x) for x in series) / len(series)
    r1, r2 = _autocorrelation(series, 1), _autocorrelation(series, 2)
    r1c = min(max(r1 + (1 + 3 * r1) / m, 0.0), MAX_RHO)
    rho = r1c
    if r1c >= _DECAY_FROM_R1:
        r2c = r2 + (1 + 3 * max(r2, 0.0)) / m
        rho = max(rho, min(max(r2c / r1c, 0.0), MAX_RHO))
    return min(rho + RHO_MARGIN * math.sqrt(max(1 - rho ** 2, 0.0) / m), MAX_RHO)


def _variance_factor(n: int, rho: float) -> float:
    """``n Var(mean) / sigma^2`` of n AR(1) values with lag-1 correlation ``rho``."""
    if rho <= 0 or n < 2:
        return 1.0
    k = np.arange(1, n)
    return float(1 + 2 * ((1 - k / n) * rho ** k).sum())


def _side(x: np.ndarray, rho: float) -> tuple[float, float, float]:
    """(mean, variance of the mean, effective sample size) of one side's log series."""
    n = len(x)
    f = _variance_factor(n, rho)
    # E[s^2] = n/(n-1) (sigma^2 - Var(mean)) = sigma^2 n/(n-1) (1 - f/n)
    shrink = n / (n - 1) * (1 - f / n)
    sigma2 = float(x.var(ddof=1)) / shrink if shrink > 0 else math.inf
    return float(x.mean()), sigma2 * f / n, n / f


def interval_test(a: Iterable[float], b: Iterable[float], *, min_intervals: int = MIN_INTERVALS,
                  confidence: float = CONFIDENCE) -> IntervalTest:
    """Do the per-window medians ``a`` and ``b`` (each in time order, positive) differ?"""
    from scipy import stats

    xa = np.log(np.asarray([v for v in a if v is not None and v > 0], dtype=float))
    xb = np.log(np.asarray([v for v in b if v is not None and v > 0], dtype=float))
    na, nb = len(xa), len(xb)
    if min(na, nb) < max(min_intervals, 2):
        ratio = math.exp(xb.mean() - xa.mean()) if na and nb else None
        return IntervalTest(test=None, n_a=na, n_b=nb, ratio=ratio, ratio_ci_low=None, ratio_ci_high=None,
                            p_value=None, autocorrelation=None,
                            reason=f"{min(na, nb)} intervals: too few for a test (needs {min_intervals} per run)")
    rho = persistence([xa, xb])
    (ma, va, ea), (mb, vb, eb) = _side(xa, rho), _side(xb, rho)
    diff, var = mb - ma, va + vb
    if min(ea, eb) < MIN_EFFECTIVE:
        return IntervalTest(test=None, n_a=na, n_b=nb, ratio=math.exp(diff), ratio_ci_low=None, ratio_ci_high=None,
                            p_value=None, autocorrelation=round(rho, 3),
                            reason=f"{min(na, nb)} intervals drifting together (autocorrelation {rho:.2f}): about "
                                   f"{min(ea, eb):.1f} independent ones, too few for a test")
    if var <= 0:
        p = 1.0 if diff == 0 else 0.0
        low = high = diff
    else:
        df = var ** 2 / (va ** 2 / max(ea - 1, 0.5) + vb ** 2 / max(eb - 1, 0.5))
        se = math.sqrt(var)
        p = float(2 * stats.t.sf(abs(diff) / se, df))
        half = float(stats.t.ppf(0.5 + confidence / 2, df)) * se
        low, high = diff - half, diff + half
    return IntervalTest(test=TEST_NAME, n_a=na, n_b=nb, ratio=math.exp(diff), ratio_ci_low=math.exp(low),
                        ratio_ci_high=math.exp(high), p_value=p, autocorrelation=round(rho, 3))


def change_words(ratio: float | None) -> str:
    """B against A in words: 'B slower by 25%', 'B faster by 20%', 'B slower by 200% (3.0x)'."""
    if ratio is None or not math.isfinite(ratio):
        return "no ratio"
    if ratio >= 1:
        pct = (ratio - 1) * 100
        text = f"B slower by {pct:.0f}%" if pct >= 1 else f"B slower by {pct:.1f}%"
        return text + (f" ({ratio:.1f}x)" if ratio >= 2 else "")
    pct = (1 - ratio) * 100
    return f"B faster by {pct:.0f}%" if pct >= 1 else f"B faster by {pct:.1f}%"


def verdict(test: IntervalTest, *, significant: bool | None, p_adjusted: float | None) -> str:
    """The words a table shows for one test after the multiple-comparison correction."""
    if test.test is None:
        return test.reason or "no test"
    p = f"p={test.p_value:.2g}" + (f", {p_adjusted:.2g} after Holm" if p_adjusted is not None else "")
    ci = f"B/A {test.ratio:.2f} (95% CI {test.ratio_ci_low:.2f}-{test.ratio_ci_high:.2f})"
    if significant:
        return f"{change_words(test.ratio)}, {p}; {ci}"
    return f"no difference found ({p}); {ci}"
