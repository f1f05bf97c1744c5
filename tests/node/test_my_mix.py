"""Pricing your own mix end to end through `lab calibrate --my-mix`, on the real node: b_row and
capacity in one run (the mix's node counts in the conclusion, the report's capacity table and
calibration.json, a footnote citing what ran), capacity alone finding the latest b_row run and
saying which, and capacity alone with nothing to price from failing instead of ending "ok"."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lab.project import PROJECT_DIR

pytestmark = pytest.mark.node

ROOT = Path(__file__).resolve().parents[2]
LAB = [sys.executable, "-m", "lab.cli"]
TINY_B_ROW = {"rows": 200, "min_repeats": 2, "max_repeats": 2, "partition_rows": 0, "compressions": ["lz4"],
              "fit_mixes": ["text_only", "text_long", "files_audio", "photos_small_thumbs"], "fit_rows": 120,
              "fit_repeats": 2, "show_progress": False}
EXAMPLE = PROJECT_DIR / "datasets" / "profiles" / "example_mix.toml"


def _calibrate(results: Path, home: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*LAB, "calibrate", "--quick", "--no-preflight", "--no-progress", "--results", str(results),
                           "--home", home, *args], capture_output=True, text=True, cwd=ROOT, timeout=900)


def _runs(results: Path) -> list[Path]:
    return sorted(d for d in results.iterdir() if (d / "calibration.json").is_file())


@pytest.fixture(scope="module")
def priced(tmp_path_factory, cluster_config):
    results = tmp_path_factory.mktemp("results")
    params = [f"--param=b_row.{k}={json.dumps(v)}" for k, v in TINY_B_ROW.items()]
    proc = _calibrate(results, str(cluster_config.lab_home), "--notebooks", "b_row,capacity", *params,
                      "--my-mix", "example_mix")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = _runs(results)
    return results, run, json.loads((run / "calibration.json").read_text()), proc


def test_the_example_mix_is_where_users_look():
    assert EXAMPLE.is_file()
    from lab.workload import load_profile

    assert load_profile("example_mix").name == "example_mix"


def test_the_mix_is_priced_in_calibration_json_and_the_conclusion(priced):
    _, run, cal, proc = priced
    mix = cal["my_mix"]
    assert mix["name"] == "example_mix" and mix["source"] == "datasets/profiles/example_mix.toml"
    assert mix["ci_low"] < mix["b_row_bytes"] < mix["ci_high"] and mix["confidence"] == "low"
    assert mix["row_model_run"] == run.name and mix["row_model_from"] == "this run"
    tiers = cal["notebooks"]["capacity"]["values"]
    for tier, nodes in mix["nodes_disk"].items():
        assert nodes == tiers[f"nodes_needed_my_mix_{tier}"] >= 1
    conclusion = cal["notebooks"]["capacity"]["conclusion"]
    assert "example_mix" in conclusion and f"**{mix['nodes_disk']['20000000']} nodes**" in conclusion
    assert "example_mix" in proc.stdout  # the console names the mix and its price


def test_the_report_capacity_table_has_the_mix_and_cites_what_ran(priced):
    _, run, cal, _ = priced
    html = (run / "report.html").read_text()
    section = html[html.index("<h2>Capacity"):html.index("<h2>Evidence")]
    assert "example_mix" in section and f"{cal['my_mix']['nodes_disk']['20000000']}" in section
    assert "cpu_cost notebook of this run" not in section  # cpu_cost did not run
    assert "no CPU costs" in section and f"b_row notebook of this run ({run.name})" in section


def test_capacity_alone_takes_the_latest_b_row_run_and_says_which(priced, cluster_config):
    results, first, _, _ = priced
    proc = _calibrate(results, str(cluster_config.lab_home), "--notebooks", "capacity", "--my-mix", str(EXAMPLE))
    assert proc.returncode == 0, proc.stderr[-3000:]
    second = _runs(results)[-1]
    cal = json.loads((second / "calibration.json").read_text())
    assert cal["my_mix"]["row_model_run"] == first.name
    assert "the latest b_row run" in cal["my_mix"]["row_model_from"]
    assert first.name in cal["notebooks"]["capacity"]["conclusion"]


def test_capacity_alone_with_nothing_to_price_from_fails(tmp_path, cluster_config):
    proc = _calibrate(tmp_path, str(cluster_config.lab_home), "--notebooks", "capacity", "--my-mix", "example_mix")
    assert proc.returncode == 2, proc.stdout
    assert "my_mix cannot be priced" in proc.stderr and "b_row" in proc.stderr
    (run,) = _runs(tmp_path)
    assert json.loads((run / "calibration.json").read_text())["status"] == "failed"


def test_an_unknown_mix_is_refused_before_anything_runs(tmp_path, cluster_config):
    proc = _calibrate(tmp_path, str(cluster_config.lab_home), "--notebooks", "capacity", "--my-mix", "no_such_mix")
    assert proc.returncode == 2 and "no workload profile 'no_such_mix'" in proc.stderr
    assert "datasets/profiles" in proc.stderr
    assert not any(tmp_path.iterdir())
