"""The what-if of message_record at its projected age: read from a space_amp run's values, priced
by the capacity notebook beside the factor of the main rows, and shown in the report's table."""
from __future__ import annotations


import pytest

from lab.calibration import capacity_section
from lab.calibration.capacity_model.aging import AgedTable
from lab.calibration.experiments import capacity

AGING = {"model": "kept", "overhead": 1.1, "check_ok": True, "projected": {"1095": 3.4}}
VALUES = {"lsm_space_amp_projected": 3.4, "projection_age_days": 1095, "lsm_space_amp_aging": AGING,
          "lsm_space_amp": 2.1, "lsm_space_amp_stationary": False}


def test_the_projection_is_read_only_when_whole():
    a = AgedTable.from_values(VALUES)
    assert (a.amp, a.age_days, a.model, a.check_ok) == (3.4, 1095, "kept", True)
    for change in ({"lsm_space_amp_projected": None}, {"lsm_space_amp_projected": True},
                   {"lsm_space_amp_projected": -1.0}, {"projection_age_days": "1095"},
                   {"lsm_space_amp_aging": {"model": "other"}}):
        assert AgedTable.from_values(VALUES | change) is None


def test_the_capacity_notebook_and_the_report_price_the_table_at_its_age(capacity_with_space_amp):
    r = capacity_with_space_amp(VALUES)
    v = r.values()
    assert v["aged"] == {"amp": 3.4, "age_days": 1095, "model": "kept", "check_ok": True}
    for tier in (20_000_000, 100_000_000, 500_000_000):
        assert v[f"resident_tb_aged_{tier}"] == pytest.approx(v[f"resident_tb_measured_{tier}"] * 3.4 / 1.2, rel=1e-9)
        assert v[f"nodes_needed_aged_{tier}"] >= v[f"nodes_needed_measured_{tier}"]
    assert "What-if: message_record at 1095 days old" in capacity.conclusion(r)
    html = capacity_section.render({"notebooks": {"capacity": {"values": v}}})
    assert "what-if: message_record at 1,095 days (factor 3.4, &#x27;kept&#x27; model)" in html
    missed = AgedTable.from_values(VALUES | {"lsm_space_amp_aging": AGING | {"check_ok": False}})
    assert missed.check_ok is False
