"""The loader-bound verdict (lab.load.verdict): each check, its limit, and what is not the loader's fault."""
from __future__ import annotations

import pytest

from lab.load.plan import LoadPlan
from lab.load.progress import NO_PROGRESS
from lab.load.run_monitor import RunMonitor
from lab.load.verdict import (LOADER_BOUND, MACHINE_BOUND, VALID, LagTrend, Limits, MachineShare, Verdict, judge,
                              lag_trend, on_this_machine)

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


def test_a_short_windows_edge_allows_for_its_jittered_schedule():
    """35 users at 10.5 calls/s for 5 s: 46 calls (88%) is within what the schedule alone leaves out
    (the knee's short steps); the same share over 20 s of 500 users at 500 calls/s is not."""
    short = judge(requested_rate=10.5, achieved_rate=9.2, loader_cpu_percent_of_core={}, lag=None, users=35,
                  window_seconds=5.0)
    assert short.verdict == VALID and not short.notes
    half = judge(requested_rate=10.5, achieved_rate=5.2, loader_cpu_percent_of_core={}, lag=None, users=35,
                 window_seconds=5.0)
    assert half.loader_bound
    long = judge(requested_rate=500, achieved_rate=440, loader_cpu_percent_of_core={}, lag=None, users=500,
                 window_seconds=20.0)
    assert long.loader_bound
    assert judge(requested_rate=100, achieved_rate=96.9, loader_cpu_percent_of_core={}, lag=None, users=10,
                 window_seconds=float("inf")).loader_bound  # a web run's open window: no allowance


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


def test_a_shared_machine_near_its_cores_makes_a_valid_run_machine_bound():
    ok = dict(requested_rate=100.0, achieved_rate=100.0, loader_cpu_percent_of_core={"w0": 30.0},
              lag=LagTrend(points=10, mean_ms=1.0, growth_ms=0.0, growth_ci_low_ms=-1.0, growth_ci_high_ms=1.0))
    v = judge(**ok, machine=MachineShare(busy_cores=1.8, cores=2))
    assert v.verdict == MACHINE_BOUND and v.bound and not v.loader_bound
    assert [r.check for r in v.reasons] == ["machine_cpu"] and v.reasons[0].limit == 1.7
    assert Verdict.from_json(v.to_json()) == v
    assert judge(**ok, machine=MachineShare(busy_cores=1.2, cores=2)).verdict == VALID
    assert judge(**ok).verdict == VALID                                    # not shared: no machine check
    hot = judge(**(ok | {"loader_cpu_percent_of_core": {"w0": 95.0}}), machine=MachineShare(busy_cores=1.9, cores=2))
    assert hot.verdict == LOADER_BOUND and [r.check for r in hot.reasons] == ["loader_cpu", "machine_cpu"]


@pytest.mark.parametrize("hosts, shared", [(["127.0.0.1"], True), (["127.0.0.41", "::1"], True),
                                           (["localhost"], True), (["10.0.0.5"], False),
                                           (["127.0.0.1", "db.example"], False), ([], False)])
def test_the_node_shares_the_machine_only_on_loopback(hosts, shared):
    assert on_this_machine(hosts) is shared


def test_the_monitor_reads_the_machines_busy_cores_over_a_window(tmp_path):
    plan = LoadPlan(run_id="r", load_dir=tmp_path, state_root=tmp_path, profile="chat", users=2, t0=1000.0)
    monitor = RunMonitor(plan, NO_PROGRESS, shared=True)
    monitor._machine = [(1000.0 + t, 10.0 + 1.5 * t) for t in range(10)]   # 1.5 cores busy
    share = monitor.machine_share(2.0, 6.0)
    assert share.busy_cores == pytest.approx(1.5) and share.cores >= 1
    assert monitor.machine_share(20.0, 30.0) is None
    assert RunMonitor(plan, NO_PROGRESS, shared=False).machine_share(2.0, 6.0) is None
