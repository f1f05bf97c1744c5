"""The one percentile definition, for histograms and sample lists alike.

More: docs/measure-internals.md.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

# the percentiles every summary reports, by the key they carry
SUMMARY_PERCENTILES: Mapping[str, float] = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p999": 99.9}
TAIL_SAMPLES = 10  # samples expected beyond a tail percentile before it is reported


def min_samples(p: float) -> int:
    """The smallest number of samples the ``p``-th percentile is reported from: 1 up to the
    median (and for the maximum), else ``TAIL_SAMPLES / (1 - p/100)``: p90 100, p99 1,000,
    p99.9 10,000."""
    if p <= 50.0 or p >= 100.0:
        return 1
    return math.ceil(round(TAIL_SAMPLES * 100.0 / (100.0 - p), 6))


def percentile_label(p: float) -> str:
    """'p99', 'p99.9', 'p50'."""
    return f"p{p:g}"


def too_few(p: float, n: int) -> str | None:
    """None when the ``p``-th percentile of ``n`` samples is reported, else what a table says
    in its place: 'n=7: too few for p99'."""
    n = int(n or 0)
    return None if n >= min_samples(p) else f"n={n:,}: too few for {percentile_label(p)}"


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
    """Percentiles of an HdrHistogram by the same nearest rank: the bucket where the running
    count first reaches the rank, found on the histogram's counts array with numpy (hdrh's
    own iterators walk every bucket in Python: about 0.1 s per histogram of sub-second values,
    too slow for the thousands of one-second intervals a comparison reads)."""
    n = hist.get_total_count()
    ps = list(ps)
    if n == 0:
        return [None] * len(ps)
    cumulative = np.cumsum(np.ctypeslib.as_array(hist.counts)[: hist.counts_len])
    out: list[int | None] = []
    for p in ps:
        index = int(np.searchsorted(cumulative, nearest_rank(p, n)))  # the first bucket holding that rank
        value = hist.get_value_from_index(index)
        out.append(int(hist.get_highest_equivalent_value(value) if p else hist.get_lowest_equivalent_value(value)))
    return out


def histogram_mean(hist: Any) -> float:
    """HdrHistogram's own mean (``get_mean_value``: every recorded bucket at its median
    equivalent value, weighted by its count, over the total count), summed over the non-empty
    buckets found with numpy: hdrh's recorded iterator walks the whole counts array in Python,
    0.2-0.9 s per histogram, seconds of every load run's summary (and of each metrics scrape)."""
    n = hist.get_total_count()
    if n == 0:
        return 0.0
    counts = np.ctypeslib.as_array(hist.counts)[: hist.counts_len]
    total = 0  # an int, as hdrh's: exact however many calls
    for index in np.flatnonzero(counts):
        count = hist.get_count_at_index(int(index))
        value = hist.get_highest_equivalent_value(hist.get_value_from_index(int(index)))
        low = hist.get_lowest_equivalent_value(value)
        total += count * (low + ((value - low + 1) >> 1))  # the bucket's median equivalent value
    return float(total) / n


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

    def too_few_for(self) -> list[str]:
        """The keys of the percentiles too few samples stand behind (:func:`min_samples`)."""
        return [k for k, p in SUMMARY_PERCENTILES.items()
                if getattr(self, k) is not None and self.count < min_samples(p)]

    def reported(self, key: str) -> float | None:
        """The percentile ``key`` when enough samples stand behind it, else None."""
        return None if key in self.too_few_for() else getattr(self, key)

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "p50": self.p50, "p90": self.p90, "p99": self.p99, "p999": self.p999,
                "max": self.max, "mean": self.mean, "too_few_for": self.too_few_for()}

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
                          mean=round(histogram_mean(hist), 1) if n else None)


def summarize_samples(samples: Iterable[float]) -> LatencySummary:
    """The summary of a list of samples, by the same percentile definition."""
    xs = _sorted(samples)
    n = len(xs)
    if n == 0:
        return LatencySummary(count=0, p50=None, p90=None, p99=None, p999=None, max=None, mean=None)
    pcts = {k: float(xs[nearest_rank(p, n) - 1]) for k, p in SUMMARY_PERCENTILES.items()}
    return LatencySummary(count=n, **pcts, max=float(xs[-1]), mean=float(xs.mean()))


def latency_summary(samples: Iterable[float], *, unit: str = "ms") -> dict[str, Any]:
    """A row for a samples table: ``n``, ``mean_<unit>``, ``p50_<unit>``, ``p90_<unit>``,
    ``p99_<unit>``, ``max_<unit>`` (NaN when empty, so a DataFrame column stays numeric) and
    ``too_few``: what the table's reader is told about its tail percentiles ('n=40: too few
    for p90, p99'; empty when every one is reported)."""
    s = summarize_samples(samples)
    nan = lambda v: math.nan if v is None else v  # noqa: E731
    few = [percentile_label(SUMMARY_PERCENTILES[k]) for k in s.too_few_for() if k != "p999"]
    return {"n": s.count, f"mean_{unit}": nan(s.mean), f"p50_{unit}": nan(s.p50), f"p90_{unit}": nan(s.p90),
            f"p99_{unit}": nan(s.p99), f"max_{unit}": nan(s.max),
            "too_few": f"n={s.count:,}: too few for {', '.join(few)}" if few else ""}
