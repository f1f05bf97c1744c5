"""Presets of the notebooks' parameters, and what each costs in time.

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import ast
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lab.calibration.kernel import skip_iri_grammar
from lab.calibration.registry import SUITE
from lab.errors import ValidationError
from lab.project import NOTEBOOKS_DIR

if TYPE_CHECKING:
    from lab.calibration.experiments.common import Output

PRESETS = ("quick", "full")

QUICK_PARAMETERS: dict[str, dict[str, Any]] = {s.name: dict(s.quick) for s in SUITE}

# Seconds per notebook (lab.calibration.registry): full, the budget plus fixed parts; quick, measured
# in one whole `lab calibrate --quick` (docs/measurements.md; QUICK_RUN_WALL_SECONDS in all, with the
# preflight, environment and round trip).
FULL_RUN_EXPECTED_SECONDS: dict[str, float] = {s.name: s.full_seconds for s in SUITE}
QUICK_RUN_EXPECTED_SECONDS: dict[str, float] = {s.name: s.quick_seconds for s in SUITE}
QUICK_RUN_WALL_SECONDS = 517.0
# Measured: one whole `lab calibrate --full`, every notebook ok (docs/measurements.md).
FULL_RUN_WALL_SECONDS = 2813.0
UNKNOWN_NOTEBOOK_SECONDS = 120.0


def expected_seconds(preset: str, names: tuple[str, ...] | list[str]) -> float:
    """Upper estimate of ``names`` run with ``preset``, in seconds."""
    table = QUICK_RUN_EXPECTED_SECONDS if preset == "quick" else FULL_RUN_EXPECTED_SECONDS
    return float(sum(table.get(n, UNKNOWN_NOTEBOOK_SECONDS) for n in names))


def minutes(seconds: float) -> str:
    """'about 3 min', 'about 73 min' (never '0 min')."""
    return f"about {max(1, round(seconds / 60))} min"


_SUITE = tuple(FULL_RUN_EXPECTED_SECONDS)  # every notebook of the suite has a full-run figure
# The one statement of the two runs' durations (lab calibrate --help, the report's banner, the
# README quotes them): what was timed and what is a sum of budgets, said as such.
QUICK_RUN_DURATION = (f"{minutes(QUICK_RUN_WALL_SECONDS)} measured on the lab's 2-core machine "
                      "(longer when it is busier; docs/measurements.md)")
FULL_RUN_DURATION = (f"{minutes(FULL_RUN_WALL_SECONDS)} measured on the lab's 2-core machine (up "
                     f"to {minutes(expected_seconds('full', _SUITE))}: the sum of the notebooks' time budgets)")


def declared_defaults(notebook: str, notebooks_dir: Path = NOTEBOOKS_DIR) -> dict[str, Any]:
    """The notebook's parameters cell: name -> default value (literals only)."""
    skip_iri_grammar()
    import papermill as pm

    out = {}
    for name, spec in pm.inspect_notebook(str(Path(notebooks_dir) / f"{notebook}.ipynb")).items():
        try:
            out[name] = ast.literal_eval(spec["default"])
        except (ValueError, SyntaxError):
            continue
    return out


def _same(a: Any, b: Any) -> bool:
    norm = lambda v: list(v) if isinstance(v, tuple) else v  # noqa: E731
    return norm(a) == norm(b)


def ran_with(notebook: str, namespace: Mapping[str, Any], defaults: Mapping[str, Any]) -> str:
    """Which parameters ``namespace`` holds of those the quick preset sets: "full" (all at their
    declared defaults), "quick" (all the quick values) or "custom"."""
    quick = QUICK_PARAMETERS.get(notebook, {})
    names = [n for n in quick if n in namespace and n in defaults]
    if all(_same(namespace[n], defaults[n]) for n in names):
        return "full"
    return "quick" if all(_same(namespace[n], quick[n]) for n in names) else "custom"


def apply_preset(notebook: str, preset: str | None, namespace: MutableMapping[str, Any], *,
                 out: Output | None = None, notebooks_dir: Path = NOTEBOOKS_DIR, echo: bool = True) -> dict[str, Any]:
    """Set ``preset``'s values in ``namespace`` (a notebook's globals) for the parameters still at
    their declared defaults and return what changed ("full" and None change nothing: the
    parameters cell is the full run). Records ``preset`` (what the notebook runs with: quick,
    full or custom) in ``out`` and prints it with the expected duration."""
    if preset not in (*PRESETS, None):
        raise ValidationError(f"preset must be one of {', '.join(PRESETS)} (or None), got {preset!r}", preset=preset)
    defaults = declared_defaults(notebook, notebooks_dir)
    changed: dict[str, Any] = {}
    kept: list[str] = []
    if preset == "quick":
        for name, value in QUICK_PARAMETERS.get(notebook, {}).items():
            if name not in namespace:
                continue
            if name in defaults and _same(namespace[name], defaults[name]):
                namespace[name] = changed[name] = value
            elif not _same(namespace[name], value):
                kept.append(name)
    effective = ran_with(notebook, namespace, defaults)
    if out is not None:
        out.value("preset", effective)
    if echo:
        print(preset_line(notebook, effective, changed, kept))
    return changed


def preset_line(notebook: str, effective: str, changed: Mapping[str, Any], kept: list[str]) -> str:
    quick, full = (minutes(expected_seconds(p, [notebook])) for p in ("quick", "full"))
    if effective == "custom":
        text = f"{notebook} runs with edited parameters (quick preset {quick}, full {full} on the lab's 2-core machine)"
    else:
        other = "full" if effective == "quick" else "quick"
        text = (f"{notebook} runs with the {effective} parameters: expected {quick if effective == 'quick' else full} "
                f"on the lab's 2-core machine ({other}: {full if effective == 'quick' else quick}")
        text += '; set preset = "quick" for a smoke test)' if effective == "full" else ")"
    if changed:
        text += "; the preset set " + ", ".join(f"{k}={v!r}" for k, v in changed.items())
    if kept:
        text += "; kept your " + ", ".join(kept)
    if effective == "quick":
        text += ". Quick: a smoke test of the pipeline (low confidence), not a calibration."
    return text
