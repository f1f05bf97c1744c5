"""The model check's arithmetic (lab.calibration.capacity_model.predictions): what the calibration's constants
predict for disk, CPU and SSTables, and how a prediction is judged against a measurement."""
from __future__ import annotations

import pandas as pd
import pytest

from lab.calibration.capacity_model.cpu_sizing import cpu_sizing
from lab.calibration.capacity_model.prediction_check import Check, disk_checks
from lab.calibration.capacity_model.predictions import (
    Inputs,
    cpu_diagnosis,
    inputs_from_values,
    operation_sequence,
    predict_cpu,
    predict_disk,
    predict_sstables,
)
from lab.calibration.capacity_model.row_model import RowModel
from lab.errors import ValidationError
from lab.measure import LinearFit

# b_row = 300 + 1.0 x payload + 0.5 x media_metadata + 1.0 x thumbnail, with a +-10 B interval
FIT = LinearFit(names=("overhead", "payload_bytes", "media_metadata_bytes", "thumbnail_bytes"),
                coefficients=(300.0, 1.0, 0.5, 1.0), std_errors=(1.0, 0.0, 0.0, 0.0), ci_low=(290, 1, 0.5, 1),
                ci_high=(310, 1, 0.5, 1), covariance=((1.0, 0, 0, 0), (0, 0, 0, 0), (0, 0, 0, 0), (0, 0, 0, 0)),
                observations=12, dof=8, residual_sd=4.0, r_squared=0.99, confidence=0.95)
INPUTS = Inputs(source="run-x", rows_per_repeat=1000, row_model=RowModel(fit=FIT, mixes=("a", "b"), held_out=None),
                fitted_mixes=("a", "b"), per_row_bytes={"message_index": (80.0, 78.0, 82.0),
                                                        "client_dedup": (120.0, None, None)},
                head_bytes_per_conversation=200.0, head_sstable_bytes=5000.0, cpu_costs=None)


def _rows():
    """Four sends: two on node a only, two on a and b (message_record); the index and dedup rows
    of every send on a and b; two conversations."""
    ab, a = ("a", "b"), ("a",)
    return pd.DataFrame({"payload_bytes": [100.0, 200.0, 300.0, 400.0], "media_metadata_bytes": [0.0, 0.0, 50.0, 50.0],
                         "thumbnail_bytes": [0.0, 0.0, 0.0, 1000.0], "message_record_nodes": [a, a, ab, ab],
                         "message_index_nodes": [ab] * 4, "client_dedup_nodes": [ab] * 4,
                         "conversation_head_nodes": [a, a, ab, ab], "conversation": ["c1", "c1", "c2", "c2"]})


def test_disk_is_the_row_model_over_the_rows_each_node_holds():
    p = predict_disk(INPUTS, _rows()).set_index(["node", "table"])
    # node a holds all four records: 4 x 300 + (100+200+300+400) + 0.5 x 100 + 1000
    assert p.loc[("a", "message_record")].predicted == pytest.approx(1200 + 1000 + 50 + 1000)
    # node b the last two: 2 x 300 + 700 + 0.5 x 100 + 1000
    assert p.loc[("b", "message_record")].predicted == pytest.approx(600 + 700 + 50 + 1000)
    assert p.loc[("b", "message_record")].rows == 2
    # the row model's prediction interval, scaled by the rows
    assert p.loc[("a", "message_record")].predicted_low < p.loc[("a", "message_record")].predicted
    assert p.loc[("a", "message_index")].predicted == 320 and p.loc[("a", "message_index")].predicted_low == 312
    assert p.loc[("b", "client_dedup")].predicted == 480 and pd.isna(p.loc[("b", "client_dedup")].predicted_low)
    # one SSTable's fixed components + 200 B per conversation: a holds c1 and c2, b only c2
    assert p.loc[("a", "conversation_head")].predicted == 5400 and p.loc[("b", "conversation_head")].predicted == 5200


