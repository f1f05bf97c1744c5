"""`lab bench load` with tiny parameters on the embedded node: both sides of every comparison
measured (plain thread pool and Locust, max send and read, the fixed-rate pair), the chat
profile's per-operation loader CPU, and a staircase whose every step carries its verdict.
Shape and consistency only; no speed is asserted."""
from __future__ import annotations

import json

import pytest

from lab.bench.load_generator import run_load_bench
from lab.bench.load_generator_report import CPU_RATIO_GOAL, LoadBenchParams

pytestmark = pytest.mark.node

TINY = LoadBenchParams(seconds=2, warmup_seconds=1, concurrency=4, step_seconds=2, seed_size="tiny")


def test_bench_load_measures_both_sides_and_judges_every_staircase_step(cluster_config, tmp_path):
    result = run_load_bench(cluster_config, TINY, results=tmp_path)
    data = json.loads(result.json_path.read_text())
    for side in ("plain_send", "locust_send", "plain_read", "locust_read", "plain_send_fixed", "locust_send_fixed",
                 "plain_read_fixed", "locust_read_fixed"):
        run = data[side]
        assert run["calls"] > 0 and run["errors"] == 0, side
        assert run["cpu_ms_per_call"] > 0 and run["calls_per_core_second"] > 0, side
    assert data["locust_send"]["audit_ok"] is True  # every acked send is in the store
    assert set(data["cpu_per_call_ratios"]) == {"send_max", "read_max", "send_fixed_rate", "read_fixed_rate"}
    assert all(r is not None and r > 0 for r in data["cpu_per_call_ratios"].values())
    # the goal is judged only on ratios whose two sides ran at the same rate, each named with its ratio
    same, goal = data["cpu_per_call_same_rate"], data["cpu_goal"]
    assert set(same) == set(data["cpu_per_call_ratios"]) and all(isinstance(v, bool) for v in same.values())
    assert goal["judged_on"] == {k: r for k, r in data["cpu_per_call_ratios"].items() if same[k]}
    assert goal["met"] == (all(r <= goal["goal"] for r in goal["judged_on"].values()) if goal["judged_on"] else None)
    assert "judged on the pairs run at the same rate" in data["closing_note"]
    ops = data["operation_cpu"]["operations"]  # the chat profile's operations, each with its caller CPU and path
    assert ops and all(c["caller_cpu_ms_per_call"] >= 0 and c["path"] in ("thread", "future") for c in ops.values())
    # a future among several operations leaves every loader CPU per call not measured (lab.load.operation_cpu)
    assert all((c["loader_cpu_ms_per_call"] is None) == any(o["path"] == "future" for o in ops.values())
               for c in ops.values())
    assert data["params"]["driver"] == "futures" and "--driver futures" in result.report.closing_note
    stair = data["staircase"]
    steps = stair["steps"]
    assert 1 <= len(steps) <= stair["planned_steps"] == 4
    assert all(st["verdict"]["verdict"] in ("valid", "loader-bound", "machine-bound") for st in steps)
    stopped = stair["stopped_at_step"]
    assert len(steps) == 4 or stopped == len(steps)  # fewer steps only when a bound one stopped it
    assert stopped is None or steps[stopped - 1]["verdict"]["verdict"] in ("loader-bound", "machine-bound")
    note = result.report.closing_note
    assert data["environment"]["services"]["client_gc"] == "freeze" and "client GC freeze" in note  # both sides
    assert f"goal <= {CPU_RATIO_GOAL}" in note and "calls/s per loader core" in note
    assert all(("valid" in line or "LOADER-BOUND" in line or "MACHINE-BOUND" in line)
               for line in note.splitlines() if "requested" in line)
