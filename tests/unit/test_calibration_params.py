"""`lab calibrate` refuses an unknown notebook or a misspelt notebook parameter before it makes a
run folder (no node: the refusal comes first)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lab.calibration.calibrate import CalibrationOptions, plan
from lab.errors import CalibrationError

ROOT = Path(__file__).resolve().parents[2]
LAB = [sys.executable, "-m", "lab.cli"]


@pytest.mark.spawns
def test_a_misspelt_parameter_is_refused_before_a_run_folder_exists(tmp_path):
    # papermill would inject it and the notebook would silently ignore it
    proc = subprocess.run([*LAB, "calibrate", "--notebooks", "capacity", "-p", "capacity.tierz=[1]",
                           "--results", str(tmp_path)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2
    assert "notebook capacity has no parameter tierz" in proc.stderr and "tiers" in proc.stderr
    assert not any(tmp_path.iterdir())


def test_unknown_or_unselected_notebooks_are_refused():
    with pytest.raises(CalibrationError, match="no_such"):
        plan(CalibrationOptions(notebooks=("no_such",)), None)
    with pytest.raises(CalibrationError, match="in_limit"):
        plan(CalibrationOptions(notebooks=("capacity",), overrides={"in_limit": {"repeats": 1}}), None)


def test_the_plan_passes_this_runs_b_row_and_cpu_costs_to_capacity(tmp_path):
    suite = dict(plan(CalibrationOptions(notebooks=("b_row", "cpu_cost", "capacity")), tmp_path))
    assert suite["capacity"]["b_row_values"] == str((tmp_path / "b_row" / "values.json").resolve())
    assert suite["capacity"]["cpu_values"] == str((tmp_path / "cpu_cost" / "values.json").resolve())
    assert suite["b_row"]["rows"] > 0  # the quick parameters
    assert "cpu_values" not in dict(plan(CalibrationOptions(notebooks=("b_row", "capacity")), tmp_path))["capacity"]


def test_a_notebook_whose_input_of_this_run_failed_is_not_run_and_says_which(tmp_path):
    """--keep-going after b_row failed: capacity would only fail on b_row's missing values.json,
    so it is not run and names b_row; another run's values given by hand never block it."""
    from lab.calibration.calibrate import _not_run_for
    from lab.calibration.notebooks import failed_inputs
    from lab.calibration.report import render

    suite = dict(plan(CalibrationOptions(notebooks=("b_row", "cpu_cost", "capacity", "model_check")), tmp_path))
    assert failed_inputs("capacity", suite["capacity"], tmp_path, {"b_row": "failed", "cpu_cost": "ok"}) == ["b_row"]
    assert failed_inputs("capacity", suite["capacity"], tmp_path,
                         {"b_row": "ok", "cpu_cost": "not run"}) == ["cpu_cost"]
    assert failed_inputs("capacity", suite["capacity"], tmp_path, {"b_row": "ok", "cpu_cost": "ok"}) == []
    assert failed_inputs("b_row", suite["b_row"], tmp_path, {}) == []  # reads no other notebook
    elsewhere = {**suite["capacity"], "b_row_values": str(tmp_path / "other-run" / "b_row" / "values.json")}
    assert failed_inputs("capacity", elsewhere, tmp_path, {"b_row": "failed", "cpu_cost": "ok"}) == []
    entry = _not_run_for("capacity", suite["capacity"], ["b_row"])
    assert entry.status == "not run" and "reads the values of b_row of this run" in entry.error.evalue
    html = render({"status": "failed", "mode": "quick", "notebooks": {"capacity": entry.to_json()}}, tmp_path)
    assert "capacity not run: it reads the values of b_row" in html and "failed in cell" not in html


def test_every_parameter_line_of_every_notebook_is_one_papermill_can_read():
    """papermill skips a parameters line it cannot parse (e.g. '<=' in its comment) and
    `lab calibrate -p` then refuses that parameter as unknown."""
    import re

    import nbformat
    import papermill as pm

    from lab.calibration.notebooks import notebook_path
    from lab.calibration.presets import QUICK_PARAMETERS
    from lab.calibration.registry import NOTEBOOKS

    for name in NOTEBOOKS:
        path = notebook_path(name)
        cell = next(c for c in nbformat.read(path, as_version=4).cells if "parameters" in c.metadata.get("tags", []))
        assigned = set(re.findall(r"^(\w+)\s*=", cell.source, re.M))
        assert assigned == set(pm.inspect_notebook(str(path))), name
        assert set(QUICK_PARAMETERS.get(name, {})) <= assigned, name


def test_a_resumed_run_takes_the_services_it_recorded_with_todays_passwords():
    """--resume runs the rest of a run on the outbox and hot window it started with (recorded in
    calibration.json without secrets); the passwords come from LAB_* / the file at resume time."""
    from lab.calibration.calibrate import _run_services
    from lab.calibration.notebooks import services_parameter
    from lab.cluster.services import ServicesConfig

    original = ServicesConfig(outbox="kafka", hot_window="redis", redis_port=16379, redis_password="s3cret")
    recorded = services_parameter(original)
    assert "redis_password" not in recorded
    today = ServicesConfig(redis_password="s3cret")  # LAB_REDIS_PASSWORD, no --outbox / --hot-window given
    assert _run_services(recorded, today) == original
    assert _run_services(None, today) is today  # a run that recorded none: today's settings


def _calibrate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*LAB, "calibrate", *args], capture_output=True, text=True, cwd=ROOT, timeout=120)


@pytest.mark.spawns
def test_resume_refuses_what_it_cannot_take(tmp_path):
    proc = _calibrate("--resume", str(tmp_path))
    assert proc.returncode == 2 and "no calibration.json" in proc.stderr
    (tmp_path / "calibration.json").write_text("{}")
    for flag in (["--notebooks", "b_row"], ["--outbox", "kafka"]):  # the run's own notebooks and services
        proc = _calibrate("--resume", str(tmp_path), *flag)
        assert proc.returncode == 2 and "--resume" in proc.stderr and flag[0] in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr


@pytest.mark.spawns
def test_a_mix_is_refused_before_anything_runs_when_it_is_unknown_or_nothing_can_price_it(tmp_path):
    proc = _calibrate("--notebooks", "capacity", "--my-mix", "no_such_mix", "--results", str(tmp_path))
    assert proc.returncode == 2 and "no workload profile 'no_such_mix'" in proc.stderr
    assert "datasets/profiles" in proc.stderr
    # capacity alone with no b_row run in the results folder: nothing to price the mix from
    proc = _calibrate("--notebooks", "capacity", "--my-mix", "example_mix", "--results", str(tmp_path))
    assert proc.returncode == 2 and "my_mix cannot be priced" in proc.stderr and "b_row" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not any(tmp_path.iterdir())
