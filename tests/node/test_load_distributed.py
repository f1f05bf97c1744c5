"""`lab load --master` / `--worker`: one run over Locust's distributed mode, each worker a separate
`lab load --worker` process with a home and results folder of its own (a load machine), the
master on another loopback address (127.0.0.3: what a remote master looks like to a worker).
Results and the audit are collected on the master; each worker's keys never leave its home."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab.load.audit import read_acks
from lab.load.plan import SEED_SHAPES
from lab.load.processes import free_port, port_free
from lab.results.jsonio import read_json
from lab.results.scratch import scratch_keyspace
from lab.store import KEYSTORE_FILE

ROOT = Path(__file__).resolve().parents[2]
MASTER_HOST = "127.0.0.3"
WORKER_CLIENT_GC = {1: {"LAB_CLIENT_GC": "freeze"}, 2: {"LAB_CLIENT_GC": "default"}}  # each machine's own setting, recorded per worker


def _ports() -> int:
    for _ in range(20):
        port = free_port(MASTER_HOST)
        if port < 65535 and port_free(MASTER_HOST, port + 1):
            return port
    raise AssertionError("no two adjacent free ports")


def _lab(*args: str, env: dict[str, str], out: Path) -> subprocess.Popen:
    with open(out, "w") as f:
        return subprocess.Popen([sys.executable, "-m", "lab.cli", "load", *args], cwd=ROOT, env=env,
                                stdout=f, stderr=subprocess.STDOUT, text=True)


@pytest.fixture(scope="module")
def distributed_run(connection, tmp_path_factory, lab_home):
    base = tmp_path_factory.mktemp("distributed")
    port = _ports()
    with scratch_keyspace(connection, "loaddist", create=False) as keyspace:
        env = {**os.environ, "LAB_KEYSPACE": keyspace, "PYTHONUNBUFFERED": "1"}
        master = _lab("--master", "--expect-workers", "2", "--master-bind-host", MASTER_HOST, "--master-port",
                      str(port), "--rate", "20", "--duration", "4s", "--warmup", "1s", "--seed-size", "tiny",
                      "--allow-loader-bound", "--results", str(base / "master"), env=env, out=base / "master.txt")
        workers = [_lab("--worker", "--master-host", MASTER_HOST, "--master-port", str(port),
                        "--home", str(base / f"home{i}"), "--results", str(base / f"results{i}"),
                        env={**env, "LAB_HOME": str(base / f"home{i}"), **WORKER_CLIENT_GC[i]},
                        out=base / f"worker{i}.txt")
                   for i in (1, 2)]
        extra = None
        try:
            deadline = time.monotonic() + 180
            while "all 2 worker(s) ready" not in (base / "master.txt").read_text():
                assert master.poll() is None and time.monotonic() < deadline, (base / "master.txt").read_text()
                time.sleep(0.3)
            extra = subprocess.run([sys.executable, "-m", "lab.cli", "load", "--worker", "--master-host",
                                    MASTER_HOST, "--master-port", str(port), "--home", str(base / "home3"),
                                    "--results", str(base / "results3")],
                                   cwd=ROOT, env={**env, "LAB_HOME": str(base / "home3")}, capture_output=True,
                                   text=True, timeout=60)
            for p in (master, *workers):
                p.wait(timeout=300)
        finally:
            for p in (master, *workers):
                if p.poll() is None:
                    p.kill()
        text = {name: (base / f"{name}.txt").read_text() for name in ("master", "worker1", "worker2")}
        summary_path = Path(re.search(r"summary: (\S+)", text["master"]).group(1))
        yield {"base": base, "master": master, "workers": workers, "text": text, "extra": extra,
               "summary": read_json(summary_path), "load_dir": summary_path.parent}
    shutil.rmtree(lab_home / "load-state" / f"{summary_path.parent.parent.name}-load", ignore_errors=True)


def test_the_run_is_collected_on_the_master(distributed_run):
    r = distributed_run
    assert r["master"].returncode == 0, r["text"]["master"]
    assert [w.returncode for w in r["workers"]] == [0, 0], r["text"]
    s = r["summary"]
    assert s["processes"] == s["workers_expected"] == s["workers_reporting"] == 2
    assert s["mode"] == "fixed-rate" and s["requested_rate"] == 20 and s["achieved_rate"] > 0
    assert s["acks"]["seed"] == 2 * SEED_SHAPES["tiny"].sends and s["acks"]["measured"] > 0
    assert s["audit"]["ok"] and s["audit"]["acked"] == s["acks"]["total_new"] == s["audit"]["found"]
    assert s["operations"]["send"]["ok"] == s["acks"]["measured"]
    for w in s["workers"]:
        assert w["acks"] > 0 and w["machine"]["host"] and abs(w["machine"]["clock_offset_seconds"]) < 1
        assert w["machine"]["loadgen_cpu"]["samples"] > 0
        assert w["machine"]["services"]["outbox"] == "local"
    # each worker records the client_gc its own processes applied (the master cannot see it)
    assert sorted(w["machine"]["services"]["client_gc"] for w in s["workers"]) == ["default", "freeze"]
    for name in ("hdr/worker-0.hlog", "hdr/worker-1.hlog", "acks/worker-0.csv", "acks/worker-1.csv",
                 "totals/worker-0.json", "totals/worker-1.json", "locust-worker-0.log", "audit.json",
                 "locust_stats_history.csv"):
        assert (r["load_dir"] / name).exists(), name
    params = read_json(r["load_dir"] / "parameters.json")
    assert params["distributed"]["master"].startswith(MASTER_HOST) and "password" not in str(params["distributed"])


def test_each_worker_owns_a_key_range_and_keeps_its_keys(distributed_run, lab_home):
    r = distributed_run
    tenants = [{a.tenant_id for a in read_acks(r["load_dir"] / "acks" / f"worker-{i}.csv")} for i in (0, 1)]
    assert len(tenants[0]) == len(tenants[1]) == 1 and not tenants[0] & tenants[1]
    run_id = r["load_dir"].parent.name
    homes = []
    for i in (1, 2):  # each worker's store state (its DEKs) is under its own home only
        states = list((r["base"] / f"home{i}" / "load-state" / f"{run_id}-load").glob("worker-*"))
        assert len(states) == 1 and (states[0] / KEYSTORE_FILE).exists()
        homes.append(states[0].name)
        assert list((r["base"] / f"results{i}" / run_id).glob("load-worker-*/acks/*.csv"))
    assert sorted(homes) == ["worker-0", "worker-1"]
    assert not list((lab_home / "load-state" / f"{run_id}-load").glob("worker-*")), "the master holds no keys"
    assert "reading back this worker's acknowledged sends" in r["text"]["worker1"]


def test_a_worker_beyond_the_expected_count_is_refused(distributed_run):
    extra = distributed_run["extra"]
    assert extra.returncode == 2 and "expects 2 worker(s) and all have joined" in extra.stderr, extra.stderr
    assert "Traceback" not in extra.stderr
