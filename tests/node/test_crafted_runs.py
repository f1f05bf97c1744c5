"""Crafted run folders through the real CLI (subprocess): a colleague's run or a CI artefact is
input. Every bad file gets one line naming the file (and field), exit 2, no traceback, and
nothing is written or deleted outside the results folder."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAB = [sys.executable, "-m", "lab.cli"]


def run_lab(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([*LAB, *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def calibration(run_id: str, **extra) -> dict:
    return {"schema_version": 1, "run_id": run_id, "mode": "full", "status": "ok",
            "started_at": "2026-12-01T00:00:00+00:00", "environment": {}, "notebooks": {}, "constants": {}, **extra}


def write_run(folder: Path, cal: dict | str | None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if cal is not None:
        (folder / "calibration.json").write_text(cal if isinstance(cal, str) else json.dumps(cal))
    return folder


def one_error_line(proc: subprocess.CompletedProcess, *names: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    for name in names:
        assert name in errors[0], errors[0]
    return errors[0]


BAD_JSON = "{\"run_id\": \"x\", "
HUGE_NUMBER = "{\"run_id\": \"r\", \"mode\": \"full\", \"status\": \"ok\", \"started_at\": \"t\", \"wall_seconds\": " \
              + "9" * 5001 + "}"
CRAFTED = {
    "bad_json": BAD_JSON,
    "huge_number": HUGE_NUMBER,
    "not_an_object": "[1, 2, 3]",
    "wrong_type": json.dumps(calibration("r", notebooks=[1, 2])),
    "constant_wrong_type": json.dumps(calibration("r", constants={"b_row_bytes": {"current": "six hundred"}})),
    "notebook_not_an_object": json.dumps(calibration("r", notebooks={"b_row": 5})),
    "nan": "{\"run_id\": \"r\", \"mode\": \"full\", \"status\": \"ok\", \"started_at\": \"t\", \"wall_seconds\": NaN}",
}


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_compare_refuses_a_crafted_calibration_json_in_one_line(tmp_path, case):
    a = write_run(tmp_path / "results" / "a", calibration("a"))
    b = write_run(tmp_path / "results" / "b", CRAFTED[case])
    proc = run_lab("compare", str(a), str(b), "--results", str(tmp_path / "results"))
    one_error_line(proc, "BadRunFile", "calibration.json")
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["a", "b"]  # nothing written


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_propose_from_refuses_a_crafted_calibration_json_in_one_line(tmp_path, case):
    run = write_run(tmp_path / "results" / "r", CRAFTED[case])
    before = sorted(p.name for p in run.iterdir())
    proc = run_lab("calibrate", "--propose-from", str(run), "--allow-quick")
    one_error_line(proc, "BadRunFile", "calibration.json")
    assert sorted(p.name for p in run.iterdir()) == before


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_runs_lists_the_good_runs_and_names_the_bad_one(tmp_path, case):
    results = tmp_path / "results"
    write_run(results / "good", calibration("good"))
    write_run(results / "bad", CRAFTED[case])
    proc = run_lab("runs", "--results", str(results))
    one_error_line(proc, "BadRunFile", str(results / "bad" / "calibration.json"))
    assert "good" in proc.stdout


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_resume_refuses_a_crafted_calibration_json_in_one_line(tmp_path, case):
    run = write_run(tmp_path / "results" / "r", CRAFTED[case])
    proc = run_lab("calibrate", "--resume", str(run), "--no-preflight", "--no-progress")
    one_error_line(proc, "BadRunFile", "calibration.json")


def test_load_summary_and_values_json_are_checked_too(tmp_path):
    results = tmp_path / "results"
    load = write_run(results / "load-a", None) / "load"
    load.mkdir()
    (load / "summary.json").write_text(json.dumps({"operations": {"send": {"count": "many"}}}))
    nb = write_run(results / "nb-b", None) / "b_row"
    nb.mkdir()
    (nb / "values.json").write_text("{\"b_row_bytes\": ")
    proc = run_lab("compare", str(results / "load-a"), str(results / "nb-b"), "--results", str(results))
    one_error_line(proc, "BadRunFile", "summary.json", "operations.send.count")
    proc = run_lab("compare", str(results / "nb-b"), str(results / "nb-b"), "--results", str(results))
    one_error_line(proc, "BadRunFile", "values.json")


@pytest.mark.parametrize("name", ["../victim", "ABSOLUTE/victim", "b_row/../../victim"])
def test_resume_never_deletes_outside_the_run_folder(tmp_path, name):
    """A notebook name that is a path (absolute, or with ``..``) used to pass the notebook check
    (``<name>.ipynb`` beside the victim) and resume removed the victim folder."""
    outside = tmp_path / "outside"
    victim = outside / "victim"
    victim.mkdir(parents=True)
    (victim / "precious.txt").write_text("keep me")
    shutil.copy(ROOT / "notebooks" / "in_limit.ipynb", outside / "victim.ipynb")
    name = name.replace("ABSOLUTE", str(outside))
    run = write_run(tmp_path / "results" / "r", calibration("r", status="interrupted", notebooks={
        name: {"status": "failed", "parameters": {}}}))
    proc = run_lab("calibrate", "--resume", str(run), "--no-preflight", "--no-progress")
    one_error_line(proc, "BadRunFile", "notebooks")
    assert (victim / "precious.txt").read_text() == "keep me"


@pytest.mark.parametrize("run_id", ["../../../escaped", "/tmp/escaped-abs", "a/../../b"])
def test_compare_never_writes_outside_results(tmp_path, run_id):
    results = tmp_path / "deep" / "er" / "results"
    a = write_run(results / "a", calibration("a"))
    b = write_run(results / "b", calibration(run_id))
    proc = run_lab("compare", str(a), str(b), "--results", str(results))
    one_error_line(proc, "BadRunFile", "run_id")
    assert sorted(p.name for p in results.iterdir()) == ["a", "b"]
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["calibration.json", "calibration.json"]


def test_compare_of_plain_runs_still_writes_its_page_under_results(tmp_path):
    results = tmp_path / "results"
    a = write_run(results / "a", calibration("a"))
    b = write_run(results / "b", calibration("b"))
    proc = run_lab("compare", str(a), str(b), "--results", str(results))
    assert proc.returncode == 0, proc.stderr
    assert (results / "compare-a-b" / "index.html").is_file()


@pytest.mark.parametrize("mix, words", [
    ("../../pyproject", ["not a profile name"]),
    ("NOSIZES", ["sizes"]),
    ("NONAME", ["name"]),
    ("SHARE", ["e2ee_direct_share", "[0, 1]"]),
])
def test_my_mix_is_checked_before_anything_runs(tmp_path, mix, words):
    bodies = {"NOSIZES": 'name = "m"\nsizes = 5\n', "NONAME": "[messages]\ntext = 1.0\n",
              "SHARE": 'name = "m"\n[conversations]\ne2ee_direct_share = 1.5\n'}
    if mix in bodies:
        (tmp_path / "mix.toml").write_text(bodies[mix])
        mix = str(tmp_path / "mix.toml")
    proc = run_lab("calibrate", "--quick", "--notebooks", "b_row,capacity", "--my-mix", mix, "--no-preflight",
                   "--results", str(tmp_path / "results"))
    one_error_line(proc, "ConfigError", *words)
    assert not (tmp_path / "results").exists()
