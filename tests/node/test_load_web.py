"""`lab load --web`: Locust's web UI from one command, driven over its own HTTP API, stopped by
PID like Ctrl-C; then the same summary.json and audit as a headless run. And `--run-id`: a
second load of the same run reuses the first one's seed, key ranges and history."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from lab.load.plan import SEED_SHAPES
from lab.load.processes import free_port
from lab.results.jsonio import read_json
from lab.results.scratch import scratch_keyspace

ROOT = Path(__file__).resolve().parents[2]
URL_LINE = re.compile(r"web UI: (http://[0-9.]+:\d+)")
RUN_ID = "webtest"


def _env(keyspace: str) -> dict[str, str]:
    return {**os.environ, "LAB_KEYSPACE": keyspace, "PYTHONUNBUFFERED": "1"}


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read()


def _post(url: str, form: dict[str, str]) -> dict:
    data = urllib.parse.urlencode(form).encode()
    with urllib.request.urlopen(urllib.request.Request(url, data=data, method="POST"), timeout=10) as r:
        return json.loads(r.read())


def _wait_for_url(proc: subprocess.Popen, err_path: Path, timeout: float = 180) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        match = URL_LINE.search(err_path.read_text())
        if match:
            return match.group(1)
        assert proc.poll() is None, err_path.read_text()
        time.sleep(0.3)
    raise AssertionError(f"no web UI line in {timeout} s:\n{err_path.read_text()}")


@pytest.fixture(scope="module")
def web_run(connection, tmp_path_factory, lab_home):
    """One `lab load --web` session: started, driven for a few seconds, stopped by SIGINT."""
    results = tmp_path_factory.mktemp("results")
    err_path = results / "stderr.txt"
    port = free_port()
    with scratch_keyspace(connection, "loadweb", create=False) as keyspace:
        cmd = [sys.executable, "-m", "lab.cli", "load", "--web", "--users", "3", "--seed-size", "tiny",
               "--allow-loader-bound", "--web-port", str(port), "--run-id", RUN_ID, "--results", str(results)]
        with open(err_path, "w") as err:
            proc = subprocess.Popen(cmd, cwd=ROOT, env=_env(keyspace), stdout=subprocess.PIPE, stderr=err, text=True)
        try:
            url = _wait_for_url(proc, err_path)
            page = _get(url + "/").decode()
            refused = True
            with socket.socket() as s:  # bound to loopback 127.0.0.1 only
                s.settimeout(2)
                refused = s.connect_ex(("127.0.0.2", port)) != 0
            started = _post(url + "/swarm", {"user_count": "3", "spawn_rate": "3"})
            stats: dict = {}
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                time.sleep(1)
                stats = json.loads(_get(url + "/stats/requests"))
                total = next((s for s in stats["stats"] if s["name"] == "Aggregated"), {"num_requests": 0})
                if stats["state"] == "running" and total["num_requests"] >= 30:
                    break
            proc.send_signal(signal.SIGINT)  # Ctrl-C, by PID
            out, _ = proc.communicate(timeout=180)
        finally:
            if proc.poll() is None:
                proc.kill()
        yield {"proc": proc, "out": out, "err": err_path.read_text(), "page": page, "refused": refused,
               "started": started, "stats": stats, "url": url, "results": results, "keyspace": keyspace,
               "env": _env(keyspace)}
    shutil.rmtree(lab_home / "load-state" / RUN_ID, ignore_errors=True)


def test_the_ui_comes_up_with_the_plan(web_run):
    page = web_run["page"]
    assert re.search(r'"num_users":\s*3\b', page), "the plan's users are the form default"
    assert f'"host": "cql://127.0.0.1:9042/{web_run["keyspace"]}"' in page
    assert web_run["url"].startswith("http://127.0.0.1:") and web_run["refused"], "listens on 127.0.0.1 only"
    assert web_run["started"]["success"] and web_run["stats"]["state"] == "running"
    names = {s["name"] for s in web_run["stats"]["stats"]}
    assert {"send", "history_latest"} <= names, names


def test_quitting_writes_the_summary_and_the_audit(web_run):
    assert web_run["proc"].returncode == 0, web_run["err"]
    load_dir = web_run["results"] / RUN_ID / "load"
    s = read_json(load_dir / "summary.json")
    assert s["mode"] == "closed-loop" and s["users"] == 3 and s["measured_seconds"] > 0
    assert s["acks"]["seed"] == SEED_SHAPES["tiny"].sends, "the worker was seeded before the UI came up"
    assert s["acks"]["measured"] > 0 and s["operations"]["send"]["ok"] == s["acks"]["measured"]
    assert s["audit"]["ok"] and s["audit"]["acked"] == s["acks"]["total_new"] == s["audit"]["found"]
    assert s["operations"]["send"]["errors"] == 0, "quitting stops the users before the stores close"
    assert (load_dir / "audit.json").exists() and (load_dir / "locust_stats_history.csv").exists()
    assert "summary:" in web_run["out"] and "audit ok:" in web_run["out"]
    assert read_json(load_dir / "parameters.json")["web_url"] == web_run["url"]
    # the quit summary ends with the verdict, as a headless run's does
    assert s["verdict"]["verdict"] in ("valid", "loader-bound", "machine-bound") and "loader_cpu_percent_of_core" in s["verdict"]
    assert re.search(r"^verdict: (valid|LOADER-BOUND|MACHINE-BOUND)", web_run["out"], re.M), web_run["out"]


def test_a_second_load_of_the_run_id_reuses_its_seed_and_history(web_run):
    proc = subprocess.run([sys.executable, "-m", "lab.cli", "load", "--users", "2", "--duration", "2s",
                           "--seed-size", "tiny", "--allow-loader-bound", "--run-id", RUN_ID, "--results", str(web_run["results"])],
                          cwd=ROOT, env=web_run["env"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    first = read_json(web_run["results"] / RUN_ID / "load" / "summary.json")
    second = read_json(web_run["results"] / RUN_ID / "load-2" / "summary.json")
    assert "reusing run webtest" in proc.stderr and "seeding worker" not in proc.stderr
    assert second["acks"]["seed"] == 0 and second["acks"]["prior"] == first["acks"]["total_new"]
    assert second["audit"]["ok"] and second["audit"]["found"] == second["acks"]["total_new"]
    assert second["audit"]["acked_by_phase"]["prior"] == first["acks"]["total_new"]
