"""The loader-bound verdict (lab.load.verdict): each check, its limit, and what is not the loader's fault."""
from __future__ import annotations

import pytest

from lab.load.verdict import LOADER_BOUND, VALID, LagTrend, Limits, Verdict, judge, lag_trend

FLAT = [(float(t), 2.0 + (0.3 if t % 2 else -0.3)) for t in range(20)]


def test_a_run_within_every_limit_is_valid():
    v = judge(requested_rate=100, achieved_rate=99.5, loader_cpu_percent_of_core={"worker-0": 40.0},
              lag=lag_trend(FLAT, 20))
    assert v.verdict == VALID and not v.reasons and not v.loader_bound


def test_a_process_over_its_cpu_limit_makes_it_loader_bound():
    v = judge(requested_rate=100, achieved_rate=100, loader_cpu_percent_of_core={"worker-0": 30.0, "worker-1": 87.6},
              lag=lag_trend(FLAT, 20))
    assert v.verdict == LOADER_BOUND
    (r,) = v.reasons
    assert r.check == "loader_cpu" and r.measured == 87.6 and r.limit == 70 and "worker-1" in r.text


def test_the_cpu_limit_is_a_setting():
    cpu = {"worker-0": 20.0}
    assert judge(requested_rate=None, achieved_rate=None, loader_cpu_percent_of_core=cpu, lag=None).verdict == VALID
    low = judge(requested_rate=None, achieved_rate=None, loader_cpu_percent_of_core=cpu, lag=None,
                limits=Limits(max_loader_cpu_percent_of_core=5))
    assert low.loader_bound and low.reasons[0].limit == 5
    with pytest.raises(ValueError):
        Limits(max_loader_cpu_percent_of_core=0)


def test_a_missed_rate_with_the_schedule_lost_is_loader_bound():
    growing = [(float(t), 10.0 + 40.0 * t) for t in range(20)]
    v = judge(requested_rate=300, achieved_rate=94.7, loader_cpu_percent_of_core={"worker-0": 60.0},
              lag=lag_trend(growing, 20))
    assert v.loader_bound
    assert {r.check for r in v.reasons} == {"achieved_rate", "schedule_lag"}
    rate = next(r for r in v.reasons if r.check == "achieved_rate")
    assert rate.measured == pytest.approx(94.7 / 300, abs=1e-4) and "31.6%" in rate.text


def test_a_missed_rate_with_the_schedule_kept_is_the_stores_not_the_loaders():
    v = judge(requested_rate=200, achieved_rate=150, loader_cpu_percent_of_core={"worker-0": 30.0},
              lag=lag_trend(FLAT, 20))
    assert v.verdict == VALID and v.notes and "store did not keep up" in v.notes[0]


def test_a_missed_rate_without_lag_data_is_loader_bound():
    v = judge(requested_rate=200, achieved_rate=150, loader_cpu_percent_of_core={}, lag=None)
    assert v.loader_bound and v.reasons[0].check == "achieved_rate"


def test_97_percent_is_the_edge():
    ok = judge(requested_rate=100, achieved_rate=97.0, loader_cpu_percent_of_core={}, lag=None)
    short = judge(requested_rate=100, achieved_rate=96.9, loader_cpu_percent_of_core={}, lag=None)
    assert ok.verdict == VALID and short.loader_bound


def test_lag_growth_needs_a_slope_that_is_not_noise():
    noisy = [(float(t), 100.0 * (t % 3)) for t in range(20)]  # big swings, no trend
    trend = lag_trend(noisy, 20)
    assert trend.growth_ci_low_ms is not None and trend.growth_ci_low_ms < 0
    v = judge(requested_rate=None, achieved_rate=None, loader_cpu_percent_of_core={}, lag=trend)
    assert v.verdict == VALID
    small = lag_trend([(float(t), 1.0 + 0.5 * t) for t in range(20)], 20)  # grows 10 ms: under 50
    assert judge(requested_rate=None, achieved_rate=None, loader_cpu_percent_of_core={}, lag=small).verdict == VALID


def test_lag_trend_of_few_points_has_no_growth():
    t = lag_trend([(0.0, 1.0), (1.0, 500.0)], 2)
    assert t.points == 2 and t.growth_ms is None and t.mean_ms == pytest.approx(250.5)
    assert lag_trend([], 10) == LagTrend(points=0, mean_ms=None)


def test_the_verdict_round_trips_through_json():
    v = judge(requested_rate=300, achieved_rate=94.7, loader_cpu_percent_of_core={"worker-0": 93.3},
              lag=lag_trend([(float(t), 5.0 * t * t) for t in range(10)], 10))
    back = Verdict.from_json(v.to_json())
    assert back.verdict == v.verdict and [r.check for r in back.reasons] == [r.check for r in v.reasons]
    assert back.to_json() == v.to_json()
    assert Verdict.from_json(None) is None
