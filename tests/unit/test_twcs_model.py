"""lab.calibration.capacity_model.twcs_model: TWCS's window arithmetic on hand-worked flushes."""
from __future__ import annotations

import ast
from pathlib import Path

from lab.calibration.capacity_model.twcs_model import (MIN_THRESHOLD, count_after_expiry, per_group, predicted_count,
                                                       simulate_twcs)

ROOT = Path(__file__).resolve().parents[2]


def test_the_newest_window_compacts_at_min_threshold():
    assert MIN_THRESHOLD == 4
    assert simulate_twcs([0, 0, 0, 0, 0]) == [1, 2, 3, 1, 2]


def test_an_older_window_compacts_to_one_once_a_newer_one_exists():
    assert simulate_twcs([0, 0, 1]) == [1, 2, 2]
    assert simulate_twcs([0, 0, 0, 1, 2, 2]) == [1, 2, 3, 2, 3, 4]


def test_expired_sstables_are_dropped_only_when_a_compaction_check_runs():
    windows, expiring = [0, 1, 2], [True, True, False]
    assert count_after_expiry(windows, expiring, trigger_window=None) == 3  # no check ran: all still there
    assert count_after_expiry(windows, expiring, trigger_window=2) == 2     # w0, w1 dropped; w2 holds two


def test_compaction_groups_are_counted_apart_and_summed():
    windows, groups = [0, 0, 0, 0], [{"a"}, {"a", "b"}, {"a"}, {"a"}]
    assert per_group(windows, groups, "b") == [0]
    assert predicted_count(windows, groups) == 1 + 1  # a: four flushes in one window compact to one; b: one
    assert predicted_count([], []) == 0


def test_the_capacity_model_never_imports_an_experiment():
    """The experiments import the model; the model imports no experiment, nor the runner or the report."""
    bad = []
    for path in sorted((ROOT / "lab" / "calibration" / "capacity_model").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            mods = ([node.module or ""] if isinstance(node, ast.ImportFrom) else
                    [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            for m in mods:
                if m.startswith(("lab.calibration.experiments", "lab.calibration.calibrate", "lab.calibration.notebooks",
                                 "lab.calibration.report", "lab.comparison")):
                    bad.append(f"{path.name}: {m}")
    assert bad == []
