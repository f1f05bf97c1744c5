"""SIGTERM stops `lab calibrate` as Ctrl-C does: one line, the run marked interrupted and
resumable, no traceback, and no kernel socket left in the working folder."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.node


def test_sigterm_marks_the_run_interrupted_and_resume_finishes_it(tmp_path, cluster_config):
    results, cwd = tmp_path / "results", tmp_path / "cwd"
    results.mkdir()
    cwd.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "lab.cli", "calibrate", "--quick", "--no-preflight",
                             "--no-progress", "--notebooks", "capacity", "-p", "capacity.b_row_bytes=600",
                             "--results", str(results), "--home", str(cluster_config.lab_home)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env=env)
    found, deadline = None, time.monotonic() + 600
    try:
        while found is None and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            for cal_path in results.glob("*/calibration.json"):
                try:
                    cal = json.loads(cal_path.read_text())
                except (OSError, ValueError):
                    continue
                if (cal.get("notebooks") or {}).get("capacity", {}).get("status") == "running":
                    found = cal_path.parent
            time.sleep(0.05)
        assert found is not None, "capacity never started"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, (out, err[-3000:])
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert lines == [f"stopped by SIGTERM in notebook capacity: partial results in {found}; "
                     f"resume with: lab calibrate --resume {found}"], err
    cal = json.loads((found / "calibration.json").read_text())
    assert cal["status"] == "interrupted" and cal["notebooks"]["capacity"]["status"] == "interrupted"
    assert list(cwd.iterdir()) == []  # no kernel-ipc-N files where the user ran it
    resumed = subprocess.run([sys.executable, "-m", "lab.cli", "calibrate", "--resume", str(found), "--no-preflight",
                              "--no-progress", "--home", str(cluster_config.lab_home)], capture_output=True,
                             text=True, cwd=cwd, env=env, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert json.loads((found / "calibration.json").read_text())["status"] == "ok"
    assert list(cwd.iterdir()) == []
