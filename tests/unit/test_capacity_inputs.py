"""What the capacity notebook reads (no node): the b_row run of this run folder or the latest one
beside it (and which), your mix priced from a profile with the sampling of its generated
messages in the interval, each input's confidence, and calibration.json's my_mix summary."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lab.calibration.capacity_model import capacity_inputs as ci
from lab.calibration.capacity_model.row_model import REGRESSORS, fit_row_model
from lab.calibration.experiments import capacity
from lab.constants import Constants
from lab.errors import CalibrationError, ConfigError, ValidationError


def _model():
    rng = np.random.default_rng(3)
    rows = []
    means = {"text_only": (90, 0, 0), "text_long": (970, 0, 0), "files_audio": (16, 80, 0),
             "photos_small_thumbs": (345, 105, 1480), "photos_large_thumbs": (345, 105, 19000)}
    for mix, comp in means.items():
        for r in range(3):
            x = np.array(comp) * rng.uniform(0.95, 1.05, 3)
            rows.append({"mix": mix, "repeat": r, **dict(zip(REGRESSORS, x)),
                         "b_row_bytes": 130 + x @ np.array([1.03, 0.9, 1.02]) + rng.normal(0, 2)})
    return fit_row_model(pd.DataFrame(rows), held_out=None)


def _b_row_run(results: Path, run_id: str, *, model: bool = True, mode: str | None = "quick", mtime: float) -> Path:
    folder = results / run_id / "b_row"
    folder.mkdir(parents=True)
    values = {"b_row_bytes": 1250.0, "b_row_ci_low_bytes": 1230.0, "b_row_ci_high_bytes": 1270.0,
              "b_row_precision": {"target_rel_half_width": 0.1, "achieved_rel_half_width": 0.016, "status": "reached",
                                  "steps": 3}}
    if model:
        values["row_model"] = _model().to_json()
    (folder / "values.json").write_text(json.dumps(values))
    if mode:
        (results / run_id / "calibration.json").write_text(json.dumps({"run_id": run_id, "mode": mode}))
    os.utime(folder / "values.json", (mtime, mtime))
    return folder / "values.json"


def test_the_b_row_run_of_this_run_else_the_latest_beside_it(tmp_path):
    results = tmp_path / "results"
    _b_row_run(results, "old", mtime=1_000_000)
    newest = _b_row_run(results, "new", mtime=2_000_000)
    _b_row_run(results, "newest-without-model", model=False, mtime=3_000_000)
    here = results / "this"
    here.mkdir()
    found = ci.locate_b_row(here, need_row_model=True)
    assert found.path == newest and found.run_id() == "new" and found.how.startswith("the latest b_row run in ")
    assert ci.locate_b_row(here).run_id() == "newest-without-model"  # the measured b_row needs no model
    own = _b_row_run(results, "this", mtime=500)
    assert ci.locate_b_row(here, need_row_model=True) == ci.Located(path=own, how="this run")
    lonely = tmp_path / "elsewhere" / "run"
    lonely.mkdir(parents=True)
    assert ci.locate_b_row(lonely).path is None and "no b_row run in this run or beside it" in ci.locate_b_row(lonely).how
    with pytest.raises(CalibrationError, match="my_mix cannot be priced: no b_row run"):
        ci.row_model_of(ci.locate_b_row(lonely, need_row_model=True))


def test_a_profile_is_priced_with_its_sampling_in_the_interval():
    model = _model()
    spec = ci.resolve_mix("example_mix")
    assert spec.name == "example_mix" and spec.source == "datasets/profiles/example_mix.toml"
    priced = ci.price(spec, model, rows=4000)
    assert priced.rows == 4000 and priced.sample_ci is not None
    assert priced.ci_low < priced.model_ci[0] <= priced.b_row_bytes <= priced.model_ci[1] < priced.ci_high
    assert priced.b_row_bytes == pytest.approx(model.predict(priced.composition)["mean"])
    given = ci.price(ci.resolve_mix(dict(priced.composition)), model)
    assert given.name == "my_mix" and given.source == "composition" and given.sample_ci is None
    assert given.b_row_bytes == pytest.approx(priced.b_row_bytes) and given.ci_high < priced.ci_high
    with pytest.raises(ConfigError, match="no workload profile 'nope'"):
        ci.resolve_mix("nope")
    with pytest.raises(ValidationError, match="unknown keys payload"):
        ci.resolve_mix({"payload": 1})


def test_inputs_carry_their_confidence(tmp_path):
    quick = _b_row_run(tmp_path, "q", mode="quick", mtime=1)
    full = _b_row_run(tmp_path, "f", mode="full", mtime=2)
    kwargs = {"measured": "b_row_bytes", "ci": ("b_row_ci_low_bytes", "b_row_ci_high_bytes"),
              "precision": "b_row_precision"}
    assert ci.input_confidence(quick, **kwargs) == "low"
    assert ci.input_confidence(full, **kwargs) == "high"
    assert ci.input_confidence(full, **kwargs, unresolved=True) == "low"
    assert ci.input_confidence(None, **kwargs) is None
    assert ci.weakest("high", None, "medium") == "medium" and ci.weakest(None) is None


def test_the_capacity_conclusion_and_summary_give_the_mix_nodes_per_tier(tmp_path):
    results = tmp_path / "results"
    _b_row_run(results, "b", mtime=1)
    run = results / "capacity-only"
    run.mkdir()
    result = capacity.run(capacity.Params(b_row_values="auto", run_dir=str(run), my_mix="example_mix",
                                          my_mix_rows=3000), constants=Constants.appendix_b())
    values = result.values()
    assert values["b_row_run"] == values["my_mix_run"] == "b" and values["b_row_confidence"] == "low"
    text = capacity.conclusion(result)
    assert "the b_row run b, the latest b_row run in" in text and "**Your mix `example_mix`**" in text
    assert "; low confidence) by the row model" in text and "(low confidence))" not in text  # one level of ()
    for tier in ("20,000,000", "100,000,000", "500,000,000"):
        assert f"- {tier} messages/day: " in text.split("**Your mix", 1)[1]
    summary = ci.my_mix_summary(json.loads(json.dumps(values)))
    assert summary["name"] == "example_mix" and summary["confidence"] == "low" and summary["row_model_run"] == "b"
    assert summary["nodes_disk"] == {t: values[f"nodes_needed_my_mix_{t}"] for t in ("20000000", "100000000", "500000000")}
    assert summary["nodes_cpu"] == {}  # no cpu_cost run: disk-bound only
    assert ci.my_mix_summary({}) is None
