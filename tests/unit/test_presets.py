"""Notebook presets (quick / full) with the expected duration, and run_name: what a notebook's
setup cell does with its parameters cell (no node)."""
from __future__ import annotations

import nbformat
import pytest

from lab.calibration.experiments.common import Output
from lab.calibration.notebooks import notebook_path
from lab.calibration.presets import (
    FULL_RUN_EXPECTED_SECONDS,
    QUICK_PARAMETERS,
    QUICK_RUN_EXPECTED_SECONDS,
    apply_preset,
    declared_defaults,
    expected_seconds,
)
from lab.calibration.registry import NOTEBOOKS
from lab.errors import ValidationError


def test_quick_sets_the_parameters_still_at_their_defaults_and_prints_the_duration(capsys, tmp_path):
    namespace = declared_defaults("b_row")
    namespace["fit_rows"] = 123  # edited by the user: kept
    out = Output(tmp_path / "b_row")
    changed = apply_preset("b_row", "quick", namespace, out=out)
    assert namespace["rows"] == QUICK_PARAMETERS["b_row"]["rows"] == changed["rows"]
    assert namespace["fit_rows"] == 123 and "fit_rows" not in changed
    line = capsys.readouterr().out.strip()
    assert line.startswith("b_row runs with edited parameters (quick preset about 2 min, full about 17 min")
    assert "kept your fit_rows" in line
    assert out.values["preset"] == "custom"  # quick, but one parameter edited
    namespace = declared_defaults("b_row")
    apply_preset("b_row", "quick", namespace, out=out)
    assert out.values["preset"] == "quick"
    line = capsys.readouterr().out.strip()
    assert line.startswith("b_row runs with the quick parameters: expected about 2 min on the lab's 2-core machine "
                           "(full: about 17 min)") and "smoke test" in line


def test_full_and_none_change_nothing_and_say_what_the_cell_costs(capsys, tmp_path):
    namespace = declared_defaults("in_limit")
    before = dict(namespace)
    out = Output(tmp_path / "in_limit")
    assert apply_preset("in_limit", None, namespace, out=out) == {} and namespace == before
    assert out.values["preset"] == "full"
    assert capsys.readouterr().out.startswith("in_limit runs with the full parameters: expected about 6 min")
    assert apply_preset("in_limit", "full", namespace) == {} and namespace == before
    with pytest.raises(ValidationError, match="preset must be one of quick, full"):
        apply_preset("in_limit", "fast", namespace)


def test_every_notebook_has_a_preset_and_a_run_name_and_applies_the_preset():
    for name in NOTEBOOKS:
        defaults = declared_defaults(name)
        assert "preset" in defaults and defaults["preset"] is None, name
        assert "run_name" in defaults and defaults["run_name"] is None, name
        assert set(QUICK_PARAMETERS.get(name, {})) <= set(defaults), name
        setup = "\n".join(c.source for c in nbformat.read(notebook_path(name), as_version=4).cells
                          if c.cell_type == "code" and "parameters" not in c.metadata.get("tags", []))
        assert f'apply_preset("{name}", preset, globals(), out=out)' in setup, name
        assert "run_name=run_name" in setup, name
        # the preset is applied before the parameters are read into the experiment's Params
        assert setup.index("apply_preset(") < setup.index("Params("), name


def test_expected_durations_cover_the_suite():
    assert set(FULL_RUN_EXPECTED_SECONDS) == set(NOTEBOOKS) == set(QUICK_RUN_EXPECTED_SECONDS)
    assert expected_seconds("quick", NOTEBOOKS) < expected_seconds("full", NOTEBOOKS)


def test_the_readme_quotes_the_presets_durations():
    """One statement of the run durations: the README says what presets says."""
    from lab.calibration.presets import minutes
    from lab.project import PROJECT_DIR

    readme = " ".join((PROJECT_DIR / "README.md").read_text().split())
    from lab.calibration.presets import FULL_RUN_WALL_SECONDS, QUICK_RUN_WALL_SECONDS

    budgets, quick = minutes(expected_seconds("full", NOTEBOOKS)), minutes(QUICK_RUN_WALL_SECONDS)
    full = minutes(FULL_RUN_WALL_SECONDS)
    assert f"up to {budgets}" in readme and f"{quick} measured" in readme and f"{full} measured" in readme
    # the figures the README once quoted for a whole run, none of them measured
    assert not any(stale in readme for stale in ("about 50 min", "12-25 min", "not yet timed"))


def test_output_for_a_named_run(tmp_path, capsys):
    out = Output.for_notebook("b_row", None, results=tmp_path, run_name="my-product")
    assert out.dir == tmp_path / "my-product" / "b_row"
    out.value("b_row_bytes", 1.0)
    again = Output.for_notebook("b_row", None, results=tmp_path, run_name="my-product")
    assert again.values == {}  # a rerun replaces that notebook's results of the run, never mixes them
    assert "replacing the b_row results of run my-product" in capsys.readouterr().out
    assert not (tmp_path / "my-product" / "b_row" / "values.json").exists()
    other = Output.for_notebook("capacity", None, results=tmp_path, run_name="my-product")
    assert other.dir.parent == out.dir.parent  # notebooks of one named run share its folder
    for bad in ("../escape", ".hidden", "a/b", ""):
        with pytest.raises(ValidationError, match="run_name"):
            Output.for_notebook("b_row", None, results=tmp_path, run_name=bad)
