"""report.html leads with decisions (no node): quick banner with the full-run command and its
duration, one line per constant (keep/change, precision, agreement, TB and nodes), the
confidence legend, caveats beside the recommendation, Markdown conclusions, evidence tables,
figures that open full size, readable numbers."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from lab.calibration.agreement import agreement
from lab.calibration.decisions import caveats, changes_line, decision, impact, precision_text, shared_caveats
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
    from lab.calibration.presets import FULL_RUN_DURATION

    assert "lab calibrate --full" in html and FULL_RUN_DURATION in html
    assert "--allow-quick" in html and "completed here in 2,400 s" in html
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


def test_a_choice_that_is_not_stable_is_kept_and_the_report_says_why(tmp_path):
    from lab.calibration.stability import Stability

    cal = _run(tmp_path, quick=False)
    values = {"recommended_in_limit": 200, "rounds": 300,
              "in_limit_halves": {"first": 200, "second": 200, "agree": True},
              "in_limit_stability": Stability(choice=200, share=0.66, units=300, runner_up=150,
                                              runner_up_share=0.3).to_json()}
    constants = assess(read_entries(), {"in_limit": {"values": values, "dir": tmp_path / "in_limit"}},
                       run_dir=tmp_path, run_id="r1", quick=False)
    cal["constants"]["batch_read_in_list_limit"] = constants["batch_read_in_list_limit"].to_json()
    text = "inconclusive: 66% of resamples choose 200 (needs 90%; next 150 at 30%)"
    d = decision("batch_read_in_list_limit", cal["constants"]["batch_read_in_list_limit"])
    assert d.action == "keep (inconclusive)" and d.text == f"keep 100 elements: {text}"
    html = render(cal, tmp_path)
    assert "stability of the choice" in html and html.count(text) >= 2  # the decision and the evidence


@pytest.mark.parametrize("quick", [True, False])
def test_a_failed_run_before_the_notebooks_says_where(tmp_path, quick):
    cal = _run(tmp_path, quick=quick)
    cal.update(status="failed", error={"notebook": None, "cell": None, "ename": "NoHostAvailable", "evalue": "port 1"})
    html = render(cal, tmp_path)
    assert "in before" not in html and "before the first notebook (environment and round trip)" in html


def test_a_quick_run_decides_nothing_it_would_change_once_a_full_run_confirms(tmp_path):
    """The banner says not to change appendix B on a quick run: no decision row contradicts it,
    and the console's line says the same words."""
    cal = _run(tmp_path, quick=True)
    b = cal["constants"]["b_row_bytes"]
    d = decision("b_row_bytes", b, mode="quick")
    assert d.action == "would change" and d.changed
    assert d.text == "would change 600 → 1,235 B once a full run confirms (measured 1,235 B)"
    html = render(cal, tmp_path)
    cells = re.findall(r"<td class='changed'>(.*?)<", html)
    assert cells and all(c.startswith("would change ") and "once a full run confirms" in c for c in cells)
    assert not re.search(r"<td class='changed'>change ", html)
    assert changes_line(cal) == ("would change once a full run confirms: b_row_bytes 600 -> 1,235 B, "
                                 "batch_read_in_list_limit 100 -> 300 elements")
    full = _run(tmp_path, quick=False)
    assert decision("b_row_bytes", full["constants"]["b_row_bytes"], mode="full").text.startswith("change 600 → 1,235 B")
    assert changes_line(full).startswith("recommended changes: b_row_bytes 600 -> 1,235 B")
    full["constants"]["batch_read_in_list_limit"].update(inconclusive=True, changed=False)
    assert changes_line(full) == ("recommended changes: b_row_bytes 600 -> 1,235 B; inconclusive (kept): "
                                  "batch_read_in_list_limit")
    assert "(high confidence)" in impact("b_row_bytes", full["constants"]["b_row_bytes"])
    assert "(low confidence)" in impact("b_row_bytes", b)


def test_caveats_common_to_every_row_are_said_once_above_the_table(tmp_path):
    cal = _run(tmp_path, quick=False)
    html = render(cal, tmp_path)
    server = "measured on cassandra 5.0.9 (1 node); production is ScyllaDB: confirm there"
    assert html.count(server) == 1
    assert html.index(server) < html.index("<table class='wide decisions'>")
    assert "For production, every row below:" in html
    assert "raise that setting on every node first" in html  # the IN limit's own caveat stays in its row
    shared, own = shared_caveats({"a": ["x", "y"], "b": ["y", "x", "z"], "c": []})
    assert shared == ["x", "y"] and own == {"a": [], "b": ["z"], "c": []}
    assert shared_caveats({"a": ["x"]}) == ([], {"a": ["x"]})  # one row alone keeps its own


