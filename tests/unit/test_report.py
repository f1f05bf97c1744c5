"""report.html leads with decisions (no node): quick banner with the full-run command and its
duration, one line per constant (keep/change, precision, agreement, TB and nodes), the
confidence legend, caveats beside the recommendation, Markdown conclusions, evidence tables,
figures that open full size, readable numbers."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from lab.calibration.agreement import agreement
from lab.calibration.decisions import caveats, decision, impact, precision_text
from lab.calibration.recommendations import CONFIDENCE_LEGEND, assess
from lab.calibration.report import render
from lab.constants import read_entries


def _png(path: Path) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (1400, 500), (31, 119, 180)).save(path)


def _run(tmp_path: Path, *, quick: bool, b_row: float = 1235.0, in_limit: int = 300) -> dict:
    for nb in ("b_row", "in_limit"):
        _png(tmp_path / nb / f"{nb}.png")
    values = {"b_row": {"b_row_bytes": b_row, "b_row_ci_low_bytes": b_row - 20, "b_row_ci_high_bytes": b_row + 20,
                        "profile": "chat_mix", "repeats": 6, "rows_per_repeat": 10000,
                        "b_row_precision": {"target_rel_half_width": 0.02, "achieved_rel_half_width": 0.016,
                                            "status": "reached", "steps": 6}},
              "in_limit": {"recommended_in_limit": in_limit, "recommended_in_limit_ci_low": 200,
                           "recommended_in_limit_ci_high": 300, "rounds": 40,
                           "in_limit_halves": {"first": in_limit, "second": in_limit, "agree": True},
                           "in_limit_precision": {"target_rel_half_width": 0.1, "achieved_rel_half_width": 0.12,
                                                  "status": "budget", "steps": 40}}}
    notebooks = {n: {"values": v, "dir": tmp_path / n} for n, v in values.items()}
    constants = assess(read_entries(), notebooks, run_dir=tmp_path, run_id="r1", quick=quick)
    return {"run_id": "r1", "mode": "quick" if quick else "full", "status": "ok", "wall_seconds": 2400.0,
            "started_at": "2026-12-01T00:00:00Z",
            "environment": {"server": "cassandra", "server_version": "5.0.9", "nodes": 1,
                            "machine": {"cpus": 2}, "loadavg_at_start": [4.8, 4.7, 5.1]},
            "constants": {n: c.to_json() for n, c in constants.items()},
            "notebooks": {"b_row": {"status": "ok", "seconds": 100, "figures": ["b_row/b_row.png"],
                                    "conclusion": "**b_row (message_record, lz4)**: 1,235 B per row\n\n- a list"},
                          "in_limit": {"status": "ok", "seconds": 50, "figures": ["in_limit/in_limit.png"],
                                       "conclusion": "**Recommended IN limit: 300**"}}}


def test_a_quick_report_says_so_and_names_the_full_run(tmp_path):
    html = render(_run(tmp_path, quick=True), tmp_path)
    assert "Quick run: a smoke test of the pipeline, not a calibration." in html
    assert "lab calibrate --full" in html and re.search(r"up to about \d+ min", html)
    assert "--allow-quick" in html
    assert html.count("conf-low'>low<") >= 2  # every measured constant: low in a quick run
    full = render(_run(tmp_path, quick=False), tmp_path)
    assert "Quick run" not in full and "Full run: completed in 40 min" in full


def test_decisions_lead_the_page_with_precision_agreement_and_capacity(tmp_path):
    cal = _run(tmp_path, quick=False)
    html = render(cal, tmp_path)
    assert html.index("<h2>Decisions</h2>") < html.index("<h2>Evidence per constant</h2>") < html.index("<h2>Notebooks")
    b = cal["constants"]["b_row_bytes"]
    assert decision("b_row_bytes", b).text == "change 600 → 1,235 B (measured 1,235 B)"
    assert precision_text(b) == "±1.6% (target ±2%: reached, 6 steps)" and b["confidence"] == "high"
    assert re.search(r"resident 15\.8 → 32\.\d TB, nodes \d+ → \d+ at 20 M messages/day", impact("b_row_bytes", b))
    assert "none on TB or nodes" in impact("batch_read_in_list_limit", cal["constants"]["batch_read_in_list_limit"])
    assert "time budget ran out" in precision_text(cal["constants"]["batch_read_in_list_limit"])
    assert "no previous full run here" in html
    for level in CONFIDENCE_LEGEND:
        assert f"conf-{level}'>{level}<" in html
    # agreement with a previous run, when the run carries one
    b["agreement"] = {**agreement({**b, "measured": 1240.0}, b), "previous_run": "r0"}
    assert "agree with run r0" in render(cal, tmp_path)


def test_caveats_sit_beside_the_recommendation(tmp_path):
    cal = _run(tmp_path, quick=False)
    env = cal["environment"]
    c = caveats("batch_read_in_list_limit", cal["constants"]["batch_read_in_list_limit"], env)
    assert any("max_clustering_key_restrictions_per_query" in x and "raise that setting" in x for x in c)
    assert any("production is ScyllaDB" in x for x in c) and any("2-core machine" in x for x in c)
    assert any("row model" in x for x in caveats("b_row_bytes", cal["constants"]["b_row_bytes"], env))
    small = _run(tmp_path, quick=False, in_limit=50)
    c = caveats("batch_read_in_list_limit", small["constants"]["batch_read_in_list_limit"], env)
    assert any("default limit is 100" in x for x in c)
    page = render(cal, tmp_path)
    assert "raise that setting on every node first" in page
    caveat_divs = re.findall(r"<div class='caveat'>(.*?)</div>", page)
    assert caveat_divs and not any("`" in d for d in caveat_divs), "names in caveats are code, not backticks"


def test_conclusions_are_markdown_figures_open_full_size_numbers_are_readable(tmp_path):
    html = render(_run(tmp_path, quick=False), tmp_path)
    assert "<strong>b_row (message_record, lz4)</strong>" in html and "**b_row" not in html and "<li>a list</li>" in html
    assert "<div class='lightbox' id='fig-b_row_bytes'>" in html and "href='#fig-b_row_bytes'" in html
    assert "href='b_row/b_row.png'>full size</a>" in html
    assert "<table class='kv'>" in html and "key=value" not in html
    text = re.sub(r"data:image/png;base64,[^'\"]+", "", html)
    assert not re.search(r"\d[eE][+-]\d", text)  # no 2e+07
    assert "1,235 B" in text


def test_inconclusive_constants_keep_their_value(tmp_path):
    cal = _run(tmp_path, quick=False)
    c = dict(cal["constants"]["batch_read_in_list_limit"], inconclusive=True, halves={"first": 300, "second": 50})
    d = decision("batch_read_in_list_limit", c)
    assert d.action == "keep (inconclusive)" and not d.changed
    assert d.text == "keep 100 elements: inconclusive (first half of the run 300, second half 50)"


@pytest.mark.parametrize("quick", [True, False])
def test_a_failed_run_before_the_notebooks_says_where(tmp_path, quick):
    cal = _run(tmp_path, quick=quick)
    cal.update(status="failed", error={"notebook": None, "cell": None, "ename": "NoHostAvailable", "evalue": "port 1"})
    html = render(cal, tmp_path)
    assert "in before" not in html and "before the first notebook (environment and round trip)" in html
