"""`lab load --rtt`: a short run through the latency proxy, named in its summary and its
environment, whose every call paid the emulated round trip."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lab.results.jsonio import read_json
from lab.results.scratch import scratch_keyspace

pytestmark = pytest.mark.node

RTT_US = 2000


def test_a_load_run_through_the_proxy_names_its_round_trip(cluster_config, connection, tmp_path):
    with scratch_keyspace(connection, "loadrtt", create=False) as keyspace:
        proc = subprocess.run([sys.executable, "-m", "lab.cli", "load", "--rtt", "2ms", "--rate", "20",
                               "--duration", "3s", "--warmup", "1s", "--seed-size", "tiny",
                               "--results", str(tmp_path), "--allow-loader-bound"],
                              cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "LAB_KEYSPACE": keyspace})
    assert proc.returncode == 0, proc.stderr
    assert "an emulated round trip of 2 ms" in proc.stdout, proc.stdout
    run_dir = next(tmp_path.iterdir())
    summary = read_json(run_dir / "load" / "summary.json")
    assert summary["rtt_us"] == RTT_US
    assert summary["parameters"]["environment"]["cluster"]["rtt_us"] == RTT_US
    assert summary["proxy_cpu"]["samples"] >= 1  # the proxies were found beside the load processes
    assert "the proxies used" in proc.stdout, proc.stdout
    shutil.rmtree(Path(cluster_config.lab_home) / "load-state" / f"{run_dir.name}-load", ignore_errors=True)
