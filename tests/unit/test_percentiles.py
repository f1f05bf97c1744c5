"""One percentile definition (nearest rank) for sample lists and HdrHistograms alike."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lab.measure import latency_summary, nearest_rank, percentile, summarize_histogram, summarize_samples
from lab.measure.hdr import new_histogram
from lab.measure.percentiles import histogram_mean, histogram_percentiles

PS = (0.0, 1.0, 50.0, 90.0, 99.0, 99.9, 100.0)


def test_nearest_rank_is_a_measured_value_never_an_interpolation():
    xs = [10, 20, 30, 40]
    assert [percentile(xs, p) for p in (0, 25, 50, 62.5, 75, 99, 100)] == [10, 10, 20, 30, 30, 40, 40]
    assert np.percentile(xs, 50) == 25.0  # what the lab no longer reports
    assert percentile([7.5], 99) == 7.5 and percentile([], 50) is None
    assert percentile([1.0, math.nan, 3.0], 100) == 3.0  # NaNs are no samples


def test_rank_bounds():
    assert nearest_rank(99, 1) == 1 and nearest_rank(99, 100) == 99 and nearest_rank(99.9, 1000) == 999
    assert nearest_rank(100, 7) == 7 and nearest_rank(0, 7) == 1
    with pytest.raises(ValueError):
        nearest_rank(101, 5)
    with pytest.raises(ValueError):
        nearest_rank(50, 0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=50_000_000), min_size=1, max_size=400))
def test_histogram_and_sample_list_agree(values):
    """The p of a histogram is HdrHistogram's own value, and lies in the histogram bucket of the
    sample list's p: the two p99s agree to the histogram's 3 significant digits."""
    hist = new_histogram()
    for v in values:
        hist.record_value(v)
    ours = histogram_percentiles(hist, PS)
    assert ours == [hist.get_value_at_percentile(p) for p in PS]
    for p, h in zip(PS, ours):
        s = int(percentile(values, p))
        assert hist.get_lowest_equivalent_value(s) <= h <= hist.get_highest_equivalent_value(s), p


def test_histogram_mean_is_hdrhs_own_mean():
    """The summaries' mean is exactly HdrHistogram's get_mean_value, found without its walk of
    every bucket (the oracle takes ~0.2 s a histogram: three of them, each a different shape)."""
    rng = np.random.default_rng(7)
    small = [(int(v), 1) for v in rng.integers(1, 2048, 200)]  # the first bucket: one value per sub-bucket
    wide = [(int(v), int(c)) for v, c in zip(rng.lognormal(8, 2.5, 500).astype(int) + 1, rng.integers(1, 1000, 500))]
    for values in (small, wide, [(50_000_000, 3), (1, 1)]):
        hist = new_histogram()
        for v, count in values:
            hist.record_value(min(v, 50_000_000), count)
        expected = hist.get_mean_value()
        assert histogram_mean(hist) == expected
        assert summarize_histogram(hist).mean == round(expected, 1)
    assert histogram_mean(new_histogram()) == 0.0 and summarize_histogram(new_histogram()).mean is None


def test_summaries_of_samples_and_of_histograms_have_one_shape():
    rng = np.random.default_rng(3)
    xs = rng.lognormal(7, 1, 5000).astype(int) + 1
    hist = new_histogram()
    for x in xs:
        hist.record_value(int(x))
    h, s = summarize_histogram(hist), summarize_samples(xs)
    assert h.to_json().keys() == s.to_json().keys() == {"count", "p50", "p90", "p99", "p999", "max", "mean",
                                                                 "too_few_for"}
    assert h.count == s.count == 5000
    for key in ("p50", "p90", "p99", "p999", "max"):
        assert getattr(h, key) == pytest.approx(getattr(s, key), rel=1e-3), key
    empty = summarize_histogram(new_histogram())
    assert empty.count == 0 and empty.p99 is None and summarize_samples([]).p99 is None


def test_latency_summary_rows_for_sample_tables():
    row = latency_summary([1.0, 2.0, 3.0, 4.0], unit="ms")
    assert row == {"n": 4, "mean_ms": 2.5, "p50_ms": 2.0, "p90_ms": 4.0, "p99_ms": 4.0, "max_ms": 4.0,
                   "too_few": "n=4: too few for p90, p99"}
    assert math.isnan(latency_summary([])["p99_ms"]) and latency_summary([])["n"] == 0
    assert latency_summary(range(1, 1001))["too_few"] == ""


def test_a_tail_percentile_is_reported_from_enough_samples_only():
    """10 samples beyond it: p90 from 100, p99 from 1,000, p99.9 from 10,000; the median from any n."""
    from lab.measure import min_samples, too_few

    assert [min_samples(p) for p in (0, 50, 90, 99, 99.9, 100)] == [1, 1, 100, 1000, 10000, 1]
    assert too_few(99, 7) == "n=7: too few for p99" and too_few(99.9, 9_999) == "n=9,999: too few for p99.9"
    assert too_few(99, 1000) is None and too_few(50, 1) is None
    seven = summarize_samples([68.5, 1, 2, 3, 4, 5, 6])
    assert seven.too_few_for() == ["p90", "p99", "p999"] and seven.reported("p99") is None
    assert seven.reported("p50") == 4 and seven.to_json()["too_few_for"] == ["p90", "p99", "p999"]
    many = summarize_samples(range(1000))
    assert many.too_few_for() == ["p999"] and many.reported("p99") == 989
    assert summarize_samples(range(10_000)).to_json()["too_few_for"] == []
