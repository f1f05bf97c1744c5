"""`lab runs`: the runs of a results folder (kind, mode, server, constants) and one constant's
history across them, from the files runs write (no node)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab.calibration.recommendations import assess
from lab.cli import main
from lab.constants import read_entries
from lab.errors import ValidationError
from lab.comparison.catalog import constant_history, list_runs

B_ROW_VALUES = {"profile": "chat_mix", "repeats": 4, "rows_per_repeat": 2000}


def _b_row(value: float) -> dict:
    return {**B_ROW_VALUES, "b_row_bytes": value, "b_row_ci_low_bytes": value - 30, "b_row_ci_high_bytes": value + 30}


def _calibration(results: Path, run_id: str, *, started: str, mode: str, b_row: float, status: str = "ok") -> Path:
    run = results / run_id
    run.mkdir(parents=True)
    values = _b_row(b_row)
    constants = assess(read_entries(), {"b_row": {"values": values, "dir": run / "b_row"}}, run_dir=run, run_id=run_id,
                       quick=mode == "quick")
    cal = {"run_id": run_id, "mode": mode, "status": status, "started_at": started,
           "environment": {"server": "cassandra", "server_version": "5.0.9", "nodes": 1},
           "notebooks": {"b_row": {"status": "ok", "values": values}},
           "constants": {n: c.to_json() for n, c in constants.items()}}
    (run / "calibration.json").write_text(json.dumps(cal))
    return run


def _notebooks(results: Path, name: str, *, preset: str, b_row: float, mtime: float) -> Path:
    run = results / name
    (run / "b_row").mkdir(parents=True)
    path = run / "b_row" / "values.json"
    path.write_text(json.dumps({**_b_row(b_row), "preset": preset, "server": "cassandra"}))
    os.utime(path, (mtime, mtime))
    return run


def _load(results: Path, run_id: str, mtime: float) -> Path:
    run = results / run_id
    (run / "load").mkdir(parents=True)
    path = run / "load" / "summary.json"
    path.write_text(json.dumps({"run_id": run_id, "mode": "fixed-rate", "requested_rate": 50,
                                "parameters": {"environment": {"server": "cassandra", "server_version": "5.0.9",
                                                               "nodes": 1}}, "audit": {"ok": True}}))
    os.utime(path, (mtime, mtime))
    return run


@pytest.fixture
def results(tmp_path) -> Path:
    r = tmp_path / "results"
    _calibration(r, "20261201T100000Z-aaaaaa", started="2026-12-01T10:00:00+00:00", mode="quick", b_row=1230.0)
    _calibration(r, "20261201T120000Z-bbbbbb", started="2026-12-01T12:00:00+00:00", mode="full", b_row=1245.0)
    _notebooks(r, "my-product", preset="quick", b_row=1300.0, mtime=1764590400.0)  # 2025-12-01T12:00Z: oldest
    _load(r, "20261201T130000Z-cccccc", mtime=1764594000.0 + 365 * 86400)
    (r / "README.md").write_text("not a run")
    (r / "empty").mkdir()
    return r


def test_list_runs_kinds_modes_servers_constants_oldest_first(results):
    runs = list_runs(results)
    assert [r.run_id for r in runs] == ["my-product", "20261201T100000Z-aaaaaa", "20261201T120000Z-bbbbbb",
                                        "20261201T130000Z-cccccc"]
    named, quick, full, load = runs
    assert named.kind == "notebooks" and named.mode == "quick" and named.notebooks == ("b_row",)
    assert named.constants["b_row_bytes"].measured == 1300 and named.constants["b_row_bytes"].confidence == "low"
    assert quick.kind == "calibration" and quick.mode == "quick" and quick.server == "cassandra 5.0.9, 1 node"
    assert full.mode == "full" and full.constants["b_row_bytes"].confidence == "high"
    assert set(full.constants) == {"b_row_bytes"}  # only what was measured
    assert load.kind == "load" and load.mode == "fixed-rate" and load.server == "cassandra 5.0.9, 1 node"
    assert load.constants == {}


def test_constant_history_across_runs(results):
    points = constant_history(results, "b_row_bytes")
    assert [(p.run_id, p.mode, p.value.measured) for p in points] == [
        ("my-product", "quick", 1300), ("20261201T100000Z-aaaaaa", "quick", 1230),
        ("20261201T120000Z-bbbbbb", "full", 1245)]
    assert points[1].value.ci_low == 1200.0 and points[1].value.unit == "B"
    assert constant_history(results, "client_dedup_ttl_seconds") == []  # never measured
    with pytest.raises(ValidationError, match="no appendix-B constant 'b_row'"):
        constant_history(results, "b_row")


def test_lab_runs_lists_and_plots_a_constant(results, tmp_path):
    out = CliRunner().invoke(main, ["runs", "--results", str(results)])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[0].split()[:5] == ["run", "started", "kind", "mode", "status"]
    body = "\n".join(lines[1:])
    for run_id in ("my-product", "20261201T100000Z-aaaaaa", "20261201T120000Z-bbbbbb", "20261201T130000Z-cccccc"):
        assert run_id in body
    assert "b_row_bytes 1,245 B (high)" in body and "fixed-rate" in body
    assert body.index("my-product") < body.index("20261201T100000Z-aaaaaa")
    plot = tmp_path / "b_row.png"
    out = CliRunner().invoke(main, ["runs", "--results", str(results), "--constant", "b_row_bytes",
                                    "--plot", str(plot)])
    assert out.exit_code == 0, out.output
    assert "1,230 B" in out.output and "1,200 – 1,260" in out.output and "1,215 – 1,275" in out.output
    assert plot.is_file() and plot.stat().st_size > 5000
    data = json.loads(CliRunner().invoke(main, ["runs", "--results", str(results), "--constant", "b_row_bytes",
                                                "--json"]).output)
    assert [p["measured"] for p in data] == [1300, 1230, 1245]
    bad = CliRunner().invoke(main, ["runs", "--results", str(results), "--constant", "nope"])
    assert bad.exit_code == 2 and "no appendix-B constant 'nope'" in bad.output
