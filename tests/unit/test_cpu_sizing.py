"""The CPU side of capacity (lab.calibration.capacity_model.cpu_sizing, the capacity notebook's CPU part):
cores and nodes from CPU per operation, the replica scaling, which of CPU and disk binds."""
from __future__ import annotations

import json

import pytest

from lab.calibration.capacity_model.cpu_sizing import SCYLLA_SIMPLE_OPS_PER_CORE_SECOND, costs_from_values, cpu_sizing
from lab.constants import Constants
from lab.errors import ValidationError

COSTS = {"send": 2.0, "history_latest": 1.0}


def test_cores_follow_the_formula_with_replicas():
    c = cpu_sizing(messages_per_day=86_400_000, cpu_ms_per_op=COSTS, requests_per_op={"send": 6, "history_latest": 2},
                   operations_per_message={"send": 1.0, "history_latest": 2.0}, peak_factor=2.0, cores_per_node=10,
                   target_cpu_utilization=0.5, replication_factor=3, measured_replication_factor=1, nodes_disk=4)
    # peak 2,000 sends/s: sends 2000 x 2 ms x 3 replicas = 12 cores; latest pages 4000 x 1 ms x 2 (quorum) = 8
    assert c.peak_messages_per_second == 2000
    assert c.operations["send"]["cores"] == pytest.approx(12) and c.operations["history_latest"]["replicas"] == 2
    assert c.server_cores == pytest.approx(20) and c.nodes_cpu == 4 and c.binding == "disk" and c.nodes == 4
    # requests at the peak (with replicas) against ScyllaDB's ~12.5K simple ops/s per core
    assert c.peak_requests_per_second == pytest.approx(2000 * 6 * 3 + 4000 * 2 * 2)
    assert c.rule_of_thumb_cores == pytest.approx(c.peak_requests_per_second / SCYLLA_SIMPLE_OPS_PER_CORE_SECOND)
    more = cpu_sizing(messages_per_day=86_400_000 * 3, cpu_ms_per_op=COSTS, peak_factor=2.0, cores_per_node=10,
                      operations_per_message={"send": 1.0, "history_latest": 2.0}, target_cpu_utilization=0.5,
                      nodes_disk=4)
    assert more.nodes_cpu == 12 and more.binding == "cpu" and more.nodes == 12


def test_a_cost_measured_on_replicas_is_not_scaled_twice_and_intervals_carry_through():
    c = cpu_sizing(messages_per_day=86_400, cpu_ms_per_op={"send": 3.0}, cpu_ms_interval={"send": (2.0, 4.0)},
                   operations_per_message={"send": 1.0}, peak_factor=1.0, replication_factor=3,
                   measured_replication_factor=3)
    assert c.operations["send"]["replicas"] == 1 and c.server_cores == pytest.approx(0.003)
    assert c.server_cores_low == pytest.approx(0.002) and c.server_cores_high == pytest.approx(0.004)
    assert c.nodes_cpu == 3  # at least RF nodes
    assert c.binding == "unknown"


def test_bad_inputs_are_refused_with_the_field():
    with pytest.raises(ValidationError, match="no measured CPU cost for react"):
        cpu_sizing(messages_per_day=1e6, cpu_ms_per_op=COSTS, operations_per_message={"react": 0.3})
    with pytest.raises(ValidationError, match="peak_factor"):
        cpu_sizing(messages_per_day=1e6, cpu_ms_per_op=COSTS, operations_per_message={"send": 1}, peak_factor=0.5)
    with pytest.raises(ValidationError, match="target_cpu_utilization"):
        cpu_sizing(messages_per_day=1e6, cpu_ms_per_op=COSTS, operations_per_message={"send": 1},
                   target_cpu_utilization=1.5)


def test_the_capacity_notebook_sets_cpu_bound_beside_disk_bound_nodes(tmp_path):
    from lab.calibration.experiments import capacity

    values = {"operations": ["send", "history_latest"], "measured_replication_factor": 1,
              "cpu_send_server_ms_per_op": 2.0, "cpu_send_server_ms_per_op_ci_low": 1.5,
              "cpu_send_server_ms_per_op_ci_high": 2.5, "cpu_send_requests_per_op": 6.0, "cpu_send_loadgen_ms_per_op": 3.0,
              "cpu_history_latest_server_ms_per_op": 1.0, "cpu_history_latest_server_ms_per_op_ci_low": 0.8,
              "cpu_history_latest_server_ms_per_op_ci_high": 1.2, "cpu_history_latest_requests_per_op": 2.0}
    path = tmp_path / "values.json"
    path.write_text(json.dumps(values))
    assert costs_from_values(values)["cpu_ms_interval"]["send"] == (1.5, 2.5)
    params = capacity.Params(b_row_bytes=1200.0, cpu_values=str(path),
                             operations_per_message={"send": 1.0, "history_latest": 2.0})
    result = capacity.run(params, constants=Constants.appendix_b())
    v = result.values()
    for tier in params.tiers:
        assert v[f"nodes_cpu_{tier}"] >= 3 and v[f"nodes_disk_{tier}"] >= 3
        assert v[f"binding_{tier}"] == ("cpu" if v[f"nodes_cpu_{tier}"] > v[f"nodes_disk_{tier}"] else "disk")
    text = capacity.conclusion(result)
    assert "CPU-bound nodes" in text and "disk-bound" in text and "12.5K" in text
    assert "no light-rate CPU side" in capacity.conclusion(capacity.run(capacity.Params(b_row_bytes=1200.0),
                                                                        constants=Constants.appendix_b()))