def test_disk_checks_compare_tables_nodes_and_the_cluster_like_with_like():
    predicted = predict_disk(INPUTS, _rows())
    measured = {(n, t): int(v * 1.02) for (n, t), v in
                predicted.set_index(["node", "table"]).predicted.items()}
    measured[("a", "message_reaction")] = 999  # measured, nothing predicted: shown, left out of the sums
    checks = disk_checks(predicted, measured)
    by = {(c.scope, c.table): c for c in checks}
    assert by[("a", "message_reaction")].predicted is None and by[("a", "message_reaction")].met is None
    cluster = by[("cluster", None)]
    assert cluster.measured == sum(v for (n, t), v in measured.items() if t != "message_reaction")
    assert cluster.error == pytest.approx(1 / 1.02 - 1, abs=1e-3) and cluster.met
    assert by[("a", None)].predicted == pytest.approx(predicted[predicted.node == "a"].predicted.sum())
    low, high = by[("a", "message_record")].error_interval
    assert low < by[("a", "message_record")].error < high


def test_a_check_is_judged_against_its_target_with_both_intervals():
    c = Check(quantity="cpu", scope="cluster", table=None, predicted=10.0, measured=8.0, unit="CPU s",
              predicted_low=9.0, predicted_high=11.0, measured_low=7.0, measured_high=9.0)
    assert c.error == pytest.approx(0.25) and c.target == 0.20 and c.met is False
    low, high = c.error_interval
    assert low == pytest.approx(9 / 9 - 1) and high == pytest.approx(11 / 7 - 1)
    assert Check(quantity="disk", scope="x", table="t", predicted=104.0, measured=100.0, unit="B").met
    assert not Check(quantity="disk", scope="x", table="t", predicted=106.0, measured=100.0, unit="B").met
    exact = Check(quantity="sstables", scope="x", table="t", predicted=4, measured=4.0, unit="SSTables")
    assert exact.met and exact.error == 0
    assert Check(quantity="sstables", scope="x", table="t", predicted=5, measured=4.0, unit="SSTables").met is False
    row = exact.row()
    assert row["target"] == 0 and row["met"] is True
    # no interval on either side (one round): no "95% CI -24.8% to -24.8%", no interval at all
    assert row["error_ci_low"] is None and row["error_ci_high"] is None
    one_round = Check(quantity="cpu", scope="cluster", table=None, predicted=13.8, measured=18.35, unit="CPU s")
    assert one_round.error_interval == (None, None) and one_round.error == pytest.approx(13.8 / 18.35 - 1)


def test_the_operation_sequence_carries_each_operation_at_its_rate():
    seq = operation_sequence({"send": 15, "history_latest": 25, "batch_s1_group": 0.5}, length=1620)
    assert seq.count("send") == 600 and seq.count("history_latest") == 1000 and seq.count("batch_s1_group") == 20
    first = seq[:81]  # any stretch carries the mix, not a block of one operation
    assert 25 <= first.count("send") <= 35
    with pytest.raises(ValidationError):
        operation_sequence({"send": -1})
    with pytest.raises(ValidationError):
        operation_sequence({})


