"""The what-if of compliance_hold in a table of its own: its factor from a space_amp run's values,
and the capacity notebook's rows and words for it beside the design's one table."""
from __future__ import annotations


import pytest

from lab.calibration.capacity_model.hold_apart import HOLD_TABLE_SPACE_AMP, HoldApart
from lab.calibration.experiments import capacity, common

VALUES = {"never_expiring_share": 0.07, "expiring_only_message_record_space_amp_steady": 1.28,
          "expiring_only_halves": {"agree": True}, "lsm_space_amp": 2.1, "lsm_space_amp_stationary": False,
          "lsm_space_amp_halves": {"first": 1.8, "second": 2.4}}


def test_both_tables_together_weigh_each_factor_by_its_rows():
    h = HoldApart.from_values(VALUES)
    assert h.combined_amp == pytest.approx(0.93 * 1.28 + 0.07 * HOLD_TABLE_SPACE_AMP) and h.stationary


@pytest.mark.parametrize("change", [{"expiring_only_message_record_space_amp_steady": None},
                                   {"never_expiring_share": 0.0}, {"never_expiring_share": 1.0},
                                   {"expiring_only_message_record_space_amp_steady": "1.3"}])
def test_no_what_if_without_both_measures_or_rows_that_never_expire(change):
    assert HoldApart.from_values(VALUES | change) is None


def test_an_unsettled_factor_is_said(tmp_path):
    h = HoldApart.from_values(VALUES | {"expiring_only_halves": {"agree": False}})
    assert not h.stationary


def test_the_capacity_notebook_prices_the_what_if_beside_the_one_table(capacity_with_space_amp):
    r = capacity_with_space_amp(VALUES)
    values = r.values()
    assert values["hold_apart"]["combined_amp"] == pytest.approx(1.2604)
    for tier in (20_000_000, 100_000_000, 500_000_000):
        assert values[f"nodes_needed_hold_apart_{tier}"] >= values[f"nodes_needed_measured_{tier}"]  # 1.26 > 1.2
    text = capacity.conclusion(r)
    assert "What-if: compliance_hold in a table of its own" in text and "factor 1.26" in text
    assert "not stationary" in text  # the one table's measured factor, and why appendix B's is used
    none = capacity.run(capacity.Params(b_row_bytes=1400.0), constants=common.constants_from(None))
    assert "hold_apart" not in none.values() and "What-if" not in capacity.conclusion(none)


@pytest.mark.parametrize("make", ["directory", "not json", "a list"])
def test_a_space_amp_path_that_is_no_values_file_is_one_clear_line(tmp_path, make):
    from lab.errors import BadRunFile

    path = tmp_path / "space_amp"
    if make == "directory":
        path.mkdir()
    else:
        path.write_text("{not json" if make == "not json" else "[1, 2]")
    with pytest.raises(BadRunFile) as err:
        capacity.run(capacity.Params(b_row_bytes=1400.0, space_amp_values=str(path)),
                     constants=common.constants_from(None))
    assert str(path) in str(err.value) and "\n" not in str(err.value)
