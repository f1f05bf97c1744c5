"""The knee of an unseen mix on synthetic figures: cpu_cost's prices read defensively, the mix's
shares from the profile's weights and the measured split, the scaled knee, and its check."""
from __future__ import annotations

import json
import math

import pytest

from lab.errors import ValidationError
from lab.load.knee_mix import KNEE_TOLERANCE, MixCheck, OpCost, kind_split, mix_shares, ms_per_call, op_costs, predict
from lab.load.knee_search import FOUND, NOT_MET, Knee, KneeStep, SearchPlan, Slo
from lab.load.verdict import VALID

SLO = Slo.parse("p99<=50ms")
PLAN = SearchPlan(start_rate=20, max_steps=8, min_calls=1000)
COSTS = {"send": OpCost(server_ms=6.0, loadgen_ms=4.0), "history_latest": OpCost(server_ms=3.0, loadgen_ms=1.0),
         "history_older": OpCost(server_ms=3.0, loadgen_ms=2.0), "react": OpCost(server_ms=5.0, loadgen_ms=3.0)}
# a knee step of the capacity-like mix: 10 sends (1 retry), 22 reader calls, 3 reactor calls per 35
COUNTS = {"send": 900, "send_retry": 100, "history_latest": 2000, "history_older": 200, "react": 200,
          "unreact": 50, "self_reaction": 50}


def knee(*rates_latencies: tuple[float, float], nodes: int = 1) -> Knee:
    steps = tuple(KneeStep(number=i + 1, requested_rate=r, achieved_rate=r, sends_per_second=r / 3.5, calls=5000,
                           latency_ms=lat, verdict=VALID, node_cores=0.5) for i, (r, lat) in enumerate(rates_latencies))
    return Knee(slo=SLO, plan=PLAN, steps=steps, nodes=nodes)


def test_prices_are_read_only_where_they_are_numbers():
    values = {"cpu_send_server_ms_per_op": 6.0, "cpu_send_loadgen_ms_per_op": 4,
              "cpu_react_server_ms_per_op": "5", "cpu_react_loadgen_ms_per_op": 3.0,
              "cpu_history_latest_server_ms_per_op": math.nan, "cpu_history_latest_loadgen_ms_per_op": 1.0,
              "cpu_history_older_server_ms_per_op": True, "cpu_history_older_loadgen_ms_per_op": 1.0,
              "cpu_unreact_server_ms_per_op": 1.0, "cpu_unreact_loadgen_ms_per_op": 1.0}
    assert op_costs(values) == {"send": OpCost(server_ms=6.0, loadgen_ms=4.0)}
    assert op_costs([1, 2]) == {} and op_costs(None) == {} and op_costs("x") == {}


def test_the_mix_takes_the_profile_weights_and_each_kind_split_as_measured():
    split = kind_split(COUNTS)
    assert split["sender"] == pytest.approx({"send": 0.9, "send_retry": 0.1})
    assert split["history_reader"] == pytest.approx({"history_latest": 2000 / 2200, "history_older": 200 / 2200})
    shares = mix_shares({"sender": 1, "history_reader": 0, "reactor": 0}, split)
    assert shares == pytest.approx({"send": 0.9, "send_retry": 0.1})
    shares = mix_shares({"sender": 10, "history_reader": 44, "reactor": 3}, split)
    assert sum(shares.values()) == pytest.approx(1.0)
    assert shares["history_latest"] == pytest.approx(44 / 57 * 2000 / 2200)
    with pytest.raises(ValidationError, match="backfill_joiner"):
        mix_shares({"sender": 1, "backfill_joiner": 1}, split)


def test_operations_without_a_price_take_the_one_they_resemble_and_none_is_refused():
    shares = {"send": 0.5, "send_retry": 0.25, "unreact": 0.25}
    assert ms_per_call(shares, COSTS) == pytest.approx(0.75 * 10.0 + 0.25 * 8.0)
    with pytest.raises(ValidationError, match="history_older"):
        ms_per_call({"history_older": 1.0}, {"send": COSTS["send"]})


def test_the_unseen_knee_scales_the_measured_one_by_cpu_per_call():
    base = knee((70, 10), (140, 20), (280, 80), (200, 40))
    assert base.status == FOUND and base.step.achieved_rate == 200
    p = predict(base, base_profile="capacity", base_counts=COUNTS, profile="send_only",
                weights={"sender": 1}, costs=COSTS)
    total = sum(COUNTS.values())
    base_ms = (1000 * 10 + 2000 * 4 + 200 * 5 + 300 * 8) / total
    assert p.base_ms_per_call == pytest.approx(base_ms) and p.ms_per_call == pytest.approx(10.0)
    assert p.calls_per_second == pytest.approx(200 * base_ms / 10.0)
    assert p.sends_per_second == pytest.approx(p.calls_per_second * 0.9)
    two = predict(knee((70, 10), (140, 20), (280, 80), (200, 40), nodes=2), base_profile="capacity",
                  base_counts=COUNTS, profile="send_only", weights={"sender": 1}, costs=COSTS)
    assert two.calls_per_second == pytest.approx(p.calls_per_second / 2)  # per node


