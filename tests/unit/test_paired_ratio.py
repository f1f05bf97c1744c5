"""lab.measure.paired_ratio: the ratio of two methods measured in interleaved rounds."""
from __future__ import annotations

import pytest

from lab.measure import median_ci, paired_ratio, percentile


def test_one_ratio_per_round_summarised_by_the_median_range_and_interval():
    a = [90.0, 100.0, 80.0, 95.0, 30.0, 99.0]    # round 5: a burst hit side a
    b = [100.0, 100.0, 100.0, 100.0, 100.0, 100.0]
    r = paired_ratio(a, b)
    assert r.ratios == (0.9, 1.0, 0.8, 0.95, 0.3, 0.99) and r.rounds == 6 and r.undefined_rounds == 0
    assert r.median == percentile(r.ratios, 50) == 0.9  # the one percentile: the burst does not move it
    assert (r.median, r.ci_low, r.ci_high) == median_ci(r.ratios)
    assert (r.low, r.high) == (0.3, 1.0)
    assert r.ci_low <= r.median <= r.ci_high
    assert r.rel_half_width == pytest.approx((r.ci_high - r.ci_low) / 2 / r.median)
    assert r.to_json(3)["ratios"] == [0.9, 1.0, 0.8, 0.95, 0.3, 0.99] and r.to_json()["rounds"] == 6


def test_vouched_only_with_enough_rounds_and_a_narrow_interval():
    steady = paired_ratio([0.95, 0.96, 0.94, 0.95, 0.96, 0.95, 0.94, 0.95], [1.0] * 8)
    assert steady.vouched() and steady.against(0.9, at_least=True) == "met"
    assert steady.against(0.99, at_least=True) == "not met"
    assert steady.against(0.95, at_least=False) == "undecided"  # the interval straddles it
    wide = paired_ratio([0.6, 1.4, 0.7, 1.3, 0.9, 1.1, 0.8, 1.2], [1.0] * 8)
    assert wide.rel_half_width > 0.05 and not wide.vouched() and wide.vouched(max_rel_half_width=1.0)
    few = paired_ratio([0.95, 0.95, 0.95, 0.95], [1.0] * 4)  # fewer than 5 rounds: no interval at all
    assert (few.median, few.ci_low, few.ci_high) == (0.95, None, None)
    assert not few.vouched() and few.against(0.9, at_least=True) == "undecided"


def test_rounds_without_a_ratio_are_counted_not_used():
    r = paired_ratio([1.0, None, 2.0, 3.0], [2.0, 1.0, 0.0, 3.0])
    assert r.ratios == (0.5, 1.0) and r.undefined_rounds == 2
    empty = paired_ratio([], [])
    assert empty.median is None and empty.rounds == 0 and not empty.vouched()
    assert empty.against(1.0, at_least=True) == "undecided"
    with pytest.raises(ValueError):
        paired_ratio([1.0], [1.0, 2.0])