def test_the_capacity_notebook_prices_each_tier_on_the_cpu_curve_beside_the_light_rate(tmp_path):
    from lab.calibration.experiments import capacity
    from tests.unit.test_curve_pricing import CURVE

    (tmp_path / "curve.json").write_text(json.dumps({"cpu_curve": CURVE.to_json(), "usable_points": 4,
                                                     "measured_replication_factor": 1}))
    values = {"operations": ["send"], "measured_replication_factor": 1, "cpu_send_server_ms_per_op": 10.5,
              "cpu_send_requests_per_op": 6.0}
    (tmp_path / "cpu.json").write_text(json.dumps(values))
    params = capacity.Params(b_row_bytes=1200.0, cpu_values=str(tmp_path / "cpu.json"),
                             cpu_curve_values=str(tmp_path / "curve.json"), operations_per_message={"send": 1.0})
    result = capacity.run(params, constants=Constants.appendix_b())
    v = result.values()
    assert v["cpu_curve_replica_factor"] == pytest.approx(3.0)  # sends only: written on every replica
    for tier in params.tiers:
        # the light rate prices every send at 10.5 ms; the curve at the rate each node runs at, never above it
        assert 3 <= v[f"nodes_cpu_curve_{tier}"] <= v[f"nodes_cpu_{tier}"]
        assert v[f"curve_ms_per_send_{tier}"] <= 10.5
        light, curve = v[f"nodes_cpu_{tier}"], v[f"nodes_cpu_curve_{tier}"]
        assert v[f"nodes_cpu_disagree_{tier}"] == (abs(curve / light - 1) > 0.20)
    text = capacity.conclusion(result)
    assert "CPU side on the curve" in text and "at the light rates" in text
    assert "lower bound" not in text  # one statement of what each figure is: the light-rate count is an upper estimate


def _windows(rounds: int, *, burst_every: int, cost_s: float = 0.004, ops: int = 300, seconds: float = 5.0):
    """A cpu_cost windows table: idle, op, idle per round; every ``burst_every``-th round another
    client burns 0.8 cores in the idle windows and less (displaced) during the op window."""
    import pandas as pd

    rows = []
    for r in range(rounds):
        burst = burst_every and r % burst_every == 0
        idle = 0.8 if burst else 0.01
        busy = 0.3 if burst else 0.01
        rows += [{"round": r, "seq": 0, "op": "idle", "ops": 0, "errors": 0, "wall_seconds": 2.0,
                  "server_cpu_seconds": idle * 2.0, "loadgen_cpu_seconds": 0.0, "requests": 0,
                  "rate_requested": 0.0, "service_p50_ms": 0.0, "corrected_p99_ms": 0.0},
                 {"round": r, "seq": 1, "op": "send", "ops": ops, "errors": 0, "wall_seconds": seconds,
                  "server_cpu_seconds": cost_s * ops + busy * seconds, "loadgen_cpu_seconds": 0.003 * ops,
                  "requests": 6 * ops, "rate_requested": 60.0, "service_p50_ms": 5.0, "corrected_p99_ms": 20.0},
                 {"round": r, "seq": 2, "op": "idle", "ops": 0, "errors": 0, "wall_seconds": 2.0,
                  "server_cpu_seconds": idle * 2.0, "loadgen_cpu_seconds": 0.0, "requests": 0,
                  "rate_requested": 0.0, "service_p50_ms": 0.0, "corrected_p99_ms": 0.0}]
    return pd.DataFrame(rows)


def test_cpu_per_op_comes_from_quiet_windows_when_there_are_enough():
    from lab.calibration.experiments.cpu_cost import Params, summarize

    params = Params(operations=("send",))
    s = summarize(_windows(8, burst_every=3), params).iloc[0]  # rounds 0, 3, 6 bursty: 5 quiet
    assert s.basis == "quiet windows" and s.windows_used == 5 and s.resolved
    assert s.server_ms_per_op == pytest.approx(4.0, abs=0.01)  # the displaced client does not bias it
    assert s.loadgen_ms_per_op == pytest.approx(3.0) and s.requests_per_op == 6
    noisy = summarize(_windows(4, burst_every=1), params).iloc[0]  # never quiet: every window, biased low
    assert noisy.basis.startswith("all windows") and noisy.server_ms_per_op < 4.0


def test_an_operation_below_the_runs_resolution_is_read_and_left_unpriced(tmp_path):
    """On a busy node the idle reading can exceed the loaded one: the cpu_cost run writes that
    operation's median below zero (resolved: false). The capacity reads the file and prices only
    the operations it resolved, instead of refusing the file."""
    from lab.calibration.experiments import capacity

    values = {"operations": ["send", "react"], "measured_replication_factor": 1,
              "cpu_send_server_ms_per_op": 2.0, "cpu_send_requests_per_op": 6.0, "cpu_send_resolved": False,
              "cpu_react_server_ms_per_op": -19.38, "cpu_react_server_ms_per_op_ci_low": -30.0,
              "cpu_react_server_ms_per_op_ci_high": 4.0, "cpu_react_requests_per_op": 3.0, "cpu_react_resolved": False}
    costs = costs_from_values(values)
    assert costs["cpu_ms_per_op"] == {"send": 2.0}
    path = tmp_path / "values.json"
    path.write_text(json.dumps(values))
    result = capacity.run(capacity.Params(b_row_bytes=1200.0, cpu_values=str(path),
                                          operations_per_message={"send": 1.0, "react": 0.3}),
                          constants=Constants.appendix_b())
    assert result.values()["nodes_cpu_20000000"] >= 1
    with pytest.raises(ValueError, match="cpu_react_server_ms_per_op"):
        costs_from_values({**values, "cpu_react_server_ms_per_op": "-1"})  # not a number: still refused
