"""lab.calibration.registry: one entry per notebook drives everything keyed by a notebook's name."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

from lab.calibration import notebooks, presets, recommendations
from lab.calibration.presets import declared_defaults
from lab.calibration.registry import MEASURES, NOTEBOOKS, SUITE
from lab.constants import read_entries

ROOT = Path(__file__).resolve().parents[2]


def test_each_entry_has_its_notebook_and_its_experiment():
    assert sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb")) == sorted(NOTEBOOKS)
    for spec in SUITE:
        module = importlib.import_module(spec.module)
        assert callable(module.run) and hasattr(module, "Params"), spec.name
        assert spec.what and spec.full_seconds > 0 and spec.quick_seconds > 0, spec.name


def test_the_quick_preset_and_the_run_inputs_name_declared_parameters():
    for spec in SUITE:
        declared = declared_defaults(spec.name)
        assert set(spec.quick) <= set(declared), spec.name
        assert set(spec.run_inputs) <= set(declared), spec.name
        for run_input in spec.run_inputs.values():  # read from a notebook that runs before it
            assert NOTEBOOKS.index(run_input.source) < NOTEBOOKS.index(spec.name), (spec.name, run_input.source)
            assert set(run_input.unless) <= set(declared), spec.name


def test_the_constants_measured_are_appendix_b_s_each_by_one_notebook():
    constants = [m.constant for m in MEASURES]
    assert len(constants) == len(set(constants))
    assert set(constants) <= set(read_entries())
    assert all(m.notebook in NOTEBOOKS for m in MEASURES)


def test_what_the_registry_drives():
    assert list(presets.QUICK_PARAMETERS) == list(NOTEBOOKS)
    assert list(presets.FULL_RUN_EXPECTED_SECONDS) == list(presets.QUICK_RUN_EXPECTED_SECONDS) == list(NOTEBOOKS)
    assert set(notebooks.RUN_INPUTS) == {s.name for s in SUITE if s.run_inputs}
    assert recommendations.MEASURES is MEASURES


def test_no_other_module_spells_out_the_suite():
    """A literal holding three or more notebook names outside the registry is a second registry."""
    names, found = set(NOTEBOOKS), []
    for path in sorted((ROOT / "lab").rglob("*.py")):
        if path.name == "registry.py" or "__pycache__" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            items = (node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else
                     node.keys if isinstance(node, ast.Dict) else [])
            spelled = {i.value for i in items if isinstance(i, ast.Constant) and i.value in names}
            if len(spelled) >= 3:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []
