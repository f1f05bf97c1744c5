"""`lab load`: short headless Locust runs against the real node, whose summary must match what
the audit reads back (pacing, latency bookkeeping and the audit's core: tests/unit), with the
calls that have an asynchronous twin on the store's futures and the others in native threads.

Locust itself never runs inside pytest (importing it monkey-patches the process): the run
test goes through ``lab.load.runner.run_load``, which starts Locust as separate processes."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from lab.load.audit import read_acks
from lab.load.operation_cpu import FUTURE, THREAD
from lab.load.plan import SEED_SHAPES
from lab.load.runner import LoadOptions, run_load
from lab.measure.hdr import read_interval_log
from lab.results.jsonio import read_json
from lab.results.scratch import scratch_keyspace
from lab.store import MessageStore

pytestmark = pytest.mark.node

ROOT = Path(__file__).resolve().parents[2]


# ---- a real run (one of the module's runs side by side, below) ---------------------------------------
def _chat_run(cluster_config, connection, folder: Path):
    with scratch_keyspace(connection, "loadtest", create=False) as keyspace:
        return run_load(cluster_config.replace(keyspace=keyspace), LoadOptions(
            profile="chat", rate=30, duration_seconds=4, warmup_seconds=1, processes=2, seed_size="tiny",
            results=folder))


@pytest.fixture(scope="module")
def load_run(side_runs):
    return side_runs["chat"]


def test_load_run_loses_and_duplicates_nothing(load_run):
    audit = load_run.summary.audit
    assert audit.lost == 0 and audit.duplicates == 0 and audit.replay_mismatches == 0, audit.examples
    assert audit.ok


def test_summary_json_is_the_summary(load_run):
    """What summary.json holds is LoadSummary.to_json(), the form `lab compare` reads."""
    assert read_json(load_run.summary_path) == json.loads(json.dumps(load_run.summary.to_json()))


def test_summary_counts_match_the_audit(load_run):
    s, audit = load_run.summary.to_json(), load_run.summary.to_json()["audit"]
    acks = s["acks"]
    assert acks["measured"] > 0 and acks["seed"] == 2 * SEED_SHAPES["tiny"].sends
    assert audit["acked"] == acks["total_new"] == audit["found"]
    assert audit["acked_by_phase"].get("measured", 0) == acks["measured"]
    assert s["operations"]["send"]["ok"] == acks["measured"]
    assert audit["replays"] == acks["replayed"] >= s["operations"].get("send_retry", {}).get("ok", 0)
    assert s["workers_reporting"] == 2 and all(w["acks"] > 0 for w in s["workers"])
    assert {w["driver"] for w in s["workers"]} == {"native-threads"}  # lab load's default


def test_run_writes_every_artifact(load_run):
    d = load_run.load_dir
    for name in ("summary.json", "parameters.json", "audit.json", "cpu.csv", "locust.json", "locust_stats.csv",
                 "locust_stats_history.csv", "locust_failures.csv", "hdr/worker-0.hlog", "hdr/worker-1.hlog",
                 "acks/worker-0.csv", "acks/worker-1.csv"):
        assert (d / name).exists(), name
    s = load_run.summary.to_json()
    assert s["mode"] == "fixed-rate" and s["requested_rate"] == 30 and s["achieved_rate"] > 0
    assert s["achieved_over_requested"] == pytest.approx(s["achieved_rate"] / 30, rel=1e-3)
    assert s["loadgen_cpu"]["samples"] > 0
    send = s["operations"]["send"]
    for key in ("p50", "p90", "p99", "p999", "max"):
        assert send["service_us"][key] <= send["corrected_us"][key] * 1.01 + 1
    # the interval logs hold exactly the measured calls the totals hold
    logged = sum(iv.histogram.get_total_count() for p in sorted((d / "hdr").glob("*.hlog"))
                 for iv in read_interval_log(p) if iv.tag == "send.service")
    assert logged == send["count"]
    env = json.loads((d / "parameters.json").read_text())["environment"]
    assert env["cluster"]["password"] in (None, "***") and env["server"] and env["machine"]["cpus"] >= 1


# ---- the module's other runs, all five side by side ----------------------------------------------------
def _gevent_run(cluster_config, connection, folder: Path):
    with scratch_keyspace(connection, "loadtest", create=False) as keyspace:
        return run_load(cluster_config.replace(keyspace=keyspace), LoadOptions(
            profile="send_only", users=4, duration_seconds=2, seed_size="tiny", native_threads=False,
            results=folder))


def _thread_driver_run(cluster_config, connection, folder: Path):
    with scratch_keyspace(connection, "loadfut", create=False) as keyspace:
        return run_load(cluster_config.replace(keyspace=keyspace), LoadOptions(
            profile="read_only", users=4, duration_seconds=2, seed_size="tiny", processes=1, results=folder,
            store_futures=False))


def _cli_run(connection, folder: Path) -> subprocess.CompletedProcess:
    with scratch_keyspace(connection, "loadcli", create=False) as keyspace:
        return subprocess.run([sys.executable, "-m", "lab.cli", "load", "--rate", "20", "--duration", "3s",
                               "--warmup", "1s", "--seed-size", "tiny", "--results", str(folder),
                               "--allow-loader-bound"],  # the test reads the output, not the verdict
                              cwd=ROOT, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "LAB_KEYSPACE": keyspace})


def _interrupted_run(connection, folder: Path) -> subprocess.CompletedProcess:
    """A 5 min `lab load` sent SIGINT (by PID, as Ctrl-C) 3 s after it said it was ready."""
    err = folder / "stderr.txt"
    with scratch_keyspace(connection, "loadint", create=False) as keyspace:
        with open(err, "w") as f:
            proc = subprocess.Popen([sys.executable, "-m", "lab.cli", "load", "--users", "2", "--duration", "5m",
                                     "--seed-size", "tiny", "--results", str(folder / "results")],
                                    cwd=ROOT, stdout=subprocess.PIPE, stderr=f,
                                    text=True, env={**os.environ, "LAB_KEYSPACE": keyspace})
        try:
            deadline = time.monotonic() + 120
            while "ready in" not in err.read_text():
                assert proc.poll() is None and time.monotonic() < deadline, err.read_text()
                time.sleep(0.2)
            time.sleep(3)
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err.read_text())


@pytest.fixture(scope="module")
def side_runs(cluster_config, connection, tmp_path_factory) -> dict:
    """The chat run, the gevent driver's, the thread driver's, the CLI's and the interrupted one, at
    once (each in a keyspace of its own; run_load leaves signal handlers to the main thread): their
    tests read audits, drivers, call paths, artifacts, printed phases and exit codes, never a speed,
    so the five take about the longest one's time."""
    names = ("chat", "gevent", "threads", "cli", "interrupted")
    folders = {name: tmp_path_factory.mktemp(name) for name in names}
    with ThreadPoolExecutor(len(names)) as pool:
        futures = {"chat": pool.submit(_chat_run, cluster_config, connection, folders["chat"]),
                   "gevent": pool.submit(_gevent_run, cluster_config, connection, folders["gevent"]),
                   "threads": pool.submit(_thread_driver_run, cluster_config, connection, folders["threads"]),
                   "cli": pool.submit(_cli_run, connection, folders["cli"]),
                   "interrupted": pool.submit(_interrupted_run, connection, folders["interrupted"])}
        out = {name: f.result() for name, f in futures.items()}
    out["interrupted_results"] = folders["interrupted"] / "results"
    yield out
    for name in ("chat", "gevent", "threads"):
        shutil.rmtree(out[name].state_root, ignore_errors=True)
    for run_dir in [*folders["cli"].iterdir(), *out["interrupted_results"].iterdir()]:
        shutil.rmtree(Path(cluster_config.lab_home) / "load-state" / f"{run_dir.name}-load", ignore_errors=True)


def test_gevent_driver_mode_also_audits_clean(side_runs):
    """The fallback: patched Locust, store calls on the gevent loop (asyncore reactor)."""
    s = side_runs["gevent"].summary
    assert s.audit.ok and s.audit.acked == s.acks.total_new > 0
    assert [(w.driver, w.reactor) for w in s.workers] == [("gevent", "AsyncoreConnection")]


def test_workers_own_disjoint_key_ranges(load_run):
    d: Path = load_run.load_dir
    tenants = [{a.tenant_id for a in read_acks(d / "acks" / f"worker-{i}.csv")} for i in range(2)]
    assert len(tenants[0]) == len(tenants[1]) == 1 and not tenants[0] & tenants[1]


def test_the_cli_shows_phases_a_live_status_and_human_units(side_runs):
    """`lab load` as a user runs it: phases and a live status on stderr, the summary in ms with
    its labels on stdout (no raw µs integers)."""
    proc = side_runs["cli"]
    assert proc.returncode == 0, proc.stderr
    err, out = proc.stderr, proc.stdout
    for phase in ("connecting to cql://", f"seeding worker 0: {SEED_SHAPES['tiny'].sends} sends", "seeded worker 0 in", "starting Locust",
                  "ready in", "running 4 s (1 s warmup)", "audit: reading back"):
        assert phase in err, (phase, err)
    assert re.search(r"(starting|warmup|measured)\s+[\d.]+ s / 4.0 s\s+[\d,]+ (warmup )?calls", err), err
    assert "verdict: valid" in out or "verdict: LOADER-BOUND" in out or "verdict: MACHINE-BOUND" in out, out
    assert "corrected p50" in out and "coordinated omission corrected" in out and " ms" in out
    assert "seed (before Locust started)" in out and "audit ok:" in out
    assert not re.search(r"p50 \d{4,}|\bus$", out, re.M), out


