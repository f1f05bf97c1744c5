"""The one percentile definition, for histograms and sample lists alike.

**Nearest rank, rounded half up**: the p-th percentile of n values is the value of rank
``max(1, floor(p * n / 100 + 0.5))`` (1-based) in ascending order: the smallest value with
(about) p % of all values at or below it, always one of the measured values, never an
interpolation between two. It is HdrHistogram's own rule (``get_target_count_at_percentile``),
so a p99 read from an HdrHistogram and a p99 read from the list of the same values agree to
the histogram's precision (3 significant digits); ``numpy.percentile``'s default (linear
interpolation) would not, and two p99s that disagree discredit a measurement.

A histogram's percentile is the highest value equivalent to the bucket holding that rank
(what HdrHistogram reports: an upper bound at 3 significant digits).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

# the percentiles every summary reports, by the key they carry
SUMMARY_PERCENTILES: Mapping[str, float] = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p999": 99.9}


def nearest_rank(p: float, n: int) -> int:
    """1-based rank of the ``p``-th percentile (0..100) among ``n`` >= 1 values."""
    if not 0.0 <= p <= 100.0:
        raise ValueError(f"percentile must be in [0, 100], got {p!r}")
    if n < 1:
        raise ValueError(f"no values to rank (n={n})")
    # the same expression, in the same order, as HdrHistogram's get_target_count_at_percentile
    return min(n, max(1, int((p * n / 100) + 0.5)))


def _sorted(samples: Iterable[float]) -> np.ndarray:
    xs = np.asarray(samples if hasattr(samples, "__array__") else list(samples), dtype=float)
    return np.sort(xs[~np.isnan(xs)])


def percentile(samples: Iterable[float], p: float) -> float | None:
    """The ``p``-th percentile of a list of samples (None when there are none; NaNs ignored)."""
    xs = _sorted(samples)
    return float(xs[nearest_rank(p, len(xs)) - 1]) if len(xs) else None


def histogram_percentiles(hist: Any, ps: Iterable[float]) -> list[int | None]:
    """Percentiles of an HdrHistogram by the same nearest rank, in one pass over its buckets."""
    n = hist.get_total_count()
    ps = list(ps)
    if n == 0:
        return [None] * len(ps)
    targets = sorted((nearest_rank(p, n), i) for i, p in enumerate(ps))
    out: list[int | None] = [None] * len(ps)
    cumulative, k = 0, 0
    for step in hist.get_recorded_iterator():
        cumulative += step.count_added_in_this_iter_step
        while k < len(targets) and cumulative >= targets[k][0]:
            rank, i = targets[k]
            value = step.value_iterated_to
            out[i] = (hist.get_highest_equivalent_value(value) if ps[i] else hist.get_lowest_equivalent_value(value))
            k += 1
        if k == len(targets):
            break
    return out


@dataclass(frozen=True, kw_only=True)
class LatencySummary:
    """count, p50/p90/p99/p999, max and mean of one set of latencies (one unit, given by the
    holder: ``service_us``, ``latency_ms``). Percentiles are None when nothing was recorded."""

    count: int
    p50: float | None
    p90: float | None
    p99: float | None
    p999: float | None
    max: float | None
    mean: float | None

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "p50": self.p50, "p90": self.p90, "p99": self.p99, "p999": self.p999,
                "max": self.max, "mean": self.mean}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LatencySummary:
        return cls(**{k: data.get(k) for k in ("p50", "p90", "p99", "p999", "max", "mean")},
                   count=int(data.get("count") or 0))


def summarize_histogram(hist: Any) -> LatencySummary:
    """The summary of an HdrHistogram (values as recorded: µs in this lab); mean to 0.1."""
    n = hist.get_total_count()
    pcts = histogram_percentiles(hist, SUMMARY_PERCENTILES.values())
    return LatencySummary(count=n, **dict(zip(SUMMARY_PERCENTILES, pcts)),
                          max=hist.get_max_value() if n else None,
                          mean=round(hist.get_mean_value(), 1) if n else None)


def summarize_samples(samples: Iterable[float]) -> LatencySummary:
    """The summary of a list of samples, by the same percentile definition."""
    xs = _sorted(samples)
    n = len(xs)
    if n == 0:
        return LatencySummary(count=0, p50=None, p90=None, p99=None, p999=None, max=None, mean=None)
    pcts = {k: float(xs[nearest_rank(p, n) - 1]) for k, p in SUMMARY_PERCENTILES.items()}
    return LatencySummary(count=n, **pcts, max=float(xs[-1]), mean=float(xs.mean()))


def latency_summary(samples: Iterable[float], *, unit: str = "ms") -> dict[str, float]:
    """A row for a samples table: ``n``, ``mean_<unit>``, ``p50_<unit>``, ``p90_<unit>``,
    ``p99_<unit>``, ``max_<unit>`` (NaN when empty, so a DataFrame column stays numeric)."""
    s = summarize_samples(samples)
    nan = lambda v: math.nan if v is None else v  # noqa: E731
    return {"n": s.count, f"mean_{unit}": nan(s.mean), f"p50_{unit}": nan(s.p50), f"p90_{unit}": nan(s.p90),
            f"p99_{unit}": nan(s.p99), f"max_{unit}": nan(s.max)}
