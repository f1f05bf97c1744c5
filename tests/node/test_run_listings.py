"""Listings say what a run was: `lab runs` (rate, verdict, processes, --kind) through the CLI."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_lab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lab.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)


def load_run(folder: Path, *, verdict: str, processes: int, requested: float, achieved: float) -> None:
    (folder / "load").mkdir(parents=True)
    (folder / "load" / "summary.json").write_text(json.dumps({
        "run_id": folder.name, "mode": "fixed-rate", "processes": processes, "requested_rate": requested,
        "achieved_rate": achieved, "operations": {"send": {"count": 100, "service_us": {"p50": 900.0}}}, "audit": {"ok": True},
        "verdict": {"verdict": verdict, "reasons": []}}))


def test_runs_shows_rate_verdict_and_processes_and_filters_by_kind(tmp_path):
    results = tmp_path / "results"
    load_run(results / "load-ok", verdict="valid", processes=2, requested=100.0, achieved=99.5)
    load_run(results / "load-bound", verdict="loader-bound", processes=1, requested=400.0, achieved=250.0)
    (results / "cal").mkdir()
    (results / "cal" / "calibration.json").write_text(json.dumps({
        "run_id": "cal", "mode": "quick", "status": "ok", "started_at": "2026-12-01T00:00:00+00:00"}))
    proc = run_lab("runs", "--results", str(results))
    assert proc.returncode == 0, proc.stderr
    lines = {line.split()[0]: line for line in proc.stdout.splitlines()[1:]}
    assert " loader-bound " in lines["load-bound"] and " ok " not in lines["load-bound"]
    assert "250/400" in lines["load-bound"] and "99.5/100" in lines["load-ok"]
    header = proc.stdout.splitlines()[0]
    assert "processes" in header and "rate" in header
    proc = run_lab("runs", "--kind", "load", "--results", str(results))
    assert proc.returncode == 0 and sorted(line.split()[0] for line in proc.stdout.splitlines()[1:]) == [
        "load-bound", "load-ok"]
    proc = run_lab("runs", "--kind", "calibration", "--json", "--results", str(results))
    assert [r["run_id"] for r in json.loads(proc.stdout)] == ["cal"]


def _cal(folder: Path, measured: float, services: dict) -> None:
    folder.mkdir(parents=True)
    constant = {"current": 600, "measured": measured, "recommended": measured, "unit": "B", "confidence": "high",
                "evidence": "x", "section": "B", "doc": "d", "guarded": False, "changed": True,
                "ci_low": measured - 5, "ci_high": measured + 5}
    (folder / "calibration.json").write_text(json.dumps({
        "run_id": folder.name, "mode": "full", "status": "ok", "started_at": "2026-12-01T00:00:00+00:00",
        "environment": {"server": "cassandra", "machine": {"hostname": "h", "cpus": 2},
                        "parameters": {"services": services}},
        "constants": {"b_row_bytes": constant}}))


def test_a_calibration_comparison_top_line_agrees_with_its_rows_and_names_the_setup(tmp_path):
    results = tmp_path / "results"
    _cal(results / "a", 400.0, {"outbox": "local", "hot_window": "off"})
    _cal(results / "b", 700.0, {"outbox": "kafka", "hot_window": "off"})
    proc = run_lab("compare", str(results / "a"), str(results / "b"), "--results", str(results))
    assert proc.returncode == 0, proc.stderr
    top = proc.stdout.split("\n\n")[0]
    verdict = next(line for line in top.splitlines() if line.startswith("verdict:"))
    assert "b_row_bytes (disagree)" in verdict and "no test could be made" not in verdict, verdict
    assert "driven differently: outbox: A local vs B kafka" in top, top
    row = next(line for line in proc.stdout.splitlines() if line.strip().startswith("b_row_bytes"))
    assert "disagree" in row


def test_a_load_comparison_names_the_process_counts(tmp_path):
    results = tmp_path / "results"
    load_run(results / "one", verdict="valid", processes=1, requested=100.0, achieved=100.0)
    load_run(results / "two", verdict="valid", processes=2, requested=100.0, achieved=100.0)
    proc = run_lab("compare", str(results / "one"), str(results / "two"), "--results", str(results))
    assert "driven differently: load processes: A 1 vs B 2" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