def test_no_knee_predicts_nothing():
    none = knee((70, 60))
    assert none.status == NOT_MET
    with pytest.raises(ValidationError, match="found no knee"):
        predict(none, base_profile="capacity", base_counts=COUNTS, profile="send_only", weights={"sender": 1},
                costs=COSTS)


@pytest.mark.parametrize(("measured_rate", "ok"), [(100, True), (100 / (1 + KNEE_TOLERANCE) + 0.5, True),
                                                    (100 / (1 + KNEE_TOLERANCE) - 0.5, False), (130, False)])
def test_the_check_compares_the_prediction_with_the_unseen_mix_own_knee(measured_rate, ok):
    base = knee((70, 10), (140, 20), (280, 80), (200, 40))
    p = predict(base, base_profile="capacity", base_counts=COUNTS, profile="send_only", weights={"sender": 1},
                costs=COSTS)
    p = type(p)(**{**p.__dict__, "calls_per_second": 100.0})
    found = knee((measured_rate / 2, 10), (measured_rate, 30), (measured_rate * 2, 90))
    check = MixCheck(predicted=p, knee=found)
    assert check.measured_calls_per_second == pytest.approx(measured_rate)
    assert check.ok is ok and ("met" if ok else "MISSED") in check.describe()
    assert check.to_json()["error"] == pytest.approx(100 / measured_rate - 1)


def test_an_unseen_search_without_a_knee_is_not_checked():
    base = knee((70, 10), (140, 20), (280, 80), (200, 40))
    p = predict(base, base_profile="capacity", base_counts=COUNTS, profile="send_only", weights={"sender": 1},
                costs=COSTS)
    check = MixCheck(predicted=p, knee=knee((50, 70)))
    assert check.error is None and check.ok is None and "not checked" in check.describe()


def _files(tmp_path, values) -> tuple:
    """A knee whose step's load folder holds a summary.json of COUNTS, and a cpu_cost values file."""
    from lab.calibration.experiments.knee import Params

    step_dir = tmp_path / "search" / "knee-3"
    step_dir.mkdir(parents=True)
    (step_dir / "summary.json").write_text(json.dumps({"operations": {op: {"count": n} for op, n in COUNTS.items()}}))
    cpu = tmp_path / "cpu_cost" / "values.json"
    cpu.parent.mkdir()
    cpu.write_text(values if isinstance(values, str) else json.dumps(values))
    steps = tuple(KneeStep(number=i + 1, requested_rate=r, achieved_rate=r, sends_per_second=r / 3.5, calls=5000,
                           latency_ms=lat, verdict=VALID, load_dir=str(step_dir if r == 200 else tmp_path))
                  for i, (r, lat) in enumerate(((70, 10), (140, 20), (280, 80), (200, 40))))
    return Knee(slo=SLO, plan=PLAN, steps=steps), Params(unseen_profile="send_only", cpu_values=str(cpu))


def test_the_notebook_predicts_from_the_knee_step_counts_and_the_cpu_cost_values(tmp_path):
    from lab.calibration.experiments.knee import predict_unseen

    prices = {f"cpu_{op}_{part}_ms_per_op": getattr(c, f"{part}_ms")
              for op, c in COSTS.items() for part in ("server", "loadgen")}
    found, params = _files(tmp_path, prices)
    p = predict_unseen(params, found)
    direct = predict(found, base_profile="capacity", base_counts=COUNTS, profile="send_only", weights={"sender": 1},
                     costs=COSTS)
    assert p == direct


@pytest.mark.parametrize("values", ["{not json", "[1, 2]", "\udcff", None])
def test_a_crafted_or_missing_cpu_values_file_is_one_clear_reason_not_a_crash(tmp_path, values):
    from dataclasses import replace

    from lab.calibration.experiments.knee import predict_unseen

    found, params = _files(tmp_path, "{}" if values is None or values == "\udcff" else values)
    if values == "\udcff":
        (tmp_path / "cpu_cost" / "values.json").write_bytes(b"\xff\xfe{")
    if values is None:
        params = replace(params, cpu_values=str(tmp_path / "cpu_cost"))  # a directory, not a file
    with pytest.raises(ValidationError) as err:
        predict_unseen(params, found)
    # one line: the file named with what is wrong with it, or what it does not price
    assert "cpu_cost" in str(err.value) and "\n" not in str(err.value)
