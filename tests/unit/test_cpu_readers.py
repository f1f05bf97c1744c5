"""Server CPU readers (lab.cluster.admin.server_cpu): /proc/<pid>/stat of the embedded JVM, Scylla's
per-shard reactor counter as its source names it (tests/fixtures/scylla/metrics.json: seastar
src/core/reactor.cc, the prefix from scylladb db/config.cc), deltas between readings."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from lab.cluster.admin.server_cpu import (REACTOR_BUSY_MS, REACTOR_UTILIZATION, CpuReading, cpu_seconds_between,
                                   parse_proc_stat, proc_cpu_seconds, reactor_readings)
from lab.cluster.admin.scylla import parse_prometheus
from lab.errors import AdminError

FIXTURE = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "scylla" / "metrics.json").read_text())


def test_the_metric_names_are_the_ones_scylla_exports():
    prefix = FIXTURE["prefix"]["default"]
    for name in (REACTOR_BUSY_MS, REACTOR_UTILIZATION):
        m = FIXTURE["metrics"][name]
        assert m["file"] == "src/core/reactor.cc" and name == f"{prefix}_{m['group']}_{m['name']}"
    assert FIXTURE["metrics"][REACTOR_BUSY_MS]["type"] == "counter"  # cumulative: a delta is CPU time


def test_reactor_readings_are_per_shard_seconds():
    readings = reactor_readings("10.0.0.1", parse_prometheus(FIXTURE["exposition_example"]))
    assert [(r.shard, r.cpu_seconds, r.utilization_percent) for r in readings] == [(0, 152.34, 41.5), (1, 98.711, 12.25)]
    assert all(r.source == "prometheus" and r.node == "10.0.0.1" for r in readings)
    with pytest.raises(AdminError, match="scylla_reactor_cpu_busy_ms"):
        reactor_readings("n", {"cassandra_something": 1.0})


def test_proc_stat_is_parsed_after_the_command_name():
    line = "4242 (java (weird) name) S 1 4242 4242 0 -1 4194560 90 0 0 0 1234 567 0 0 20 0 60 0 100 0"
    assert parse_proc_stat(line) == (1234, 567)
    with pytest.raises(AdminError):
        parse_proc_stat("garbage")


def test_proc_cpu_seconds_follow_this_process():
    before = proc_cpu_seconds(os.getpid())
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:  # burn 0.3 s of CPU
        pass
    spent = proc_cpu_seconds(os.getpid()) - before
    assert 0.2 <= spent <= 2.0
    with pytest.raises(AdminError):
        proc_cpu_seconds(2**22 + 12345)


def test_deltas_per_node_and_shard_refuse_a_restart():
    a = [CpuReading(node="n1", cpu_seconds=10.0, source="proc"),
         CpuReading(node="n2", shard=0, cpu_seconds=5.0, source="prometheus")]
    b = [CpuReading(node="n1", cpu_seconds=12.5, source="proc"),
         CpuReading(node="n2", shard=0, cpu_seconds=5.25, source="prometheus")]
    assert cpu_seconds_between(a, b) == {("n1", None): 2.5, ("n2", 0): 0.25}
    with pytest.raises(AdminError, match="restarted"):
        cpu_seconds_between(b, a)
