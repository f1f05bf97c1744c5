"""lab.results.jsonio.flatten: a table's rows as a notebook's flat values (values.json)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from lab.errors import ValidationError
from lab.results.jsonio import flatten


def test_names_casts_and_renamed_columns():
    df = pd.DataFrame({"shape": ["a", "b"], "method": ["grouped", "naive"], "entries": [np.int64(5), np.int64(7)],
                       "p50_ms": [1.5, 2.0], "measured_before_expiry": [3, 4]})
    out = flatten(df, "{shape}_{method}_{value}",
                  {"entries": int, "p50_ms": float, "sstables": ("measured_before_expiry", int)})
    assert out == {"a_grouped_entries": 5, "a_grouped_p50_ms": 1.5, "a_grouped_sstables": 3,
                   "b_naive_entries": 7, "b_naive_p50_ms": 2.0, "b_naive_sstables": 4}
    assert all(type(out[k]) is int for k in ("a_grouped_entries", "b_naive_sstables"))
    assert list(out)[:3] == ["a_grouped_entries", "a_grouped_p50_ms", "a_grouped_sstables"]  # row by row


def test_a_list_of_columns_converts_to_json_types_and_nan_to_none():
    df = pd.DataFrame({"op": ["send"], "ms": [float("nan")], "n": [np.int32(3)], "basis": ["quiet"], "ok": [np.True_]})
    out = flatten(df, "cpu_{op}_{value}", ["ms", "n", "basis", "ok"])
    assert out == {"cpu_send_ms": None, "cpu_send_n": 3, "cpu_send_basis": "quiet", "cpu_send_ok": True}
    assert type(out["cpu_send_n"]) is int and type(out["cpu_send_ok"]) is bool


def test_a_column_name_alone_renames_and_a_format_spec_works():
    df = pd.DataFrame({"in_size": [10, 100], "b_row_mean_bytes": [np.float64(1.25), np.float64(2.5)]})
    assert flatten(df, "in{in_size:04d}_{value}", {"bytes": "b_row_mean_bytes"}) == {
        "in0010_bytes": 1.25, "in0100_bytes": 2.5}
    converted = flatten(df.assign(x=[float("nan"), 1.0]), "r{in_size}_{value}", {"x": float})
    assert math.isnan(converted["r10_x"])  # an explicit cast is applied as given


def test_rows_that_give_the_same_name_are_refused_and_empty_tables_give_nothing():
    df = pd.DataFrame({"source": ["m", "m"], "tier": [1, 2], "v": [1, 2]})
    with pytest.raises(ValidationError, match="missing a key column"):
        flatten(df, "{source}_{value}", {"v": int})
    assert flatten(df.iloc[:0], "{source}_{value}", {"v": int}) == {}
