"""The model check's conclusion (no node): each quantity's headline verdict, and the checks
under it that missed named with their error and the input that was off."""
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


def test_the_cpu_part_says_it_was_priced_on_the_curve_and_what_light_rates_gave():
    from lab.calibration.capacity_model.curve_pricing import CpuCurve
    from lab.calibration.capacity_model.prediction_check import Check

    curve = CpuCurve(points=(), node_cores=2)
    inputs = Inputs(source="run-x", rows_per_repeat=None, row_model=None, fitted_mixes=(), per_row_bytes={},
                    head_bytes_per_conversation=None, head_sstable_bytes=None, cpu_costs={"cpu_ms_per_op": {}},
                    cpu_curve=curve, cpu_curve_mix={"send": 1.0})
    cpu = Check(quantity="cpu", scope="cluster", table=None, predicted=16.6, measured=17.0, unit="CPU s")
    rounds = pd.DataFrame({"round": [0, 0, 1, 1], "node": ["a", "b", "a", "b"], "predicted_light_rates": [6.5, 6.5, 7.1, 7.1]})
    result = model_check.Result(params=model_check.Params(parts=("cpu",)), inputs=inputs, checks=(cpu,), nodes=2,
                                replication_factor=1, server="cassandra", cpu_rounds=rounds,
                                load={"achieved_rate": 53.5, "requested_rate": 53.5, "verdict": "carried"})
    v = result.values()
    assert v["model_check_cpu_light_rates_predicted"] == 13.6       # each round once, not once per node
    assert round(v["model_check_cpu_light_rates_error"], 3) == -0.2 and v["model_check_cpu_priced_on"] == "the CPU curve"
    text = model_check.conclusion(result)
    assert "Priced on the CPU curve" in text and "at cpu_cost's own rate it would have been -20.0%" in text


def test_a_crafted_cpu_curve_gives_no_curve_and_one_reason():
    from lab.calibration.capacity_model.predictions import curve_from_values

    point = {"sends_per_second": 10, "achieved_sends_per_second": 10, "server_ms_per_send": 20.0, "verdict": "carried"}
    good = {"cpu_curve": {"points": [point, {**point, "achieved_sends_per_second": 40, "server_ms_per_send": 9.0}],
                          "node_cores": 2}, "operations_per_message": {"send": 1, "history_latest": 2}}
    curve, mix, note = curve_from_values(good)
    assert curve is not None and mix == {"send": 1.0, "history_latest": 2.0} and note == ""
    for bad in (None, [1], {"cpu_curve": "x", "operations_per_message": {}},
                {"cpu_curve": {"points": ["x"]}, "operations_per_message": {"send": 1}},
                {"cpu_curve": {"points": [point]}, "operations_per_message": {"send": 1}},
                {"cpu_curve": {"points": [point, {**point, "achieved_sends_per_second": "40"}]},
                 "operations_per_message": {"send": 1}},
                {**good, "cpu_curve": {**good["cpu_curve"], "node_cores": "two"}}):
        curve, mix, note = curve_from_values(bad)
        assert curve is None and mix is None and note, bad
