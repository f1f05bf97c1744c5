"""What the capacity notebook reads: the b_row run (found), your mix (priced), each input's confidence.

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab import workload
from lab.calibration.capacity_model.row_model import REGRESSORS, RowModel, per_row
from lab.calibration.recommendations import confidence_of, number
from lab.errors import BadRunFile, CalibrationError, ValidationError
from lab.measure import bootstrap_rounds, interval_of
from lab.results.run_files import read_run_json
from lab.workload import profiles

MIX_ROWS = 20_000          # generated messages a profile is priced on
MIX_SEED = 0
VALUES_FILE = "values.json"


@dataclass(frozen=True, kw_only=True)
class MixSpec:
    name: str                              # the profile's name, or "my_mix" for a composition
    source: str                            # "datasets/profiles/<name>.toml", "lab/workload/profiles/<name>.toml", a path, "composition"
    composition: Mapping[str, float] | None = None   # given directly (no profile)
    profile: Any = None                    # lab.workload.Profile


@dataclass(frozen=True, kw_only=True)
class MixPrice:
    name: str
    source: str
    b_row_bytes: float
    ci_low: float
    ci_high: float
    composition: Mapping[str, float]
    rows: int | None                       # generated messages (a profile), None for a composition
    model_ci: tuple[float, float]          # the row model's interval alone
    sample_ci: tuple[float, float] | None  # the generated messages' sampling interval alone

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source, "mean": self.b_row_bytes, "ci_low": self.ci_low,
                "ci_high": self.ci_high, "composition": dict(self.composition), "rows": self.rows,
                "model_ci": list(self.model_ci), "sample_ci": list(self.sample_ci) if self.sample_ci else None}


@dataclass(frozen=True, kw_only=True)
class Located:
    """The b_row run a capacity notebook reads: its values.json and how it was chosen."""

    path: Path | None
    how: str                               # "this run", "the latest b_row run in <results>", "given", why not

    def run_id(self) -> str | None:
        return self.path.parent.parent.name if self.path is not None else None


def resolve_mix(spec: str | Mapping[str, Any]) -> MixSpec:
    """A profile name, a TOML path or a composition -> :class:`MixSpec` (ConfigError when unknown)."""

    if isinstance(spec, Mapping):
        unknown = sorted(set(spec) - set(REGRESSORS))
        if unknown:
            raise ValidationError(f"my_mix has unknown keys {', '.join(unknown)}: give a profile name, a .toml file, or "
                                  f"mean bytes per message of {', '.join(REGRESSORS)}", keys=unknown)
        return MixSpec(name="my_mix", source="composition", composition={k: spec[k] for k in spec})
    if not isinstance(spec, str) or not spec.strip():
        raise ValidationError(f"my_mix must be a profile name, a .toml file or a composition, got {spec!r}", value=spec)
    profile = profiles.load_profile(spec.strip())
    return MixSpec(name=profile.name, source=profiles.profile_source(spec.strip()), profile=profile)


def _row_bytes(model: Any, regressors: Any) -> Any:
    """Each row's bytes by the model's point coefficients (an array)."""

    coef = dict(zip(model.fit.names, model.fit.coefficients))
    return coef["overhead"] + sum(coef[c] * regressors[c].to_numpy(float) for c in REGRESSORS)


def price(spec: MixSpec, model: Any, *, rows: int = MIX_ROWS, seed: int = MIX_SEED) -> MixPrice:
    """b_row of the mix by ``model`` (a :class:`~lab.calibration.capacity_model.row_model.RowModel`), with its interval."""

    if spec.profile is None:
        pred = model.predict(spec.composition or {})
        return MixPrice(name=spec.name, source=spec.source, b_row_bytes=pred["mean"], ci_low=pred["ci_low"],
                        ci_high=pred["ci_high"], composition={c: float((spec.composition or {}).get(c, 0.0))
                                                              for c in REGRESSORS},
                        rows=None, model_ci=(pred["ci_low"], pred["ci_high"]), sample_ci=None)

    messages = workload.generate(spec.profile, size=rows, seed=seed).messages
    table = per_row(messages)
    composition = {c: float(table[c].mean()) for c in REGRESSORS}
    pred = model.predict(composition)
    # sampling: the mean predicted bytes per row with whole conversations resampled
    table = table.assign(row_bytes=_row_bytes(model, table), conversation=messages["conversation_id"].to_numpy())
    grouped = table.groupby("conversation", sort=False).agg(total=("row_bytes", "sum"), n=("row_bytes", "size"))
    totals, counts = grouped.total.to_numpy(float), grouped.n.to_numpy(float)
    low, high = interval_of(bootstrap_rounds(len(grouped), lambda i: float(totals[i].sum() / counts[i].sum())))
    sample_half = (high - low) / 2 if low is not None else 0.0
    half = math.hypot((pred["ci_high"] - pred["ci_low"]) / 2, sample_half)
    return MixPrice(name=spec.name, source=spec.source, b_row_bytes=pred["mean"], ci_low=pred["mean"] - half,
                    ci_high=pred["mean"] + half, composition=composition, rows=int(len(messages)),
                    model_ci=(pred["ci_low"], pred["ci_high"]),
                    sample_ci=(float(low), float(high)) if low is not None else None)


def _b_row_values(path: Path) -> dict[str, Any] | None:
    try:
        values = read_run_json(path)
    except BadRunFile:
        return None
    return values if values.get("b_row_bytes") else None


def _latest(run_dir: Path | str | None, notebook: str, usable: Any, what: str) -> Located:
    """``notebook``'s values.json of this run if ``usable``, else the latest usable one beside it
    (in ``run_dir``'s parent, the results folder), named with its run and time."""
    if run_dir is None:
        return Located(path=None, how="no run folder to look in")
    run_dir = Path(run_dir)
    own = run_dir / notebook / VALUES_FILE
    if own.is_file() and usable(own):
        return Located(path=own, how="this run")
    candidates = [(path.stat().st_mtime, path) for path in run_dir.parent.glob(f"*/{notebook}/{VALUES_FILE}")
                  if path != own and usable(path)]
    if not candidates:
        return Located(path=None, how=f"no {what} in this run or beside it in {run_dir.parent}")
    mtime, path = max(candidates)
    when = _dt.datetime.fromtimestamp(mtime, _dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return Located(path=path, how=f"the latest {notebook} run in {run_dir.parent} ({path.parent.parent.name}, {when})")


def _values_with(path: Path, *keys: str) -> bool:
    try:
        values = read_run_json(path)
    except BadRunFile:
        return False
    return all(values.get(k) for k in keys)


def locate_b_row(run_dir: Path | str | None, *, need_row_model: bool = False) -> Located:
    """This run's b_row (``run_dir/b_row/values.json``), else the latest b_row run beside it
    (in ``run_dir``'s parent, the results folder) that has what is needed."""
    def usable(path: Path) -> bool:
        v = _b_row_values(path)
        return v is not None and bool(v.get("row_model") or not need_row_model)
    return _latest(run_dir, "b_row", usable, "b_row run with a row model" if need_row_model else "b_row run")


def row_model_of(located: Located) -> Any:
    """The RowModel of a located b_row run (CalibrationError naming the run when it has none)."""

    if located.path is None:
        raise CalibrationError(f"my_mix cannot be priced: {located.how}; run the b_row notebook first (`lab calibrate "
                               "--notebooks b_row,capacity --my-mix NAME`)", how=located.how)
    model = (_b_row_values(located.path) or {}).get("row_model")
    if not model:
        raise CalibrationError(f"my_mix cannot be priced: the b_row run {located.run_id()} has no row model (its "
                               "fit_mixes were not measured)", path=str(located.path))
    return RowModel.from_json(model)


def locate_cpu(run_dir: Path | str | None) -> Located:
    """This run's cpu_cost values, else the latest cpu_cost run beside it (named)."""
    return _latest(run_dir, "cpu_cost", lambda p: _values_with(p, "operations"), "cpu_cost run")


def locate_cpu_curve(run_dir: Path | str | None) -> Located:
    """This run's CPU curve, else the latest cpu_curve run beside it with a usable point (named)."""
    return _latest(run_dir, "cpu_curve", lambda p: _values_with(p, "cpu_curve", "usable_points"), "cpu_curve run")


def locate_knee(run_dir: Path | str | None) -> Located:
    """This run's knee, else the latest knee run beside it that found one (named)."""
    return _latest(run_dir, "knee", lambda p: _values_with(p, "knee_sends_per_second_per_node"), "knee run")


def run_mode(values_path: Path | str) -> str | None:
    """quick | full of the run a notebook's values.json belongs to: its calibration.json, else the
    notebook's recorded ``preset``, else None (not recorded)."""
    values_path = Path(values_path)
    cal = values_path.parent.parent / "calibration.json"
    try:
        mode = read_run_json(cal).get("mode") if cal.is_file() else None
        return str(mode or read_run_json(values_path).get("preset") or "") or None
    except BadRunFile:
        return None


def input_confidence(values_path: Path | str | None, *, measured: str, ci: tuple[str, str] | None = None,
                     precision: str | None = None, unresolved: bool = False) -> str | None:
    """The confidence of one input read from ``values_path`` (None: no such input)."""

    if values_path is None:
        return None
    try:
        values = read_run_json(values_path)
    except BadRunFile:
        return None
    quick = run_mode(values_path) == "quick"
    m = number(values.get(measured)) if measured else 1.0
    bounds = (number(values.get(ci[0])), number(values.get(ci[1]))) if ci else None
    given = values.get(precision) if precision else None
    level = confidence_of(m, bounds if bounds and None not in bounds else None, quick=quick,
                          precision=given if isinstance(given, Mapping) else None)
    return weakest(level, "low") if unresolved else level


CONFIDENCE_ORDER = ("high", "medium", "low", "inconclusive", "none")


def weakest(*levels: str | None) -> str | None:
    """The lowest confidence of several inputs (None ignored; None when all are)."""
    known = [lv for lv in levels if lv]
    return max(known, key=lambda lv: CONFIDENCE_ORDER.index(lv) if lv in CONFIDENCE_ORDER else len(CONFIDENCE_ORDER)) \
        if known else None


def my_mix_summary(values: Mapping[str, Any]) -> dict[str, Any] | None:
    """``my_mix`` of calibration.json from the capacity notebook's values: the mix, its b_row with
    interval and confidence, where the row model came from, and its nodes per tier (disk-bound,
    CPU-bound beside it, the larger, which binds). None when no mix was priced."""
    price_ = values.get("my_mix_b_row")
    if not price_:
        return None
    tiers = sorted((k.rsplit("_", 1)[1] for k in values if k.startswith("nodes_needed_my_mix_")), key=int)
    per_tier = lambda prefix: {t: values[f"{prefix}_{t}"] for t in tiers if values.get(f"{prefix}_{t}") is not None}  # noqa: E731
    return {"name": values.get("my_mix_name"), "source": values.get("my_mix_source"),
            "b_row_bytes": price_.get("mean"), "ci_low": price_.get("ci_low"), "ci_high": price_.get("ci_high"),
            "composition": price_.get("composition"), "confidence": values.get("my_mix_confidence"),
            "row_model_run": values.get("my_mix_run"), "row_model_from": values.get("my_mix_from"),
            "resident_tb": per_tier("resident_tb_my_mix"), "nodes_disk": per_tier("nodes_needed_my_mix"),
            "nodes_cpu": per_tier("nodes_cpu"), "nodes_cpu_curve": per_tier("nodes_cpu_curve"),
            "nodes_knee": per_tier("nodes_knee"),
            "nodes": per_tier("nodes_my_mix"), "binding": per_tier("binding_my_mix"),
            "runs": {"row model": _run_named(values.get("my_mix_run"), values.get("my_mix_from")),
                     "CPU per operation": _run_named(values.get("cpu_run"), values.get("cpu_from")),
                     "CPU curve": _run_named(values.get("cpu_curve_run"), values.get("cpu_curve_from")),
                     "knee": _run_named(values.get("knee_run"), values.get("knee_from"))}}


def _run_named(run: str | None, how: str | None) -> str:
    """'run R (this run)', 'run R (the latest ... in results/)', or 'none'."""
    return f"run {run} ({'this run' if how == 'this run' else 'found: ' + str(how)})" if run else "none"
