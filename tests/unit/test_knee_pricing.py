"""Nodes per tier from the knee: the per-core scaling, the replica copies, the headroom, the
comparison with the curve's count, and a knee notebook's values read back."""
from __future__ import annotations

import math

import pytest

from lab.calibration.capacity_model.knee_pricing import KneeCapacity, knee_lines, knee_nodes, knee_sizing
from lab.errors import ValidationError

KNEE = KneeCapacity(sends_per_second=100.0, node_cores=1.0, status="found", slo="p99 <= 50 ms", min_calls=1000)


def test_a_node_carries_the_knee_per_core_in_the_measured_copies():
    nodes, per_node = knee_nodes(KNEE, peak_sends_per_second=10_000, replica_factor=2.0, cores_per_node=16,
                                 headroom=0.5, replication_factor=3)
    assert per_node == pytest.approx(100 * 16 / 2.0)            # 800 sends/s a node at the knee
    assert nodes == math.ceil(10_000 / (800 * 0.5)) == 25


def test_never_fewer_nodes_than_replicas():
    assert knee_nodes(KNEE, peak_sends_per_second=1, replica_factor=1, cores_per_node=16, headroom=0.6,
                      replication_factor=3)[0] == 3


@pytest.mark.parametrize("bad", [dict(peak_sends_per_second=0), dict(cores_per_node=0), dict(headroom=0),
                                 dict(headroom=1.5), dict(replica_factor=0)])
def test_out_of_range_inputs_are_refused(bad):
    args = dict(peak_sends_per_second=100, replica_factor=1, cores_per_node=16, headroom=0.6, replication_factor=3)
    with pytest.raises(ValidationError):
        knee_nodes(KNEE, **(args | bad))


def test_tiers_are_compared_with_the_curves_count():
    rows = knee_sizing(KNEE, tiers=(86_400_000.0, 864_000_000.0), sends_per_message=1.0, peak_factor=1.0,
                       replica_factor=1.0, cores_per_node=1, headroom=1.0, replication_factor=1,
                       curve_nodes={86_400_000.0: 10, 864_000_000.0: 50})
    assert [r["nodes_knee"] for r in rows] == [10, 100]          # 1,000 and 10,000 sends/s at 100 a node
    assert [r["nodes_knee_disagree"] for r in rows] == [False, True]
    text = knee_lines(KNEE, rows, where="this run", headroom=1.0, cores_per_node=1)
    assert "**10 nodes within the target** vs **10** on the CPU curve" in text
    assert "**more than 20% apart**" in text and "lower bound" not in text


def test_the_values_of_a_knee_notebook_read_back():
    values = {"knee_sends_per_second_per_node": 42.0, "knee_node_available_cores": 1.3, "knee_status": "not reached",
              "slo": "p99 <= 50 ms", "min_calls": 100, "machine_cores": 2}
    knee = KneeCapacity.from_values(values)
    assert (knee.sends_per_second, knee.node_cores, knee.lower_bound) == (42.0, 1.3, True)
    assert KneeCapacity.from_values(values | {"knee_node_available_cores": None}).node_cores == 2
    assert KneeCapacity.from_values(values | {"knee_sends_per_second_per_node": None}) is None
    assert KneeCapacity.from_values({"knee_sends_per_second_per_node": "many"}) is None
    text = knee_lines(knee, knee_sizing(knee, tiers=(1e6,), sends_per_message=1, peak_factor=3, replica_factor=1,
                                        cores_per_node=16, headroom=0.6, replication_factor=3),
                      where="run x", headroom=0.6, cores_per_node=16)
    assert "A lower bound" in text and "smoke figure" in text


def test_without_a_knee_the_report_says_how_to_get_one():
    assert "run the knee notebook" in knee_lines(None, [], where="none given", headroom=0.6, cores_per_node=16)


def test_the_spread_of_several_searches_is_read_and_a_wide_one_names_the_lowest():
    from lab.load.knee_search import Knee, KneeStep, SearchPlan, Slo
    from lab.load.knee_spread import KneeSpread

    def knee(sends: float) -> Knee:
        steps = tuple(KneeStep(number=i + 1, requested_rate=r, achieved_rate=r, sends_per_second=r / 3.5, calls=2000,
                               latency_ms=lat, verdict="valid") for i, (r, lat) in
                      enumerate(((sends * 3.5, 30.0), (sends * 3.5 * 1.1, 80.0))))
        return Knee(slo=Slo(percentile="p99", limit_ms=50.0), plan=SearchPlan(start_rate=1.0), steps=steps)

    def lines(*sends: float) -> str:
        spread = KneeSpread(knees=tuple(knee(s) for s in sends))
        values = {"knee_sends_per_second_per_node": spread.estimate()[0], "knee_node_available_cores": 1.0,
                  "knee_status": spread.status, "slo": "p99 <= 50 ms", "min_calls": 2000,
                  "knee_spread": spread.to_json()}
        k = KneeCapacity.from_values(values)
        assert k.searches == len(sends) and k.lowest == min(sends)
        return knee_lines(k, knee_sizing(k, tiers=(1e6,), sends_per_message=1, peak_factor=3, replica_factor=1,
                                         cores_per_node=16, headroom=0.6, replication_factor=3),
                          where="run x", headroom=0.6, cores_per_node=16)

    assert "median of 3 searches, ±3%" in lines(60.0, 62.0, 58.0) and "size from the lowest" not in lines(60.0, 62.0, 58.0)
    assert "size from the lowest, 40.0 sends/s" in lines(40.0, 60.0, 80.0)
    one = KneeCapacity.from_values({"knee_sends_per_second_per_node": 50.0, "knee_status": "found", "slo": "p99 <= 50 ms",
                                    "min_calls": 2000})
    assert one.searches == 1 and one.spread is None
