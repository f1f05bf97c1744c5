"""Crafted values files as the capacity notebook's inputs: every field of a cpu_cost, cpu_curve,
knee, space_amp and b_row run's values.json replaced, one at a time, by a value of another kind. The
notebook either prices without that input (and says why) or stops with one lab error: never a
traceback of its own (a colleague's run folder is input too)."""
from __future__ import annotations

import json
import math

import pytest

from lab.calibration.experiments import capacity, common
from lab.errors import LabError
from tests.unit.test_aged_table import VALUES as AGED
from tests.unit.test_curve_pricing import CURVE
from tests.unit.test_hold_apart import VALUES as APART

CPU = {"operations": ["send"], "measured_replication_factor": 1, "cpu_send_server_ms_per_op": 10.5,
       "cpu_send_requests_per_op": 6.0}
KNEE = {"knee_sends_per_second_per_node": 60.0, "knee_node_available_cores": 1.0, "knee_status": "found",
        "slo": "p99<=50ms", "min_calls": 1000, "knee_spread": {"searches": 3, "spread": 0.1, "range": [50.0, 60.0]}}
B_ROW = {"b_row_bytes": 1210.0, "b_row_ci_low_bytes": 1190.0, "b_row_ci_high_bytes": 1230.0, "b_row_precision": {"too_few_rounds": False},
         "shards_per_node": 1}
INPUTS = {"b_row_values": B_ROW, "cpu_values": CPU, "knee_values": KNEE, "space_amp_values": AGED | APART,
          "cpu_curve_values": {"cpu_curve": CURVE.to_json(), "usable_points": 4, "measured_replication_factor": 1,
                               "operations_per_message": {"send": 1.0}}}
ODD = ["x", [], {}, None, True, -1, 0, 1e308, math.nan, [1, "a"], {"a": "b"}]


def _variants(values: dict):
    """(label, values) with one field, or one field of a nested object or list, replaced."""
    for key, value in values.items():
        for odd in ODD:
            yield f"{key}={odd!r}", values | {key: odd}
        if isinstance(value, dict):
            for inner in value:
                for odd in ODD:
                    yield f"{key}.{inner}={odd!r}", values | {key: value | {inner: odd}}
        if isinstance(value, list) and value and isinstance(value[0], dict):
            for inner in value[0]:
                for odd in ODD:
                    yield f"{key}[0].{inner}={odd!r}", values | {key: [value[0] | {inner: odd}, *value[1:]]}


def _run(tmp_path, name: str, values) -> None:
    paths = {}
    for param, base in INPUTS.items():
        path = tmp_path / f"{param}.json"
        path.write_text(json.dumps(values if param == name else base))
        paths[param] = str(path)
    params = capacity.Params(operations_per_message={"send": 1.0}, **paths)
    try:
        result = capacity.run(params, constants=common.constants_from(None))
        json.dumps(result.values(), default=str)
        capacity.conclusion(result)
    except LabError as exc:
        assert "\n" not in str(exc).strip()


def test_the_untouched_inputs_price_every_side(tmp_path):
    paths = {}
    for param, base in INPUTS.items():
        (tmp_path / f"{param}.json").write_text(json.dumps(base))
        paths[param] = str(tmp_path / f"{param}.json")
    v = capacity.run(capacity.Params(operations_per_message={"send": 1.0}, **paths),
                     constants=common.constants_from(None)).values()
    assert v["b_row_measured_bytes"] == 1210.0
    assert v["nodes_cpu_curve_20000000"] and v["hold_apart"] and v["aged"]
    assert v["nodes_knee_20000000"] >= 1


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_a_crafted_field_is_priced_without_or_refused_in_one_line(tmp_path, name):
    failures = []
    for label, values in _variants(INPUTS[name]):
        try:
            _run(tmp_path, name, values)
        except Exception as exc:  # noqa: BLE001 - the test names every field that breaks the notebook
            failures.append(f"{label}: {type(exc).__name__}: {str(exc)[:80]}")
    assert not failures, "\n".join(failures[:30])
