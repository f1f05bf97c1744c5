"""The round-trip model on synthetic latencies: it recovers known costs, checks itself on a held-out
round trip, and refuses what it cannot fit."""
from __future__ import annotations

import numpy as np
import pytest

from lab.calibration.rtt_model import (
    RttPoint,
    choices_by_rtt,
    fit_rtt_model,
    held_out_check,
    mean_points,
)
from lab.errors import CalibrationError


def _points(*, rtts, xs, trips, trips_per_x, base, per_x, noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for r in rtts:
        for x in xs:
            ms = r / 1000 * (trips + trips_per_x * x) + base + per_x * x
            out.append(RttPoint(rtt_us=r, x=x, latency_ms=ms * (1 + rng.normal(0, noise)), n=20))
    return out


def test_an_in_list_is_one_round_trip_whatever_its_size():
    pts = _points(rtts=(0, 1000, 2000), xs=(1, 10, 100, 500), trips=1, trips_per_x=0, base=0.4, per_x=0.025)
    m = fit_rtt_model(pts)
    assert m.round_trips == pytest.approx(1.0, abs=1e-9)
    assert m.round_trips_per_x == pytest.approx(0.0, abs=1e-9)
    assert m.base_ms == pytest.approx(0.4) and m.per_x_ms == pytest.approx(0.025)
    assert m.predict_ms(100, 1500) == pytest.approx(1.5 + 0.4 + 2.5)
    assert m.added_ms(100, from_rtt_us=0, to_rtt_us=1000) == pytest.approx(1.0)


def test_an_empty_bucket_is_one_more_round_trip():
    pts = _points(rtts=(0, 1000, 2000), xs=(0, 2, 8, 16), trips=2, trips_per_x=1, base=1.2, per_x=0.15)
    m = fit_rtt_model(pts)
    assert (m.round_trips, m.round_trips_per_x) == pytest.approx((2.0, 1.0))
    assert m.added_ms(8, from_rtt_us=0, to_rtt_us=1000) == pytest.approx(10.0)
    assert "+1 per bucket" in m.describe("bucket")


def test_the_fit_with_one_round_trip_per_call_fixes_the_per_x_term_at_zero():
    pts = _points(rtts=(0, 2000), xs=(1, 50, 500), trips=1, trips_per_x=0, base=0.3, per_x=0.02, noise=0.02)
    m = fit_rtt_model(pts, per_x_round_trips=False)
    assert m.round_trips_per_x == 0.0
    assert m.round_trips == pytest.approx(1.0, abs=0.15)


def test_the_held_out_round_trip_is_the_inner_one_and_is_met_by_a_true_model():
    pts = _points(rtts=(0, 1000, 2000), xs=(1, 10, 100, 300), trips=1, trips_per_x=0, base=0.5, per_x=0.03,
                  noise=0.01, seed=3)
    h = held_out_check(pts)
    assert h is not None and h.rtt_us == 1000 and h.points == 4
    assert h.ok and h.mean_abs_rel_error < 0.05
    assert "met" in h.describe()


def test_a_model_that_does_not_hold_misses_its_held_out_round_trip():
    # latency grows with the square of the round trip: a line through 0 and 4 ms misses 2 ms
    pts = [RttPoint(rtt_us=r, x=x, latency_ms=(r / 1000) ** 2 + 0.1 + 0.01 * x, n=5)
           for r in (0, 2000, 4000) for x in (1, 10, 100)]
    h = held_out_check(pts)
    assert h is not None and not h.ok and "MISSED" in h.describe()


def test_too_few_round_trips_or_sizes_are_refused_and_two_give_no_check():
    two = _points(rtts=(0, 2000), xs=(1, 10), trips=1, trips_per_x=0, base=0.1, per_x=0.01)
    assert held_out_check(two) is None
    with pytest.raises(CalibrationError, match="two round trips"):
        fit_rtt_model([p for p in two if p.rtt_us == 0])
    with pytest.raises(CalibrationError, match="two sizes"):
        fit_rtt_model([p for p in two if p.x == 1])


def test_mean_points_group_samples_per_round_trip_and_size():
    samples = [{"rtt_us": 0, "in_size": 5, "latency_ms": 1.0}, {"rtt_us": 0, "in_size": 5, "latency_ms": 3.0},
               {"rtt_us": 1000, "in_size": 5, "latency_ms": 4.0}]
    pts = mean_points(samples, x="in_size")
    assert [(p.rtt_us, p.x, p.latency_ms, p.n) for p in pts] == [(0, 5.0, 2.0, 2), (1000, 5.0, 4.0, 1)]


def test_a_noisy_fit_gives_no_worst_page_rather_than_a_negative_one():
    """A fit with fewer round trips than zero moves the worst page below nothing at a larger round
    trip: no figure, and the paragraph says why instead of printing None."""
    from lab.calibration.experiments.empty_buckets import worst_page_at
    from lab.calibration.rtt_model import RttSweep, rtt_text
    pts = _points(rtts=(0, 1000, 2000), xs=(0, 2, 8, 16), trips=-1, trips_per_x=-1, base=1.2, per_x=0.15)
    noise = fit_rtt_model(pts)
    assert worst_page_at(noise, base_ms=1.2, per_bucket_ms=0.15, limit=8, measured_rtt_us=0, rtt_us=2000) is None
    good = fit_rtt_model(_points(rtts=(0, 1000, 2000), xs=(0, 2, 8, 16), trips=2, trips_per_x=1, base=1.2, per_x=0.15))
    assert worst_page_at(good, base_ms=1.2, per_bucket_ms=0.15, limit=8, measured_rtt_us=0, rtt_us=1000) == 12.4
    sweep = RttSweep(model=noise, held_out=None, measured_rtt_us=0, target_rtt_us=2000, choice_at_target=None,
                     choice_by_rtt={0: 2.4, 2000: None})
    text = rtt_text(sweep, "the worst page is")
    assert "None" not in text and "no choice" in text


def test_choices_by_rtt_apply_the_rule_at_each_round_trip():
    assert choices_by_rtt([2000, 0, 2000], lambda r: r // 1000) == {0: 0, 2000: 2}
