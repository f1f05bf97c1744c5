"""The report's capacity section (no node): every node count carries where its inputs came from
(measured in the run, or appendix B) and the model check's error beside it; lsm_space_amp is a
measured constant with a decision row, inconclusive when its factor is not stationary."""
from __future__ import annotations

import json
import re

from lab.calibration import capacity_section
from lab.calibration.decisions import decision, impact
from lab.calibration.experiments import capacity
from lab.calibration.recommendations import assess
from lab.constants import Constants, read_entries

AMP_VALUES = {"lsm_space_amp": 1.31, "lsm_space_amp_ci_low": 1.28, "lsm_space_amp_ci_high": 1.34,
              "lsm_space_amp_peak": 1.52, "lsm_space_amp_stationary": True, "steady_start_day": 39, "days": 53,
              "lsm_space_amp_halves": {"first": 1.30, "second": 1.32, "tolerance": 0.065, "agree": True},
              "lsm_space_amp_precision": {"target_rel_half_width": 0.05, "achieved_rel_half_width": 0.023,
                                          "status": "reached", "steps": 1}}
CHECK = {"nodes": 3, "replication_factor": 3, "server": "cassandra", "targets": {"disk": 0.05, "cpu": 0.2, "sstables": 0},
         "model_check_disk_error": -0.012, "model_check_disk_error_ci_low": -0.026, "model_check_disk_error_ci_high": 0.001,
         "model_check_disk_met": True, "model_check_cpu_error": None, "skipped": {"cpu": "no CPU costs"},
         "checks": [{"quantity": "disk", "scope": "cluster", "table": None, "predicted": 1.76e7, "measured": 1.78e7,
                     "unit": "B", "error": -0.012, "error_ci_low": -0.026, "error_ci_high": 0.001, "target": 0.05,
                     "met": True},
                    {"quantity": "sstables", "scope": "127.0.0.51", "table": "message_record", "predicted": 4.0,
                     "measured": 4.0, "unit": "SSTables", "error": 0.0, "error_ci_low": 0.0, "error_ci_high": 0.0,
                     "target": 0.0, "met": True}]}


def _capacity_values(tmp_path, amp_values):
    (tmp_path / "b_row.json").write_text(json.dumps({"b_row_bytes": 1250.0}))
    (tmp_path / "amp.json").write_text(json.dumps(amp_values))
    result = capacity.run(capacity.Params(b_row_values=str(tmp_path / "b_row.json"),
                                          space_amp_values=str(tmp_path / "amp.json")),
                          constants=Constants.appendix_b())
    return result, result.values()


def test_capacity_uses_a_stationary_measured_factor_and_says_where_each_came_from(tmp_path):
    result, v = _capacity_values(tmp_path, AMP_VALUES)
    assert v["lsm_space_amp_used"] == 1.31 and v["lsm_space_amp_source"].startswith("measured")
    assert v["factors"]["b_row_bytes"]["source"] == "measured in this run"
    assert v["factors"]["lsm_space_amp"]["source"] == "measured in this run"
    assert v["factors"]["replication_factor"]["source"] == "appendix B"
    # the design rows keep the design's own figures; the measured ones carry both measured factors
    assert abs(v["resident_tb_design_20000000"] - 15.768) < 0.01
    assert abs(v["resident_tb_measured_20000000"] - 15.768 * 1250 / 600 * 1.31 / 1.2) < 0.01
    assert "Factors of §7" in capacity.conclusion(result)


def test_a_factor_that_is_not_stationary_is_appendix_bs(tmp_path):
    growing = {**AMP_VALUES, "lsm_space_amp": 1.57, "lsm_space_amp_stationary": False,
               "lsm_space_amp_halves": {"first": 1.49, "second": 1.65, "tolerance": 0.08, "agree": False}}
    result, v = _capacity_values(tmp_path, growing)
    assert v["lsm_space_amp_used"] == 1.2 and v["lsm_space_amp_source"] == "appendix B"
    assert "not stationary" in v["lsm_space_amp_note"] and "1.49 then 1.65" in v["lsm_space_amp_note"]
    # and the constant is inconclusive: kept, with both halves in its decision
    c = assess(read_entries(), {"space_amp": {"values": growing, "dir": tmp_path}}, run_dir=tmp_path, run_id="r",
               quick=False)["lsm_space_amp"]
    assert c.inconclusive and c.recommended == 1.2
    assert decision("lsm_space_amp", c.to_json()).action == "keep (inconclusive)"


def test_a_measured_factor_changes_tb_and_nodes(tmp_path):
    c = assess(read_entries(), {"space_amp": {"values": AMP_VALUES, "dir": tmp_path}}, run_dir=tmp_path, run_id="r",
               quick=False)["lsm_space_amp"].to_json()
    assert c["measured"] == 1.31 and c["recommended"] == 1.31 and c["confidence"] == "high"
    assert re.search(r"resident 15\.8 → 17\.2 TB, nodes \d+ → \d+", impact("lsm_space_amp", c))


def test_every_node_count_says_where_its_inputs_came_from_and_the_checks_error(tmp_path):
    _, v = _capacity_values(tmp_path, AMP_VALUES)
    cal = {"notebooks": {"capacity": {"values": v}, "model_check": {"values": CHECK}}}
    html = capacity_section.render(cal)
    assert "inputs: b_row_bytes measured, lsm_space_amp measured" in html
    assert "model check -1.2% (±5%: met; CI -2.6% to +0.1%, 3 node(s) RF 3)" in html
    assert "§7 factors of the measured rows: b_row_bytes 1,250 (measured in this run)" in html
    assert "Model check: the constants against a run they did not see" in html and "SSTables" in html
    alone = capacity_section.render({"notebooks": {"capacity": {"values": v}}})
    assert capacity_section.NOT_CHECKED in alone and "Model check:" not in alone


def test_the_report_shows_compliance_hold_apart_as_a_what_if_column(tmp_path):
    """A space_amp run that measured the mix without the rows that never expire gives the report a
    what-if column (both tables' factor), low confidence when that factor did not settle."""
    amp = AMP_VALUES | {"never_expiring_share": 0.07, "expiring_only_message_record_space_amp_steady": 1.25,
                        "expiring_only_halves": {"agree": False}}
    _, v = _capacity_values(tmp_path, amp)
    assert abs(v["hold_apart"]["combined_amp"] - (0.93 * 1.25 + 0.07)) < 1e-12
    html = capacity_section.render({"notebooks": {"capacity": {"values": v}}})
    assert "what-if: compliance_hold in its own table (factor 1.23)" in html
    assert f"{v['nodes_needed_hold_apart_20000000']} nodes <small class='conf-low'>low</small>" in html
    _, plain = _capacity_values(tmp_path, AMP_VALUES)
    assert "what-if" not in capacity_section.render({"notebooks": {"capacity": {"values": plain}}})