def test_names_wrap_at_underscores_only_and_headers_sit_over_their_columns(tmp_path):
    from lab.results.html import name_html

    assert name_html("batch_read_range_min_density") == (
        "<span class='seg'>batch_</span><wbr><span class='seg'>read_</span><wbr><span class='seg'>range_</span><wbr>"
        "<span class='seg'>min_</span><wbr><span class='seg'>density</span>")
    html = render(_run(tmp_path, quick=False), tmp_path)
    assert "<b><span class='seg'>b_</span><wbr><span class='seg'>row_</span><wbr><span class='seg'>bytes</span></b>" \
        in html
    assert ".seg{white-space:nowrap}" in html and "overflow-wrap:anywhere" not in html
    # the round trip: one column per unit, not a "µs" header over rows of counts and seconds
    rt = {"n": 200, "write_p50_us": 812.0, "write_p99_us": 2400.0, "read_p50_us": 640.0, "read_p99_us": 1900.0,
          "seconds": 4.65}
    cal = _run(tmp_path, quick=False)
    cal["measurements"] = {"round_trip": rt}
    page = render(cal, tmp_path)
    section = page[page.index("<h2>Write/read round trip</h2>"):]
    assert "<th>operation</th><th class='num'>p50 (µs)</th><th class='num'>p99 (µs)</th>" in section
    assert "<td class='num'>812</td><td class='num'>2,400</td>" in section
    assert "200 rows of 100 B written then read one at a time" in section and "4.65 s in all" in section


def test_figures_are_readable_and_escape_closes_them(tmp_path):
    html = render(_run(tmp_path, quick=False), tmp_path)
    assert "THUMB" not in html and "img.thumb{width:100%" in html
    assert "<div class='figures'>" in html and "grid-template-columns:1fr 1fr" in html  # two to a row
    assert "<div class='fig-side'>" in html  # beside its evidence, the rest of the row's width
    assert "e.key==='Escape'" in html


def test_an_interrupted_run_says_so_at_the_top(tmp_path):
    cal = _run(tmp_path, quick=True)
    cal["status"] = "interrupted"
    cal["notebooks"]["in_limit"]["status"] = "interrupted"
    cal["notebooks"]["capacity"] = {"status": "not run", "parameters": {}}
    html = render(cal, tmp_path)
    top = html[:html.index("<h2>")]
    assert "<b>INTERRUPTED</b> in notebook <b>in_limit</b>" in top
    assert "Finished: b_row; not finished: in_limit, capacity" in top
    assert f"lab calibrate --resume {tmp_path.resolve()}" in top and "completed here" not in html
    assert "interrupted here: its partial output is in its folder" in html


def _capacity_values(**extra) -> dict:
    values = {"design_b_row_bytes": 600.0, "b_row_measured_bytes": 1235.0, "b_row_confidence": "low",
              "b_row_from": "this run", "b_row_run": "r1"}
    for src, tb, nodes in (("design", 15.8, 9), ("measured", 32.5, 17), ("my_mix", 60.1, 32)):
        values[f"resident_tb_{src}_20000000"] = tb
        values[f"nodes_needed_{src}_20000000"] = nodes
    return {**values, **extra}


def test_the_capacity_table_carries_the_confidence_of_its_inputs_and_cites_what_ran(tmp_path):
    cal = _run(tmp_path, quick=True)
    cal["notebooks"]["capacity"] = {"status": "ok", "values": _capacity_values()}
    html = render(cal, tmp_path)
    section = html[html.index("<h2>Capacity"):html.index("<h2>Evidence")]
    assert "17 nodes <small class='conf-low'>low</small>" in section
    assert "9 nodes <small" not in section  # the design's numbers are the design's, not measured
    assert "b_row from the b_row notebook of this run (r1)" in section
    assert "no CPU costs (cpu_cost did not run)" in section and "cpu_cost notebook of this run" not in section
    mix = {"mean": 2288.0, "ci_low": 2100.0, "ci_high": 2480.0}
    cal["notebooks"]["capacity"]["values"] = _capacity_values(
        my_mix_b_row=mix, my_mix_name="example_mix", my_mix_source="datasets/profiles/example_mix.toml",
        my_mix_confidence="low", my_mix_from="the latest b_row run in results (r0, 2026-12-01 10:00 UTC)",
        my_mix_run="r0", cpu_source="/x/cpu_cost/values.json", cpu_confidence="low", cpu_from="this run",
        cpu_run="r1", server_cores_20000000=40.0, server_cores_ci_low_20000000=40.0, server_cores_ci_high_20000000=52.6,
        nodes_cpu_20000000=3, binding_20000000="disk", binding_my_mix_20000000="disk", nodes_my_mix_20000000=32)
    html = render(cal, tmp_path)
    section = html[html.index("<h2>Capacity"):html.index("<h2>Evidence")]
    assert "example_mix 2,288 B (95% CI 2,100–2,480)" in section and "32 nodes <small class='conf-low'>low</small>" in section
    assert "3 nodes <small class='conf-low'>low</small>" in section and "40 cores (95% CI 40–52.6)" in section
    assert "CPU costs from the cpu_cost notebook of this run (r1)" in section
    assert ("example_mix (datasets/profiles/example_mix.toml) priced by the row model from the b_row notebook of run "
            "r0 (the latest b_row run in results (r0, 2026-12-01 10:00 UTC))") in section
    heads = re.findall(r"<th[^>]*>", section)
    assert heads.count("<th class='num'>") == 5  # every numeric column's header (messages / day too) over its numbers


def test_the_report_names_the_round_trip_every_latency_crossed(tmp_path):
    cal = _run(tmp_path, quick=False)
    cal["measurements"] = {"round_trip": {"n": 200, "write_p50_us": 2400, "write_p99_us": 3100, "read_p50_us": 2300,
                                          "read_p99_us": 2900, "seconds": 1.2}}
    assert "crossed loopback directly" in render(cal, tmp_path)
    cal["environment"]["cluster"] = {"rtt_us": 2000}
    page = render(cal, tmp_path)
    assert "emulated round trip of 2 ms" in page and "loopback directly" not in page
