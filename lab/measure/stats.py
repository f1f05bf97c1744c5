"""Statistics over measured samples: the confidence interval of a mean, the bootstrap, the
multiple-comparison correction, and ratios that say their direction.

More: docs/measure-internals.md.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, MutableMapping
from typing import Any

import numpy as np

from lab.measure.percentiles import percentile

ALPHA = 0.05
CONFIDENCE = 0.95
# No interval from fewer rounds (repeats, samples): a t interval of 2 values, or a bootstrap of 2
# rounds whose median is always the lower one, states a precision nothing measured
# (an interval of 2 windows has its low bound equal to the estimate).
MIN_INTERVAL_ROUNDS = 5
TOO_FEW_ROUNDS = "too few rounds for an interval"
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 20240601


def mean_ci(values: Iterable[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(mean, low, high): Student-t interval; fewer than MIN_INTERVAL_ROUNDS values have a mean
    and no interval (NaN bounds), none is all NaN."""
    xs = np.asarray(list(values), dtype=float)
    if len(xs) == 0:
        return math.nan, math.nan, math.nan
    mean = float(xs.mean())
    if len(xs) < MIN_INTERVAL_ROUNDS:
        return mean, math.nan, math.nan
    from scipy import stats

    half = float(stats.t.ppf(0.5 + confidence / 2, len(xs) - 1) * sample_std(xs) / math.sqrt(len(xs)))
    return mean, mean - half, mean + half


def sample_std(values: Iterable[float]) -> float:
    """The sample standard deviation (divisor n - 1); 0.0 for fewer than two values."""
    xs = np.asarray(list(values), dtype=float)
    return float(xs.std(ddof=1)) if len(xs) > 1 else 0.0


def median_ci(values: Iterable[float], *, confidence: float = CONFIDENCE, resamples: int = BOOTSTRAP_RESAMPLES,
              seed: int = BOOTSTRAP_SEED) -> tuple[float, float | None, float | None]:
    """(median, low, high) of per-round values: the p50 by the one percentile, and its bootstrap
    interval with the rounds resampled whole; NaN and (None, None) when there are no values,
    (None, None) for fewer than MIN_INTERVAL_ROUNDS."""
    xs = np.asarray(list(values), dtype=float)
    if not len(xs):
        return math.nan, None, None
    low, high = interval_of(bootstrap_rounds(len(xs), lambda idx: percentile(xs[idx], 50), resamples=resamples,
                                             seed=seed), confidence)
    return percentile(xs, 50), low, high


def bootstrap_values(samples: Iterable[float], statistic: Callable[[np.ndarray], float] | None = None, *,
                     resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> np.ndarray:
    """``statistic`` (default: the p99 by the lab's one percentile) of ``resamples`` resamples
    (with replacement, same size) of ``samples``; empty for fewer than MIN_INTERVAL_ROUNDS samples."""
    xs = np.asarray(list(samples), dtype=float)
    if len(xs) < MIN_INTERVAL_ROUNDS:
        return np.empty(0)
    stat = statistic or (lambda a: percentile(a, 99.0))
    rng = np.random.default_rng(seed)
    return np.asarray([stat(xs[rng.integers(0, len(xs), len(xs))]) for _ in range(resamples)], dtype=float)


def bootstrap_rounds(rounds: int, statistic: Callable[[np.ndarray], Any], *, resamples: int = BOOTSTRAP_RESAMPLES,
                     seed: int = BOOTSTRAP_SEED) -> list[Any]:
    """``statistic(indices)`` for ``resamples`` resamples of the round indices ``0..rounds-1``:
    an interleaved experiment resampled by whole rounds (every size or operation of a round
    was measured under the same load of a shared machine, so rounds, not samples, are the
    independent units). ``statistic`` may return anything (a recommended size, a slope).
    Empty for fewer than MIN_INTERVAL_ROUNDS rounds."""
    if rounds < MIN_INTERVAL_ROUNDS:
        return []
    rng = np.random.default_rng(seed)
    return [statistic(rng.integers(0, rounds, rounds)) for _ in range(resamples)]


def interval_of(values: Iterable[float], confidence: float = CONFIDENCE) -> tuple[float | None, float | None]:
    """The central ``confidence`` interval of bootstrap values, by the one percentile."""
    xs = [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if len(xs) < 2:
        return None, None
    tail = (1 - confidence) / 2 * 100
    return percentile(xs, tail), percentile(xs, 100 - tail)


def bootstrap_ci(samples: Iterable[float], statistic: Callable[[np.ndarray], float] | None = None, *,
                 confidence: float = CONFIDENCE, resamples: int = BOOTSTRAP_RESAMPLES,
                 seed: int = BOOTSTRAP_SEED) -> tuple[float | None, float | None]:
    """Percentile-bootstrap interval of ``statistic`` (default: the p99 by the lab's one
    percentile definition); (None, None) for fewer than MIN_INTERVAL_ROUNDS samples."""
    return interval_of(bootstrap_values(samples, statistic, resamples=resamples, seed=seed), confidence)


def relative_half_width(mean: float | None, low: float | None, high: float | None) -> float | None:
    """Half the interval's width over the mean's magnitude (None when undefined): the
    precision a calibration target is stated in (b_row: <= 0.02 in a full run)."""
    if mean is None or low is None or high is None or mean == 0:
        return None
    if any(isinstance(x, float) and math.isnan(x) for x in (mean, low, high)):
        return None
    return (float(high) - float(low)) / 2 / abs(float(mean))


def holm(rows: Iterable[MutableMapping[str, Any]], alpha: float = ALPHA) -> None:
    """Holm-Bonferroni over ``rows`` (in place): each row with a ``p_value`` gets
    ``p_adjusted`` and ``significant``."""
    tested = sorted((r for r in rows if r.get("p_value") is not None), key=lambda r: r["p_value"])
    m, running = len(tested), 0.0
    for i, r in enumerate(tested):
        running = max(running, min(1.0, (m - i) * r["p_value"]))
        r["p_adjusted"] = running
        r["significant"] = running < alpha


def a_over_b(a: Any, b: Any, *, digits: int | None = None) -> float | None:
    """``a / b``; None when either is missing or not a number, or ``b`` is 0."""
    try:
        x, y = float(a), float(b)
    except (TypeError, ValueError):
        return None
    if y == 0 or math.isnan(x) or math.isnan(y):
        return None
    return round(x / y, digits) if digits is not None else x / y
