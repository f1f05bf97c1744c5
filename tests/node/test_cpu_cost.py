"""The CPU side against the real node: the embedded JVM's CPU time from /proc agrees with JMX
ProcessCpuTime of the same process, grows under load, and the cpu_cost notebook (tiny
parameters) records server and load-generator CPU per operation that the capacity notebook
turns into cores and nodes."""
from __future__ import annotations

import json

import pytest

from lab.calibration.notebooks import run_notebook

pytestmark = pytest.mark.node

OPS = ["send", "history_latest", "batch_s1_dm", "react"]
# html=False on every notebook here: nothing in this file reads the HTML export (about a second a notebook;
# test_notebooks and test_calibrate check the export)


def test_proc_and_jmx_read_the_same_jvm_cpu_time(admin, connection):
    from lab.cluster.admin.cassandra import CassandraAdmin

    if not isinstance(admin, CassandraAdmin):
        pytest.skip("Cassandra only")
    (proc,) = [r for r in admin.cpu_readings() if r.source == "proc"]
    _, host, port, node = admin._live_targets()[0]
    jmx = admin._shell(host, port).process_cpu_ns() / 1e9
    again = admin.cpu_readings()[0]
    assert proc.cpu_seconds - 1.0 <= jmx <= again.cpu_seconds + 1.0  # one process, two readers
    for _ in range(300):
        connection.execute("SELECT release_version FROM system.local")
    assert admin.cpu_readings()[0].cpu_seconds > again.cpu_seconds


def test_cpu_cost_notebook_and_its_capacity(tmp_path, cluster_config):
    values = run_notebook("cpu_cost", {"operations": OPS, "window_seconds": 1.5, "idle_seconds": 0.5, "min_rounds": 2,
                                       "max_rounds": 2,
                                       "group_backlog": 50, "dm_count": 4, "dm_backlog": 3, "history_conversations": 3,
                                       "history_rows": 120, "page_limit": 20, "show_progress": False},
                          tmp_path, config=cluster_config, html=False)
    folder = tmp_path / "cpu_cost"
    assert (folder / "cpu_cost.png").stat().st_size > 5_000 and (folder / "windows.csv").is_file()
    assert values["cpu_source"] == "proc" and values["nodes"] == 1 and values["rounds"] == 2
    assert values["cpu_precision"]["steps"] == 2 and values["cpu_precision"]["too_few_rounds"]
    assert "too few rounds for an interval" in values["cpu_precision"]["text"]
    for op in OPS:
        assert values[f"cpu_{op}_rate_achieved"] > 0 and values[f"cpu_{op}_errors"] == 0
        assert values[f"cpu_{op}_loadgen_ms_per_op"] > 0  # this process did the calls
        # 2 rounds: no interval (the median of 2 rounds and its bootstrap low would be one number)
        assert values[f"cpu_{op}_server_ms_per_op_ci_low"] is None is values[f"cpu_{op}_server_ms_per_op_ci_high"]
        assert values[f"cpu_{op}_loadgen_cpu_percent_of_core"] > 0  # the loader's CPU while it drove
        assert 0 <= values[f"cpu_{op}_loader_bound_windows"] <= 2
        assert values[f"cpu_{op}_requests_per_op"] >= 1
    assert values["cpu_batch_s1_dm_requests_per_op"] >= 4  # one read per DM partition (S-1 b), plus summaries
    assert values["server_requests_per_core_second"] is None or values["server_requests_per_core_second"] > 0
    capacity = run_notebook("capacity", {"b_row_bytes": 1200.0, "cpu_values": str(folder / "values.json"),
                                         "operations_per_message": {"send": 1.0, "history_latest": 2.0, "react": 0.3,
                                                                    "batch_s1_dm": 0.02}},
                            tmp_path, config=cluster_config, html=False)
    for tier in (20_000_000, 100_000_000, 500_000_000):
        assert capacity[f"nodes_cpu_{tier}"] >= 1 and capacity[f"nodes_disk_{tier}"] >= 1
        assert capacity[f"binding_{tier}"] in ("cpu", "disk")
    conclusion = json.loads((tmp_path / "capacity" / "values.json").read_text())["conclusion"]
    assert "CPU-bound nodes" in conclusion and "12.5K" in conclusion


VERDICTS = {"carried", "loader-bound", "machine-bound", "errors", "below the requested rate"}


def test_cpu_curve_notebook_and_the_nodes_priced_on_it(tmp_path, cluster_config):
    """The curve's points, each with a verdict, and the capacity notebook pricing each tier on the
    usable ones (never on a point that was not carried) beside the light-rate count."""
    values = run_notebook("cpu_curve", {"sends_per_second": [4.0, 12.0], "rounds": 2, "window_seconds": 1.5,
                                        "idle_seconds": 0.5, "history_conversations": 3, "history_rows": 120,
                                        "group_backlog": 50, "show_progress": False},
                          tmp_path, config=cluster_config, html=False)
    folder = tmp_path / "cpu_curve"
    assert (folder / "points.csv").is_file() and (folder / "windows.csv").is_file()
    curve = values["cpu_curve"]
    points = curve["points"]
    assert [p["sends_per_second"] for p in points] == [4.0, 12.0]
    assert values["shared_machine"] is True and curve["node_cores"] >= 1  # the embedded node runs here
    for p in points:
        assert p["verdict"] in VERDICTS
        assert p["achieved_sends_per_second"] > 0 and p["calls_per_second"] > p["achieved_sends_per_second"]
        assert p["node_cores_gross"] > 0 and p["loadgen_cores"] > 0
        assert p["server_ms_per_send_ci_low"] is None  # 2 rounds: too few for an interval
    usable = [p for p in points if p["verdict"] == "carried" and (p["server_ms_per_send"] or 0) > 0]
    assert values["usable_points"] == len(usable)
    capacity = run_notebook("capacity", {"b_row_bytes": 1200.0, "cpu_curve_values": str(folder / "values.json"),
                                         "cpu_values": None}, tmp_path, config=cluster_config, html=False)
    conclusion = json.loads((tmp_path / "capacity" / "values.json").read_text())["conclusion"]
    if not usable:  # a loaded machine: said, never priced
        assert "no usable point" in conclusion and "nodes_cpu_curve_20000000" not in capacity
        return
    assert capacity["cpu_curve_run"] == tmp_path.name and capacity["cpu_curve_from"] == "this run"
    costs = {p["server_ms_per_send"] for p in usable}
    for tier in (20_000_000, 100_000_000, 500_000_000):
        assert capacity[f"nodes_cpu_curve_{tier}"] >= 3  # at least RF
        assert capacity[f"curve_where_{tier}"] in ("measured", "interpolated", "above the measured range",
                                                  "below the measured range")
        if capacity[f"curve_where_{tier}"] != "interpolated":
            assert capacity[f"curve_ms_per_send_{tier}"] in costs  # a carried point's own cost, never another's
    assert "CPU side on the curve" in conclusion
