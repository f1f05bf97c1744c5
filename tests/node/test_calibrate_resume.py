"""Ctrl-C on `lab calibrate` and `lab calibrate --resume`, on the real node: a real SIGINT to the
command's process group (what a terminal's Ctrl-C sends) mid-notebook ends with one line naming
the notebook and the partial results' folder, the report says INTERRUPTED at the top, and
--resume runs the notebooks not yet finished into the same folder and writes one report."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.node

ROOT = Path(__file__).resolve().parents[2]
LAB = [sys.executable, "-m", "lab.cli"]
TINY_IN_LIMIT = {"partition_rows": 120, "in_sizes": [1, 10, 100], "min_rounds": 4, "max_rounds": 4, "probe_sizes": [],
                 "show_progress": False}
WAIT_SECONDS = 600


def _params() -> list[str]:
    return [f"--param=in_limit.{k}={json.dumps(v)}" for k, v in TINY_IN_LIMIT.items()]


def _calibration(results: Path) -> tuple[Path, dict] | None:
    for d in results.iterdir() if results.is_dir() else ():
        path = d / "calibration.json"
        if path.is_file():
            try:
                return d, json.loads(path.read_text())
            except ValueError:  # written atomically, but be safe
                return None
    return None


def _interrupt_mid_notebook(results: Path, home: Path) -> tuple[subprocess.CompletedProcess, Path]:
    """Start a calibration of in_limit then capacity; SIGINT its process group once in_limit's
    kernel runs cells (its executed notebook exists)."""
    proc = subprocess.Popen([*LAB, "calibrate", "--quick", "--no-preflight", "--no-progress",
                             "--notebooks", "in_limit,capacity", *_params(), "--results", str(results),
                             "--home", str(home)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            start_new_session=True,  # its own process group, as a terminal's foreground job
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + WAIT_SECONDS
    try:
        while time.monotonic() < deadline:
            found = _calibration(results)
            if found and (found[0] / "in_limit" / "in_limit.ipynb").is_file() and \
                    found[1]["notebooks"].get("in_limit", {}).get("status") == "running":
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.5)
        else:
            pytest.fail("in_limit never started")
        time.sleep(3)  # inside a cell
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=WAIT_SECONDS)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), found[0]


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory, cluster_config):
    results = tmp_path_factory.mktemp("results")
    proc, run_dir = _interrupt_mid_notebook(results, Path(cluster_config.lab_home))
    return proc, run_dir, results


def test_ctrl_c_ends_with_one_line_naming_the_notebook_and_the_folder(interrupted):
    proc, run_dir, _ = interrupted
    assert proc.returncode == 130, (proc.stdout, proc.stderr[-3000:])
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert "Traceback" not in proc.stderr and "Aborted!" not in proc.stderr and "KeyboardInterrupt" not in proc.stderr
    assert lines[-1] == (f"interrupted in notebook in_limit: partial results in {run_dir}; "
                         f"resume with: lab calibrate --resume {run_dir}"), proc.stderr
    assert len(lines) <= 2, proc.stderr  # the interrupted line (and at most the kernel's parting words)
    cal = json.loads((run_dir / "calibration.json").read_text())
    assert cal["status"] == "interrupted"
    assert cal["notebooks"]["in_limit"]["status"] == "interrupted"
    assert cal["notebooks"]["capacity"]["status"] == "not run"
    assert cal["environment"]["server"] and cal["measurements"]["round_trip"]


def test_the_report_says_interrupted_at_the_top(interrupted):
    _, run_dir, _ = interrupted
    html = (run_dir / "report.html").read_text()
    top = html[:html.index("<h2>")]
    assert "INTERRUPTED" in top and "in notebook <b>in_limit</b>" in top
    assert f"lab calibrate --resume {run_dir}" in top
    assert "completed here" not in html


def test_resume_runs_what_is_left_into_the_same_folder(interrupted, cluster_config):
    proc0, run_dir, results = interrupted
    before = set(results.iterdir())
    proc = subprocess.run([*LAB, "calibrate", "--resume", str(run_dir), "--no-preflight", "--no-progress",
                           "--home", str(cluster_config.lab_home)], capture_output=True, text=True, cwd=ROOT,
                          timeout=WAIT_SECONDS)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert set(results.iterdir()) == before  # no new run folder
    assert f"resuming run {run_dir.name}: in_limit, capacity" in proc.stdout + proc.stderr
    cal = json.loads((run_dir / "calibration.json").read_text())
    assert cal["status"] == "ok" and cal["mode"] == "quick"
    assert [n for n, nb in cal["notebooks"].items() if nb["status"] == "ok"] == ["in_limit", "capacity"]
    assert cal["notebooks"]["in_limit"]["parameters"]["in_sizes"] == TINY_IN_LIMIT["in_sizes"]
    assert len(cal["resumed"]) == 1 and cal["wall_seconds"] > 0
    assert cal["constants"]["batch_read_in_list_limit"]["notebook"] == "in_limit"
    html = (run_dir / "report.html").read_text()
    assert "INTERRUPTED" not in html and "resumed" in html
    # nothing left to resume
    again = subprocess.run([*LAB, "calibrate", "--resume", str(run_dir), "--no-preflight"], capture_output=True,
                           text=True, cwd=ROOT, timeout=120)
    assert again.returncode == 2 and "nothing to resume" in again.stderr and "Traceback" not in again.stderr


def test_resume_refuses_what_it_cannot_take(tmp_path):
    proc = subprocess.run([*LAB, "calibrate", "--resume", str(tmp_path)], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    assert proc.returncode == 2 and "no calibration.json" in proc.stderr
    proc = subprocess.run([*LAB, "calibrate", "--resume", str(tmp_path), "--notebooks", "b_row"], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and "--resume" in proc.stderr and "--notebooks" in proc.stderr
