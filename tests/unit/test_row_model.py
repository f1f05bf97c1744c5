"""b_row for any mix: least squares with intervals (lab.measure.regression) and the row model
(lab.calibration.capacity_model.row_model): composition of workload rows, the fit, the held-out check, a
mix priced that was never generated."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from lab.calibration.capacity_model.row_model import (COEFFICIENTS, DESIGN_MIXES, REGRESSORS, RowModel, composition, fit_row_model,
                                       mix_profile)
from lab.errors import ValidationError
from lab.measure import LinearFit, fit_linear
from lab.results.jsonio import dumps
from lab.workload import generate


def test_fit_linear_recovers_known_coefficients_with_intervals_covering_them():
    rng = np.random.default_rng(3)
    x = np.column_stack([np.ones(40), rng.uniform(0, 1000, 40), rng.uniform(0, 200, 40)])
    y = x @ np.array([130.0, 1.02, 0.9]) + rng.normal(0, 5, 40)
    fit = fit_linear(x, y, ("overhead", "a", "b"))
    for i, true in enumerate((130.0, 1.02, 0.9)):
        assert fit.ci_low[i] <= true <= fit.ci_high[i]
    assert fit.dof == 37 and 3 < fit.residual_sd < 8 and fit.r_squared > 0.99
    p = fit.predict({"overhead": 1, "a": 500, "b": 100})
    assert p["prediction_low"] < p["ci_low"] < p["mean"] < p["ci_high"] < p["prediction_high"]
    assert p["mean"] == pytest.approx(130 + 510 + 90, abs=10)
    assert LinearFit.from_json(fit.to_json()) == fit


def test_fit_linear_refuses_a_design_that_cannot_separate_its_columns():
    x = np.column_stack([np.ones(6), np.arange(6.0), 2 * np.arange(6.0)])
    with pytest.raises(ValueError, match="linearly dependent"):
        fit_linear(x, np.arange(6.0), ("o", "a", "b"))
    with pytest.raises(ValueError, match="observations"):
        fit_linear(np.ones((2, 2)), [1.0, 2.0], ("o", "a"))


def test_composition_counts_what_the_store_receives():
    text = composition(generate("text_only", size=300, seed=0).messages)
    assert text["media_metadata_bytes"] == text["thumbnail_bytes"] == text["media_share"] == 0
    assert text["payload_bytes"] > 20
    photos = composition(generate(mix_profile("photos_small_thumbs"), size=300, seed=0).messages)
    files = composition(generate(mix_profile("files_audio"), size=300, seed=0).messages)
    assert photos["thumbnail_bytes"] > 500 and files["thumbnail_bytes"] == 0 < files["media_metadata_bytes"]
    big = composition(generate(mix_profile("photos_large_thumbs"), size=300, seed=0).messages)
    assert big["thumbnail_bytes"] > 5 * photos["thumbnail_bytes"]
    assert set(DESIGN_MIXES) <= {"text_long", "files_audio", "photos_small_thumbs", "photos_large_thumbs"}
    with pytest.raises(ValidationError):
        composition(pd.DataFrame({"body_bytes": []}))


def _observations(truth=(130.0, 1.03, 0.9, 1.02), noise=2.0) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    rows = []
    means = {"text_only": (90, 0, 0), "text_long": (970, 0, 0), "files_audio": (16, 80, 0),
             "photos_small_thumbs": (345, 105, 1480), "chat_mix": (280, 20, 900)}
    for mix, (pay, meta, thumb) in means.items():
        for r in range(3):
            x = np.array([pay, meta, thumb]) * rng.uniform(0.95, 1.05, 3)
            rows.append({"mix": mix, "repeat": r, **dict(zip(REGRESSORS, x)),
                         "b_row_bytes": truth[0] + x @ np.array(truth[1:]) + rng.normal(0, noise)})
    return pd.DataFrame(rows)


def test_the_row_model_is_checked_on_the_held_out_profile_and_prices_any_mix():
    model = fit_row_model(_observations(), held_out="chat_mix")
    assert model.fit.names == COEFFICIENTS and "chat_mix" not in model.mixes
    h = model.held_out
    assert h.profile == "chat_mix" and abs(h.relative_error) < 0.02 and h.agrees
    priced = model.predict({"payload_bytes": 200, "thumbnail_bytes": 3000})  # a mix never generated
    assert priced["mean"] == pytest.approx(130 + 1.03 * 200 + 1.02 * 3000, rel=0.02)
    assert priced["ci_low"] < priced["mean"] < priced["ci_high"]
    assert RowModel.from_json(model.to_json()).predict({"payload_bytes": 200}) == model.predict({"payload_bytes": 200})
    with pytest.raises(ValidationError, match="unknown mix keys"):
        model.predict({"payload": 10})
    with pytest.raises(ValidationError):
        model.predict({"payload_bytes": -1})


def test_a_wrong_model_fails_the_held_out_check():
    obs = _observations()
    obs.loc[obs.mix == "chat_mix", "b_row_bytes"] += 400  # the held-out profile carries what the fit cannot see
    assert not fit_row_model(obs, held_out="chat_mix").held_out.agrees
    assert fit_row_model(obs, held_out=None).held_out is None


def test_the_capacity_notebook_prices_my_mix_from_the_b_row_run(tmp_path):
    import json

    from lab.calibration.experiments import capacity
    from lab.constants import Constants

    model = fit_row_model(_observations(), held_out="chat_mix")
    values = tmp_path / "values.json"
    values.write_text(json.dumps({"b_row_bytes": 1200.0, "row_model": model.to_json()}))
    mix = {"payload_bytes": 120.0, "media_metadata_bytes": 25.0, "thumbnail_bytes": 2000.0}
    result = capacity.run(capacity.Params(b_row_values=str(values), my_mix=mix), constants=Constants.appendix_b())
    v = result.values()
    assert v["my_mix_b_row_bytes"] == pytest.approx(model.predict(mix)["mean"])
    assert set(result.sizing.source) == {"design", "measured", "my_mix"}
    assert v["resident_tb_my_mix_20000000"] > 0 and "Your mix" in capacity.conclusion(result)
    assert v["my_mix_name"] == "my_mix" and v["my_mix_source"] == "composition" and v["my_mix_from"] == "given"
    # no row model in the b_row run and none beside it: an error naming why, not an "ok" run with the mix unpriced
    from lab.errors import CalibrationError

    values.write_text(json.dumps({"b_row_bytes": 1200.0}))
    with pytest.raises(CalibrationError, match="my_mix cannot be priced"):
        capacity.run(capacity.Params(b_row_values=str(values), my_mix=mix, run_dir=str(tmp_path / "run")),
                     constants=Constants.appendix_b())


def test_a_held_out_measured_without_an_interval_reads_back_from_values_json():
    # two repeats of the held-out profile: NaN bounds, written to values.json as null
    obs = _observations()
    obs = obs[(obs.mix != "chat_mix") | (obs.repeat < 2)]
    model = fit_row_model(obs, held_out="chat_mix")
    back = RowModel.from_json(json.loads(dumps(model.to_json())))
    assert back.held_out.measured_ci_low is None and back.held_out.agrees == model.held_out.agrees
    assert back.to_json()["held_out"]["agrees"] == model.held_out.agrees
