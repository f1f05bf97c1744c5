"""Space amplification as the table ages, on synthetic series: each model recovers its overhead,
the better one is chosen, the later days check it, and the projection follows the model."""
from __future__ import annotations

import numpy as np
import pytest

from lab.calibration.capacity_model.aging import KEPT, PURGED, Mix, describe, fit_aging

MIX = Mix.from_design({"default": {"share": 0.93, "ttl_days": 30}, "compliance_hold": {"share": 0.07, "ttl_days": 0}},
                      window_days=1, gc_grace_days=1)


def _series(model: str, overhead: float, days, noise: float = 0.0, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [overhead * MIX.shape(model, t) * (1 + rng.normal(0, noise)) for t in days]


def test_the_shapes_start_at_one_and_part_once_rows_expire():
    assert MIX.never_share == pytest.approx(0.07) and MIX.lag_days == 2
    assert MIX.shape(KEPT, 10) == pytest.approx(1.0) and MIX.shape(PURGED, 10) == pytest.approx(1.0)
    assert MIX.shape(KEPT, 60) == pytest.approx(60 / (0.93 * 30 + 0.07 * 60))
    assert MIX.shape(PURGED, 60) == pytest.approx((0.93 * 32 + 0.07 * 60) / (0.93 * 30 + 0.07 * 60))
    assert MIX.shape(KEPT, 10_000) < 1 / 0.07  # bounded by the share that never expires


@pytest.mark.parametrize("model", [KEPT, PURGED])
def test_each_model_is_recovered_and_checked_on_the_later_days(model):
    days = list(range(5, 121, 5))
    fit = fit_aging(MIX, days, _series(model, 1.15, days, noise=0.01))
    assert fit.model == model and fit.overhead == pytest.approx(1.15, rel=0.02)
    assert fit.check_model == model and fit.check_ok
    assert fit.amp(MIX, 1095) == pytest.approx(1.15 * MIX.shape(model, 1095), rel=0.02)
    assert "met" in describe(fit, MIX, [365, 1095])


def test_a_series_that_follows_neither_model_misses_its_check():
    days = list(range(5, 121, 5))
    amps = [1.0 + 0.0005 * t ** 2 for t in days]  # grows faster than either model allows
    fit = fit_aging(MIX, days, amps)
    assert fit is not None and not fit.check_ok and "MISSED" in describe(fit, MIX, [365])


def test_too_few_days_give_no_fit_and_bad_points_are_left_out():
    assert fit_aging(MIX, [1, 2, 3], [1.0, 1.0, 1.0]) is None
    days = [0, 5, 10, 15, 20, 25, 30]
    fit = fit_aging(MIX, days, [np.nan, 1.1, 1.1, -1, 1.1, 1.1, 1.1])
    assert fit is not None and fit.days == (5.0, 10.0, 20.0, 25.0, 30.0)
    to_json = fit.to_json(MIX, [365])
    assert to_json["projected"] == {"365": round(fit.amp(MIX, 365), 3)} and to_json["never_share"] == pytest.approx(0.07)


def test_the_series_is_averaged_per_step_then_over_the_compaction_sawtooth():
    import pandas as pd

    from lab.calibration.capacity_model.aging import SAWTOOTH_STEPS, series_by_day

    rows = [{"scenario": "profile", "batch": 0, "replicate": r, "table": "message_record", "step": d, "sim_day": float(d),
             "node": 1, "disk_bytes": 100 * (1 + d % 2) + r * 10, "live_bytes": 100, "peak_bytes": 300}
            for d in range(1, 7) for r in (0, 1)]
    rows += [{**rows[0], "table": "message_index", "disk_bytes": 999}]
    days, amps = series_by_day(pd.DataFrame(rows), scenario="profile", table="message_record")
    per_day = [1 + d % 2 + 0.05 for d in range(1, 7)]  # the two replicates' mean
    assert days == [sum(range(k, k + SAWTOOTH_STEPS)) / SAWTOOTH_STEPS for k in range(1, 6 - SAWTOOTH_STEPS + 2)]
    assert amps == pytest.approx([sum(per_day[k:k + SAWTOOTH_STEPS]) / SAWTOOTH_STEPS for k in range(3)])
    assert series_by_day(pd.DataFrame(rows), scenario="expiring_only", table="message_record") == ([], [])