def test_cpu_is_the_capacity_models_arithmetic_for_the_operations_completed():
    costs = {"cpu_ms_per_op": {"send": 2.0, "history_latest": 1.0},
             "cpu_ms_interval": {"send": (1.5, 2.5), "history_latest": (0.5, 1.5)},
             "requests_per_op": {"send": 5.0, "history_latest": 2.0},
             "loadgen_ms_per_op": {"send": 1.0, "history_latest": 1.0}, "measured_replication_factor": 1}
    inputs = Inputs(**{**INPUTS.__dict__, "cpu_costs": costs})
    counts = {"send": 100, "history_latest": 300}
    one = predict_cpu(inputs, counts, 10.0, replication_factor=1)
    assert one["seconds"] == pytest.approx((100 * 2.0 + 300 * 1.0) / 1000)
    assert one["low"] == pytest.approx((100 * 1.5 + 300 * 0.5) / 1000)
    # RF 3 from a 1-node calibration: writes on 3 replicas, reads on a quorum of 2
    three = predict_cpu(inputs, counts, 10.0, replication_factor=3)
    assert three["seconds"] == pytest.approx((100 * 2.0 * 3 + 300 * 1.0 * 2) / 1000)
    assert three["per_op"]["send"] == pytest.approx(0.6) and three["replicas"]["history_latest"] == 2
    # and it is cpu_sizing's figure: the same function the capacity notebook sizes nodes with
    sizing = cpu_sizing(messages_per_day=400 / 10 * 86_400, operations_per_message={"send": 0.25, "history_latest": 0.75},
                        peak_factor=1.0, replication_factor=3, **costs)
    assert three["seconds"] == pytest.approx(sizing.server_cores * 10)
    assert predict_cpu(INPUTS, counts, 10.0, replication_factor=1)["seconds"] is None  # no cpu_cost run


def test_cpu_diagnosis_names_the_operation_furthest_off():
    d = cpu_diagnosis({"send": 0.6, "history_latest": 0.6}, {"send": 100, "history_latest": 300},
                      {"send": 2.0, "history_latest": 4.0})
    assert list(d.op) == ["history_latest", "send"]  # 0.6 predicted vs 1.2 here: the larger miss
    assert d.iloc[0].relative == pytest.approx(-0.5) and d.iloc[1].difference_seconds == pytest.approx(0.4)


def test_sstables_follow_the_window_arithmetic_per_node():
    # node a: one group, 9 daily flushes in 7-day windows 0 (days 0-6) and 1 (days 7-8)
    # node b: two groups (shards) that received rows on alternate days
    flushes = []
    for day in range(9):
        f = {("a", 0): day // 7}
        f[("b", day % 2)] = day // 7
        flushes.append(f)
    p = predict_sstables(flushes)
    # a: window 0 compacted to one, window 1 (newest) holds its 2 flushes: 3
    assert p["a"] == 3
    # b shard 0: days 0,2,4,6 (window 0: 4 -> 1) + day 8 (window 1): 2; shard 1: days 1,3,5 + 7: 3 + 1 -> 2
    assert p["b"] == 4


def test_inputs_come_from_the_notebooks_values():
    b_row = {"compressions": ["lz4", "none"], "rows_per_repeat": 10000, "b_row_message_index_lz4_bytes": 82.0,
             "b_row_message_index_lz4_ci_low_bytes": 81.0, "b_row_message_index_lz4_ci_high_bytes": 83.0,
             "b_row_client_dedup_lz4_bytes": 120.0, "row_model": {"fit": {**FIT.to_json()}, "mixes": ["a"]},
             "b_row_by_mix": {"chat_mix": {}, "text_only": {}}}
    cpu = {"operations": ["send"], "cpu_send_server_ms_per_op": 2.0, "cpu_send_server_ms_per_op_ci_low": 1.0,
           "cpu_send_server_ms_per_op_ci_high": 3.0, "measured_replication_factor": 1, "server": "cassandra"}
    amp = {"conversation_head_bytes_per_conversation": 210.0, "conversation_head_sstable_bytes": 5600.0}
    i = inputs_from_values(b_row=b_row, cpu_cost=cpu, space_amp=amp, source="run-1")
    assert i.rows_per_repeat == 10000 and i.per_row_bytes["message_index"] == (82.0, 81.0, 83.0)
    assert i.fitted_mixes == ("chat_mix", "text_only") and i.row_model.fit.coefficients[0] == 300
    assert i.cpu_costs["cpu_ms_per_op"] == {"send": 2.0} and i.head_sstable_bytes == 5600 and i.missing() == []
    none = inputs_from_values(b_row=None, cpu_cost=None, space_amp=None, source="x")
    assert none.missing() == ["b_row (row model)", "space_amp (conversation_head bytes)", "cpu_cost"]
