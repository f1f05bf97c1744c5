"""The knee across repeated searches: each search's knee, their median (an interval only from
enough searches), range, agreement, the aggregate status and the search that stands for them."""
from __future__ import annotations

import pytest

from lab.load.knee_search import BOUND, FOUND, NOT_REACHED, Knee, KneeStep, SearchPlan, Slo
from lab.load.knee_spread import KNEE_AGREEMENT, KneeSpread
from lab.measure.stats import MIN_INTERVAL_ROUNDS

SLO = Slo(percentile="p99", limit_ms=50.0)
PLAN = SearchPlan(start_rate=10.0, min_calls=10)


def _step(n: int, rate: float, latency: float, verdict: str = "valid") -> KneeStep:
    return KneeStep(number=n, requested_rate=rate, achieved_rate=rate, sends_per_second=rate / 3.5, calls=1000,
                    latency_ms=latency, verdict=verdict, node_cores=0.5)


def _knee(sends_at_knee: float, *, reached: bool = True, bound: bool = False) -> Knee:
    """A search whose highest meeting step carries ``sends_at_knee`` sends/s; then a failing step,
    none (not reached) or a loader-bound one."""
    calls = sends_at_knee * 3.5
    steps = [_step(1, calls / 2, 10.0), _step(2, calls, 40.0)]
    if bound:
        steps.append(_step(3, calls * 2, 90.0, "loader-bound"))
    elif reached:
        steps.append(_step(3, calls * 1.1, 80.0))
    return Knee(slo=SLO, plan=PLAN, steps=tuple(steps))


def test_three_searches_give_their_median_and_range_but_no_interval():
    s = KneeSpread(knees=(_knee(66.1), _knee(60.5), _knee(46.5)))
    assert s.rates() == pytest.approx([66.1, 60.5, 46.5])
    mid, low, high = s.estimate()
    assert mid == pytest.approx(60.5) and low is None and high is None
    assert s.spread() == pytest.approx((66.1 - 46.5) / 2 / 60.5)
    assert s.agree is True  # ±16.2%: within ±20%
    assert "too few rounds for an interval" in s.describe()
    assert s.range_text() == "range 46.5-66.1, ±16%, within ±20%"


def test_agreement_is_half_the_range_over_the_median():
    tight = KneeSpread(knees=(_knee(60.0), _knee(62.0), _knee(58.0)))
    assert tight.spread() == pytest.approx(2.0 / 60.0) and tight.agree is True
    wide = KneeSpread(knees=(_knee(40.0), _knee(60.0), _knee(80.0)))
    assert wide.spread() == pytest.approx(20.0 / 60.0) and wide.spread() > KNEE_AGREEMENT and wide.agree is False
    assert "**wider than**" in wide.describe() and "within" in tight.describe()


def test_enough_searches_give_an_interval_around_the_median():
    s = KneeSpread(knees=tuple(_knee(r) for r in (58.0, 60.0, 61.0, 62.0, 65.0)))
    assert len(s.knees) == MIN_INTERVAL_ROUNDS
    mid, low, high = s.estimate()
    assert mid == pytest.approx(61.0) and low is not None and low <= mid <= high
    assert "95% CI" in s.describe()


def test_one_search_says_it_has_no_interval_and_stands_for_itself():
    k = _knee(50.0)
    s = KneeSpread(knees=(k,))
    assert s.spread() is None and s.agree is None and s.representative() is k
    assert s.estimate()[0] == pytest.approx(50.0) and "no interval" in s.describe()


def test_the_aggregate_status_is_the_weakest_searchs():
    assert KneeSpread(knees=(_knee(60.0), _knee(61.0))).status == FOUND
    assert KneeSpread(knees=(_knee(60.0), _knee(61.0, reached=False))).status == NOT_REACHED
    assert KneeSpread(knees=(_knee(60.0, reached=False), _knee(61.0, bound=True))).status == BOUND


def test_the_representative_is_the_search_nearest_the_median():
    a, b, c = _knee(66.1), _knee(60.5), _knee(46.5)
    assert KneeSpread(knees=(a, b, c)).representative() is b
    json = KneeSpread(knees=(a, b, c)).to_json()
    assert json["searches"] == 3 and json["range"] == pytest.approx([46.5, 66.1]) and len(json["knees"]) == 3


def test_a_search_without_a_knee_is_counted_but_not_in_the_median():
    none = Knee(slo=SLO, plan=PLAN, steps=(_step(1, 35.0, 90.0),))
    s = KneeSpread(knees=(_knee(60.0), none, _knee(64.0)))
    assert s.rates() == pytest.approx([60.0, 64.0]) and "1 found none" in s.describe()
    assert KneeSpread(knees=(none,)).estimate() == (None, None, None)
    with pytest.raises(ValueError):
        KneeSpread(knees=())


def test_a_node_busy_before_the_load_is_said_in_the_statement():
    from dataclasses import replace

    idle, busy = replace(_knee(60.0), idle_node_cores=0.02), replace(_knee(60.0), idle_node_cores=0.9)
    assert not idle.busy_before and busy.busy_before and not _knee(60.0).busy_before  # None: not measured
    assert "busy before the load" in busy.statement() and "busy" not in idle.statement()
    assert busy.to_json()["busy_before"] is True and busy.to_json()["idle_node_cores"] == 0.9
    assert KneeSpread(knees=(idle, busy)).to_json()["knees"][1]["busy_before"] is True
