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
                          tmp_path, config=cluster_config)
    folder = tmp_path / "cpu_cost"
    assert (folder / "cpu_cost.png").stat().st_size > 5_000 and (folder / "windows.csv").is_file()
    assert values["cpu_source"] == "proc" and values["nodes"] == 1 and values["rounds"] == 2
    assert values["cpu_precision"]["steps"] == 2 and values["cpu_precision"]["too_few_rounds"]
    assert "too few rounds for an interval" in values["cpu_precision"]["text"]
    for op in OPS:
        assert values[f"cpu_{op}_rate_achieved"] > 0 and values[f"cpu_{op}_errors"] == 0
        assert values[f"cpu_{op}_loadgen_ms_per_op"] > 0  # this process did the calls
        # 2 rounds: no interval (issue 22: the median of 2 rounds and its bootstrap low were one number)
        assert values[f"cpu_{op}_server_ms_per_op_ci_low"] is None is values[f"cpu_{op}_server_ms_per_op_ci_high"]
        assert values[f"cpu_{op}_loadgen_cpu_percent_of_core"] > 0  # the loader's CPU while it drove
        assert 0 <= values[f"cpu_{op}_loader_bound_windows"] <= 2
        assert values[f"cpu_{op}_requests_per_op"] >= 1
    assert values["cpu_batch_s1_dm_requests_per_op"] >= 4  # one read per DM partition (S-1 b), plus summaries
    assert values["server_requests_per_core_second"] is None or values["server_requests_per_core_second"] > 0
    capacity = run_notebook("capacity", {"b_row_bytes": 1200.0, "cpu_values": str(folder / "values.json"),
                                         "operations_per_message": {"send": 1.0, "history_latest": 2.0, "react": 0.3,
                                                                    "batch_s1_dm": 0.02}},
                            tmp_path, config=cluster_config)
    for tier in (20_000_000, 100_000_000, 500_000_000):
        assert capacity[f"nodes_cpu_{tier}"] >= 1 and capacity[f"nodes_disk_{tier}"] >= 1
        assert capacity[f"binding_{tier}"] in ("cpu", "disk")
    conclusion = json.loads((tmp_path / "capacity" / "values.json").read_text())["conclusion"]
    assert "CPU-bound nodes" in conclusion and "12.5K" in conclusion