def test_ctrl_c_stops_a_headless_run_with_a_summary_of_what_ran(side_runs):
    """SIGINT to `lab load` (by PID, as Ctrl-C): Locust is stopped gracefully (not killed), the
    summary covers the measured part that ran, the audit runs, the exit code is 130."""
    proc, results = side_runs["interrupted"], side_runs["interrupted_results"]
    assert proc.returncode == 130, proc.stderr
    s = read_json(next(results.iterdir()) / "load" / "summary.json")
    assert s["locust_exit_codes"] == [0] and s["workers_reporting"] == 1, s["locust_exit_codes"]
    assert 1 < s["measured_seconds"] < 60 and s["achieved_rate"] > 0  # the part that ran, not the 5 min planned
    assert s["audit"]["ok"] and s["audit"]["found"] == s["acks"]["total_new"] > s["acks"]["seed"]
    assert "interrupted: the summary covers the part that ran" in proc.stderr and "summary:" in proc.stdout


# ---- the store's futures (lab.load.locust.hub_wait): structure only, no speed asserted ---------------
# each Locust operation -> the store method whose twin it waits on (lab.load.locust.users)
METHOD = {"send": "send", "send_retry": "send", "history_latest": "history", "history_older": "history",
          "history_newer": "history", "backfill_s1_group": "batch_read", "backfill_s1_dms": "batch_read",
          "backfill_mix": "batch_read", "react": "react", "unreact": "unreact", "self_reaction": "self_reaction",
          "recall": "recall", "edit": "edit"}


def _expected_path(op: str) -> str:
    return FUTURE if callable(getattr(MessageStore, f"{METHOD[op]}_async", None)) else THREAD


def test_each_operation_ran_on_the_future_path_exactly_when_the_store_has_a_twin(load_run):
    """Every operation whose store method has an ``_async`` twin waited on the store's future (no
    native thread per call), the others ran in native threads; the audit above holds for both."""
    ran = set()
    for worker in load_run.summary.workers:
        paths = dict(worker.call_paths)
        assert paths == {op: _expected_path(op) for op in paths}
        ran |= set(paths)
    assert {"send", "history_latest"} <= ran  # the mix ran both kinds
    s = load_run.summary.to_json()
    history = [op for op in s["operations"] if op.startswith("history_")]
    assert history and all(s["operations"][op]["errors"] == 0 for op in history)


def test_loader_cpu_per_operation_is_measured_or_says_it_is_not(load_run):
    ops = load_run.summary.operation_cpu
    if not ops:  # too few calls finished in the window for a CPU per call: nothing reported, nothing wrong
        pytest.skip("the run's window was not steady enough for a CPU per call")
    assert ops["history_latest"].path == FUTURE and ops["history_latest"].caller_cpu_ms_per_call > 0
    # a future among several operations: no operation's share of the loop thread is known
    assert all(c.loader_cpu_ms_per_call is None for c in ops.values())
    assert load_run.summary.loader_cpu_ms_per_call > 0  # the whole run's figure stays measured


def test_the_thread_driver_keeps_every_call_in_a_native_thread(side_runs):
    result = side_runs["threads"]
    (worker,) = result.summary.workers
    assert worker.call_paths and set(worker.call_paths.values()) == {THREAD}
    assert result.summary.all_operations.count > 0 and result.summary.all_operations.errors == 0
    assert all(c.path == THREAD and c.loader_cpu_ms_per_call is not None
               for c in result.summary.operation_cpu.values())
