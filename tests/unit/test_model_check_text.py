"""The model check's conclusion (no node): each quantity's headline verdict, and the checks
under it that missed named with their error and the input that was off (issue 23)."""
from __future__ import annotations

import pandas as pd

from lab.calibration import capacity_section
from lab.calibration.capacity_model.prediction_check import disk_checks
from lab.calibration.capacity_model.predictions import Inputs
from lab.calibration.experiments import model_check

NODES = ("127.0.0.51", "127.0.0.52", "127.0.0.53")
INPUTS = Inputs(source="run-x", rows_per_repeat=2000, row_model=None, fitted_mixes=(), per_row_bytes={},
                head_bytes_per_conversation=None, head_sstable_bytes=None, cpu_costs=None)


def _result(dedup_measured_per_row: float) -> model_check.Result:
    """2,000 sends at RF 3 (every node holds every row): message_record and message_index as
    predicted within 0.2%; client_dedup predicted 120 B a row, measured ``dedup_measured_per_row``."""
    predicted, measured = [], {}
    for node in NODES:
        for table, per_row, actual in (("message_record", 1300.0, 1302.0), ("message_index", 80.0, 80.1),
                                       ("client_dedup", 120.0, dedup_measured_per_row)):
            predicted.append({"node": node, "table": table, "rows": 2000, "predicted": 2000 * per_row,
                              "predicted_low": None, "predicted_high": None, "input": f"b_row of {table}"})
            measured[(node, table)] = int(2000 * actual)
    checks = disk_checks(pd.DataFrame(predicted), measured)
    return model_check.Result(params=model_check.Params(parts=("disk",)), inputs=INPUTS, checks=tuple(checks),
                              nodes=3, replication_factor=3, server="cassandra")


def test_a_table_that_missed_under_a_met_headline_is_named_with_its_input():
    result = _result(142.0)   # client_dedup 120 / 142 - 1 = -15.5%; the cluster 1500 / 1524.1 - 1 = -1.6%
    text = model_check.conclusion(result)
    assert "Targets missed: disk" not in text
    last = text.split("\n\n")[-1]
    assert last.startswith("Targets: disk: met (-1.6%, target ±5%)"), last
    assert "per table: `client_dedup` missed (-15.5%): its per-row input is ~22 B low" in last
    assert "message_record" not in last and "message_index" not in last
    v = result.values()
    assert v["model_check_disk_met"] is True and v["model_check_disk_error"] < 0
    missed = v["model_check_disk_missed"]
    assert [m["table"] for m in missed] == ["client_dedup"] and round(missed[0]["per_row_error_bytes"]) == -22
    # the report's capacity section says the same beside the node counts
    assert "(±5%: met, 3 node(s) RF 3; missed under it: client_dedup -15.5%)" in capacity_section.check_text(v, "disk")


def test_every_check_met_says_so():
    result = _result(120.5)
    assert result.values()["model_check_disk_missed"] == []
    assert model_check.conclusion(result).split("\n\n")[-1].startswith("All targets met: disk: met (")
