"""Presets of the notebooks' parameters, and what each costs in time.

``quick``: the shortest parameters (:data:`QUICK_PARAMETERS`: a smoke test of the pipeline with
the quick precision targets, never a calibration); ``full``: the notebooks' own parameters
cells (the full targets and time budgets). ``lab calibrate --quick|--full`` runs the suite with
one or the other; a notebook opened in JupyterLab takes ``preset = "quick"`` in its parameters
cell, and :func:`apply_preset` (its setup cell) sets the quick values of the parameters still
at their defaults (a value you edited stays) and prints the expected duration.

The durations are measured on the lab's 2-core machine, shared with other work (load
average 10-17): a full notebook stops earlier when it reaches its precision target; the
fixed parts (loading, the fit's mixes, sweeps without a budget) are included.
"""
from __future__ import annotations

import ast
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from lab.errors import ValidationError
from lab.project import NOTEBOOKS_DIR

PRESETS = ("quick", "full")

QUICK_PARAMETERS: dict[str, dict[str, Any]] = {
    "b_row": {"rows": 2000, "min_repeats": 3, "max_repeats": 8, "target_rel_half_width": 0.10, "budget_seconds": 60,
              "partition_rows": 1024, "compression_repeats": 1, "fit_rows": 500, "fit_repeats": 2},
    "in_limit": {"partition_rows": 600, "in_sizes": [1, 2, 5, 10, 20, 50, 100, 200, 300, 500], "min_rounds": 10,
                 "max_rounds": 40, "target_rel_half_width": 0.30, "budget_seconds": 30},
    "empty_buckets": {"runs": [0, 1, 2, 4, 8, 9, 12, 24, 30], "scan_limits": [8, 16], "min_rounds": 3,
                      "max_rounds": 10, "target_rel_half_width": 0.30, "budget_seconds": 20, "hole_messages": 20000},
    "twcs_sstables": {"record_days": 9, "dedup_hours": 8, "rows_per_interval": 5, "short_ttl_seconds": 10},
    "grouped_reads": {"dataset_messages": 1000, "mix_sizes": [50, 200], "repeats": 3, "density_trace_repeats": 1},
    "cpu_cost": {"window_seconds": 3.0, "idle_seconds": 1.5, "min_rounds": 2, "max_rounds": 2, "target_rel_half_width": 0.5,
                 "budget_seconds": 45, "history_conversations": 5, "history_rows": 200},
    "capacity": {},
}

# Seconds per notebook (the budget where it has one, plus its fixed parts).
FULL_RUN_EXPECTED_SECONDS: dict[str, float] = {
    "b_row": 600 + 420, "in_limit": 300 + 30, "empty_buckets": 240 + 30, "twcs_sstables": 240,
    "grouped_reads": 300, "cpu_cost": 720 + 90, "capacity": 10,
}
QUICK_RUN_EXPECTED_SECONDS: dict[str, float] = {
    "b_row": 250, "in_limit": 85, "empty_buckets": 90, "twcs_sstables": 120, "grouped_reads": 120, "cpu_cost": 150,
    "capacity": 20,
}
UNKNOWN_NOTEBOOK_SECONDS = 120.0


def expected_seconds(preset: str, names: tuple[str, ...] | list[str]) -> float:
    """Upper estimate of ``names`` run with ``preset``, in seconds."""
    table = QUICK_RUN_EXPECTED_SECONDS if preset == "quick" else FULL_RUN_EXPECTED_SECONDS
    return float(sum(table.get(n, UNKNOWN_NOTEBOOK_SECONDS) for n in names))


def minutes(seconds: float) -> str:
    """'about 3 min', 'about 50 min' (never '0 min')."""
    return f"about {max(1, round(seconds / 60))} min"


def declared_defaults(notebook: str, notebooks_dir: Path = NOTEBOOKS_DIR) -> dict[str, Any]:
    """The notebook's parameters cell: name -> default value (literals only)."""
    import papermill as pm

    from lab.calibration.notebooks import notebook_path

    out = {}
    for name, spec in pm.inspect_notebook(str(notebook_path(notebook, notebooks_dir))).items():
        try:
            out[name] = ast.literal_eval(spec["default"])
        except (ValueError, SyntaxError):
            continue
    return out


def _same(a: Any, b: Any) -> bool:
    norm = lambda v: list(v) if isinstance(v, tuple) else v  # noqa: E731
    return norm(a) == norm(b)


def apply_preset(notebook: str, preset: str | None, namespace: MutableMapping[str, Any], *,
                 notebooks_dir: Path = NOTEBOOKS_DIR, echo: bool = True) -> dict[str, Any]:
    """Set ``preset``'s values in ``namespace`` (a notebook's globals) for the parameters still at
    their declared defaults; return what changed. ``None`` or ``"full"`` change nothing (the
    parameters cell is the full run). Prints one line: the preset, what it set, the duration."""
    if preset is None:
        return {}
    if preset not in PRESETS:
        raise ValidationError(f"preset must be one of {', '.join(PRESETS)} (or None), got {preset!r}", preset=preset)
    changed: dict[str, Any] = {}
    kept: list[str] = []
    if preset == "quick":
        defaults = declared_defaults(notebook, notebooks_dir)
        for name, value in QUICK_PARAMETERS.get(notebook, {}).items():
            if name not in namespace:
                continue
            if name in defaults and _same(namespace[name], defaults[name]):
                namespace[name] = value
                changed[name] = value
            else:
                kept.append(name)
    if echo:
        print(preset_line(notebook, preset, changed, kept))
    return changed


def preset_line(notebook: str, preset: str, changed: dict[str, Any], kept: list[str]) -> str:
    seconds = expected_seconds(preset, [notebook])
    other = "full" if preset == "quick" else "quick"
    text = f"preset {preset}: {notebook} expected to take {minutes(seconds)} on the lab's 2-core machine"
    text += f" ({other}: {minutes(expected_seconds(other, [notebook]))})"
    if changed:
        text += "; set " + ", ".join(f"{k}={v!r}" for k, v in changed.items())
    if kept:
        text += "; kept your " + ", ".join(kept)
    if preset == "quick":
        text += ". Quick: a smoke test (low confidence), not a calibration."
    return text
