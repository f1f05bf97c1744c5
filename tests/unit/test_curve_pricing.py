"""lab.calibration.capacity_model.curve_pricing: the curve's cost at a rate, its fit, the nodes priced on it."""
from __future__ import annotations

import dataclasses
import math

import pytest

from lab.calibration.capacity_model.curve_pricing import (HELD_OUT_TARGET, CpuCurve, CurvePoint, held_out,
                                                         machine_bound, nodes_from_curve,
                                                         power_law)
from lab.errors import ValidationError


def _point(rate: float, ms: float | None, verdict: str = "carried") -> CurvePoint:
    cores = rate * (ms or 0) / 1000
    return CurvePoint(sends_per_second=rate, achieved_sends_per_second=rate, calls_per_second=rate * 3.5,
                      server_ms_per_send=ms, server_ms_per_send_ci_low=None if ms is None else 0.9 * ms,
                      server_ms_per_send_ci_high=None if ms is None else 1.1 * ms, node_cores=cores,
                      node_cores_gross=cores + 0.02, loadgen_cores=0.1, corrected_p99_ms=5.0, rounds=3, verdict=verdict)


# the shape measured on the embedded node: the cost per send falls as the rate rises
CURVE = CpuCurve(points=(_point(20, 10.5), _point(60, 7.2), _point(150, 3.4), _point(300, 2.1),
                         _point(600, 0.5, "loader-bound")), node_cores=2)


def test_the_cost_between_two_points_is_interpolated_in_log_log():
    c = CURVE.cost_at(math.sqrt(60 * 150))  # the geometric middle of two points: the geometric mean of their costs
    assert c.where == "interpolated"
    assert c.ms_per_send == pytest.approx(math.sqrt(7.2 * 3.4))
    assert CURVE.cost_at(60).ms_per_send == pytest.approx(7.2) and CURVE.cost_at(60).where == "measured"


def test_outside_the_range_the_nearest_point_and_a_loader_bound_point_is_never_used():
    above = CURVE.cost_at(10_000)
    assert above.ms_per_send == pytest.approx(2.1) and above.where == "above the measured range"  # not 0.5
    below = CURVE.cost_at(1)
    assert below.ms_per_send == pytest.approx(10.5) and below.where == "below the measured range"


def test_no_usable_point_is_an_error_not_a_price():
    curve = CpuCurve(points=(_point(50, 3.0, "machine-bound"), _point(80, None)), node_cores=2)
    with pytest.raises(ValidationError, match="no usable point"):
        curve.cost_at(50)


def test_the_power_law_fit_recovers_synthetic_points():
    rates = [10, 30, 100, 300, 1000]
    fit = power_law(rates, [40.0 * r ** -0.6 for r in rates])
    assert fit.exponent == pytest.approx(-0.6) and fit.scale == pytest.approx(40.0) and fit.points == 5
    assert fit(200) == pytest.approx(40.0 * 200 ** -0.6)
    assert power_law([10, 10], [1.0, 2.0]) is None and power_law([], []) is None


def test_the_fit_uses_usable_points_only():
    fit = CURVE.fit()
    assert fit.points == 4 and -1 < fit.exponent < 0


def test_nodes_are_priced_at_the_rate_they_imply():
    # light-rate pricing (10.5 ms per send at any rate) against the curve's
    peak, f = 2_000.0, 3.0
    light = math.ceil(peak * f * 10.5 / 1000 / (16 * 0.6))
    got = nodes_from_curve(CURVE, peak_sends_per_second=peak, replica_factor=f, cores_per_node=16,
                           target_cpu_utilization=0.6, replication_factor=3, start_nodes=light)
    # a fixed point: the cost at the per-node rate those nodes imply gives those nodes
    assert got.nodes == max(3, math.ceil(got.server_cores / (16 * 0.6)))
    assert got.measured_rate == pytest.approx(peak * f / got.nodes * 2 / 16)
    assert got.cost.ms_per_send == pytest.approx(CURVE.cost_at(got.measured_rate).ms_per_send)
    assert got.nodes < light  # the node burns less per send at the rate it actually runs at


def test_the_nodes_never_fall_under_the_replication_factor():
    got = nodes_from_curve(CURVE, peak_sends_per_second=1.0, replica_factor=3.0, cores_per_node=16,
                           target_cpu_utilization=0.6, replication_factor=3, start_nodes=1)
    assert got.nodes == 3


def test_machine_bound_only_when_the_node_and_the_loader_share_the_machine():
    assert machine_bound(node_cores=0.9, loadgen_cores=0.9, machine_cores=2, shared=True)
    assert not machine_bound(node_cores=0.9, loadgen_cores=0.9, machine_cores=2, shared=False)
    assert not machine_bound(node_cores=0.5, loadgen_cores=0.5, machine_cores=2, shared=True)


def test_a_point_survives_json():
    assert CpuCurve.from_json(CURVE.to_json()) == CURVE


def test_the_replica_factor_weights_writes_on_rf_and_reads_on_a_quorum():
    from lab.calibration.capacity_model.curve_pricing import replica_factor

    mix = {"send": 1.0, "history_latest": 1.0}
    writes = frozenset({"send"})
    assert replica_factor(mix, replication_factor=3, measured_replication_factor=1,
                          write_operations=writes) == pytest.approx((3 + 2) / 2)
    shares = {"send": 3.0, "history_latest": 1.0}  # the send's CPU three times the page's
    assert replica_factor(mix, replication_factor=3, measured_replication_factor=1, cost_shares=shares,
                          write_operations=writes) == pytest.approx((3 * 3 + 1 * 2) / 4)
    assert replica_factor(mix, replication_factor=3, measured_replication_factor=3,
                          write_operations=writes) == pytest.approx(1.0)


def test_curve_sizing_gives_one_row_per_tier():
    from lab.calibration.capacity_model.curve_pricing import curve_sizing

    rows = curve_sizing(CURVE, tiers=[20e6, 200e6], sends_per_message=1.0, peak_factor=3.0, factor=2.5,
                        cores_per_node=16, target_cpu_utilization=0.6, replication_factor=3)
    assert [r["messages_per_day"] for r in rows] == [20e6, 200e6]
    assert rows[0]["nodes_cpu_curve"] <= rows[1]["nodes_cpu_curve"]
    assert rows[0]["peak_sends_per_second"] == pytest.approx(20e6 / 86_400 * 3)


def test_each_interior_rate_is_predicted_from_its_neighbours():
    pts = [_point(10, 20.0), _point(40, 10.0), _point(160, 5.0), _point(320, 3.0)]
    checks = held_out(CpuCurve(points=tuple(pts), node_cores=2))
    assert [h.sends_per_second for h in checks] == [40, 160]                   # the ends are not checked
    assert checks[0].predicted_ms_per_send == pytest.approx(20 * (5 / 20) ** (math.log(4) / math.log(16)))
    assert checks[0].error == pytest.approx(checks[0].predicted_ms_per_send / 10 - 1)
    assert checks[0].met and checks[0].to_json()["target"] == HELD_OUT_TARGET
    off = held_out(CpuCurve(points=(_point(10, 20.0), _point(40, 2.0), _point(160, 5.0)), node_cores=2))
    assert len(off) == 1 and not off[0].met                                     # 10 ms predicted, 2 measured
    assert held_out(CpuCurve(points=(_point(10, 20.0), _point(40, 10.0)), node_cores=2)) == []


def test_a_load_is_priced_on_the_curve_at_its_equivalent_rate_per_node():
    from lab.calibration.capacity_model.predictions import predict_cpu_on_curve

    curve = CpuCurve(points=(_point(10, 100 * 10 ** -0.5), _point(40, 100 * 40 ** -0.5)), node_cores=2)
    costs, mix = {"send": 10.0, "history_latest": 2.0}, {"send": 1.0, "history_latest": 2.0, "not_priced": 5.0}
    # 0.28 cores at cpu_cost's costs over 10 s, 14 ms per send of the curve's mix: 20 sends/s of it
    light = {"seconds": 2.8, "low": 1.4, "high": 5.6}
    got = predict_cpu_on_curve(light, 10.0, curve=curve, curve_mix=mix, costs=costs, nodes=1)
    assert got["sends_per_second_per_node"] == pytest.approx(20) and got["where"] == "interpolated"
    assert got["seconds"] == pytest.approx(20 * 100 * 20 ** -0.5 / 1000 * 10)
    assert got["low"] == pytest.approx(10 * 100 * 10 ** -0.5 / 1000 * 10)     # 10 sends/s: the lowest point
    assert got["high"] == pytest.approx(40 * 100 * 40 ** -0.5 / 1000 * 10)
    assert got["low"] < got["seconds"] < got["high"]
    two = predict_cpu_on_curve(light, 10.0, curve=curve, curve_mix=mix, costs=costs, nodes=2)
    assert two["sends_per_second_per_node"] == pytest.approx(10)
    assert two["seconds"] == pytest.approx(2 * 10 * 100 * 10 ** -0.5 / 1000 * 10)  # each node at its share
    # more work per node costs less per unit: two nodes burn more than one for the same load
    assert two["seconds"] > got["seconds"]
    for bad in ({"seconds": None, "low": None, "high": None},):
        assert predict_cpu_on_curve(bad, 10.0, curve=curve, curve_mix=mix, costs=costs, nodes=1)["seconds"] is None
    assert predict_cpu_on_curve(light, 10.0, curve=curve, curve_mix={"other": 1.0}, costs=costs,
                                nodes=1)["seconds"] is None


def test_a_point_below_zero_is_read_and_never_priced():
    """A busy node's idle reading above its loaded one gives a point a negative server figure: the
    file is read (as the lab wrote it) and the point is not usable."""
    point = dataclasses.replace(_point(20.0, 1.0), server_ms_per_send=-3.5, server_ms_per_send_ci_low=-6.0)
    back = CurvePoint.from_json(point.to_json())
    assert back.server_ms_per_send == -3.5 and not back.usable
