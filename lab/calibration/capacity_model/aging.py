"""Space amplification as the table ages: two models of what happens to expired rows (kept on disk
while their TWCS window also holds rows that never expire, or purged a lag after they expire),
fitted to a simulated run's factor per day, checked on the run's later days, projected to an age.

More: docs/calibration-internals.md (capacity_model.aging).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lab.calibration.capacity_model.amplification import step_amplification
from lab.results.run_files import is_figure

KEPT, PURGED = "kept", "purged"
CHECK_TOLERANCE = 0.15        # the later days predicted within this share (mean absolute error)
PROJECTION_AGE_DAYS = 1095    # the age the capacity table prices: three years, a hardware planning horizon
MIN_DAYS = 4                  # days of the series a fit needs
SAWTOOTH_STEPS = 4            # a window's SSTables compact every min_threshold (4) flushes: a mean over 4 steps


@dataclass(frozen=True, kw_only=True)
class Mix:
    """Shares of rows by retention (``ttl_days`` 0: never expires) and the purge lag in days."""

    classes: tuple[tuple[float, float], ...]   # (share, ttl_days)
    lag_days: float

    @classmethod
    def from_design(cls, retention_mix: Mapping[str, Mapping[str, Any]], *, window_days: float,
                    gc_grace_days: float) -> Mix:
        total = sum(float(c["share"]) for c in retention_mix.values()) or 1.0
        return cls(classes=tuple((float(c["share"]) / total, float(c["ttl_days"])) for c in retention_mix.values()),
                   lag_days=float(window_days) + float(gc_grace_days))

    @property
    def never_share(self) -> float:
        return sum(s for s, ttl in self.classes if ttl <= 0)

    def live(self, t: float) -> float:
        """Days of writes still live at age ``t`` (a share's rows live ``ttl`` days; never: all)."""
        return sum(s * (t if ttl <= 0 else min(t, ttl)) for s, ttl in self.classes)

    def shape(self, model: str, t: float) -> float:
        """disk / live at age ``t`` with no overhead: ``kept``, every row written stays on disk;
        ``purged``, an expired row goes ``lag_days`` after it expires."""
        live = self.live(t)
        if live <= 0:
            return math.nan
        if model == KEPT:
            return t / live
        return sum(s * (t if ttl <= 0 else min(t, ttl + self.lag_days)) for s, ttl in self.classes) / live


@dataclass(frozen=True, kw_only=True)
class AgingFit:
    """The model that fits, its overhead (the factor's level when nothing has expired) and the check."""

    model: str
    overhead: float
    rel_rmse: float                         # over the days fitted, relative
    other_rel_rmse: float                   # the other model's
    days: tuple[float, ...]
    check_error: float | None = None        # fitted on the first half, the second half predicted (mean abs)
    check_model: str | None = None          # the model the first half chose

    @property
    def check_ok(self) -> bool | None:
        return None if self.check_error is None else self.check_error <= CHECK_TOLERANCE

    def amp(self, mix: Mix, t: float) -> float:
        return self.overhead * mix.shape(self.model, t)

    def to_json(self, mix: Mix, ages: Sequence[float]) -> dict[str, Any]:
        return {"model": self.model, "overhead": self.overhead, "rel_rmse": self.rel_rmse,
                "other_rel_rmse": self.other_rel_rmse, "days_fitted": [min(self.days), max(self.days)],
                "check_error": self.check_error, "check_model": self.check_model, "check_ok": self.check_ok,
                "check_tolerance": CHECK_TOLERANCE, "never_share": mix.never_share, "lag_days": mix.lag_days,
                "projected": {str(int(a)): round(self.amp(mix, a), 3) for a in ages}}


def _fit_one(mix: Mix, model: str, days: np.ndarray, amps: np.ndarray) -> tuple[float, float]:
    """(overhead, relative RMSE): least squares of amps = overhead x shape through the origin."""
    shape = np.array([mix.shape(model, t) for t in days])
    ok = np.isfinite(shape) & np.isfinite(amps) & (amps > 0)
    if ok.sum() == 0:
        return math.nan, math.inf
    c = float((shape[ok] * amps[ok]).sum() / (shape[ok] ** 2).sum())
    return c, float(np.sqrt(np.mean(((c * shape[ok] - amps[ok]) / amps[ok]) ** 2)))


def _choose(mix: Mix, days: np.ndarray, amps: np.ndarray) -> tuple[str, float, float, float]:
    fits = {m: _fit_one(mix, m, days, amps) for m in (KEPT, PURGED)}
    model = min(fits, key=lambda m: fits[m][1])
    other = PURGED if model == KEPT else KEPT
    return model, fits[model][0], fits[model][1], fits[other][1]


def fit_aging(mix: Mix, days: Sequence[float], amps: Sequence[float]) -> AgingFit | None:
    """Both models on the series (age in days, disk / live); the better one, checked by fitting the
    first half of the days and predicting the second. None with fewer than ``MIN_DAYS`` days."""
    d, a = np.asarray(days, float), np.asarray(amps, float)
    keep = np.isfinite(a) & (a > 0) & (d > 0)
    d, a = d[keep], a[keep]
    if len(np.unique(d)) < MIN_DAYS:
        return None
    model, c, rmse, other = _choose(mix, d, a)
    unique = np.unique(d)
    mid = float(unique[(len(unique) - 1) // 2])   # the first half of the days (the lower median)
    first, second = d <= mid, d > mid
    check = check_model = None
    if len(np.unique(d[first])) >= MIN_DAYS // 2 and second.any():
        check_model, ch, _, _ = _choose(mix, d[first], a[first])
        pred = np.array([ch * mix.shape(check_model, t) for t in d[second]])
        check = float(np.mean(np.abs(pred - a[second]) / a[second]))
    return AgingFit(model=model, overhead=c, rel_rmse=rmse, other_rel_rmse=other, days=tuple(float(x) for x in d),
                    check_error=check, check_model=check_model)


def describe(fit: AgingFit, mix: Mix, ages: Sequence[float]) -> str:
    what = ("expired rows stay on disk while their window holds rows that never expire" if fit.model == KEPT else
            f"expired rows go {mix.lag_days:g} days after they expire")
    check = ("no check (too few days)" if fit.check_error is None else
             f"fitted on the first half of the days, the second predicted within {100 * fit.check_error:.1f}% "
             f"(target {100 * CHECK_TOLERANCE:g}%: {'met' if fit.check_ok else 'MISSED'}"
             + ("" if fit.check_model == fit.model else f"; the first half chose '{fit.check_model}'") + ")")
    at = ", ".join(f"{fit.amp(mix, t):.2f} at {t:g} days" for t in ages)
    return (f"the '{fit.model}' model fits ({what}; overhead {fit.overhead:.3f}, error {100 * fit.rel_rmse:.1f}% "
            f"against {100 * fit.other_rel_rmse:.1f}% for the other); {check}. Projected: {at}")


def series_by_day(series: Any, *, scenario: str, table: str) -> tuple[list[float], list[float]]:
    """A space_amp series' (simulated day, disk / live) for one scenario and table: the replicates
    averaged per step (nodes summed within each), then a running mean over ``SAWTOOTH_STEPS`` steps
    (its day the steps' mean day): within a TWCS window the SSTables compact every few flushes, a
    sawtooth the models do not describe."""
    rows = series[(series.scenario == scenario) & (series.table == table)] if len(series) else series
    if not len(rows):
        return [], []
    by_day = step_amplification(rows).groupby("sim_day").amp.mean().sort_index()
    days = by_day.index.to_series().rolling(SAWTOOTH_STEPS).mean().dropna()
    amps = by_day.rolling(SAWTOOTH_STEPS).mean().dropna()
    return [float(d) for d in days.to_numpy()], [float(a) for a in amps.to_numpy()]


def projection_ages(mix: Mix) -> tuple[float, ...]:
    """The ages the notebook reports: the longest finite retention, a year and the priced age."""
    finite = [ttl for _, ttl in mix.classes if ttl > 0]
    return tuple(sorted({*([float(round(max(finite)))] if finite else []), 365.0, float(PROJECTION_AGE_DAYS)}))


AGED = "aged"   # the capacity table's source of the what-if rows priced at the projected factor


@dataclass(frozen=True, kw_only=True)
class AgedTable:
    """What the capacity table takes from a space_amp run: the factor projected to an age."""

    amp: float
    age_days: int
    model: str
    check_ok: bool | None

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> AgedTable | None:
        amp, aging = values.get("lsm_space_amp_projected"), values.get("lsm_space_amp_aging")
        age = values.get("projection_age_days")
        if not is_figure(amp) or not isinstance(age, int) or isinstance(age, bool) or not 0 < age <= 100_000 \
                or not isinstance(aging, Mapping) or aging.get("model") not in (KEPT, PURGED):
            return None
        check = aging.get("check_ok")
        return cls(amp=float(amp), age_days=age, model=str(aging["model"]),
                   check_ok=check if isinstance(check, bool) else None)

    def to_json(self) -> dict[str, Any]:
        return {"amp": self.amp, "age_days": self.age_days, "model": self.model, "check_ok": self.check_ok}


def aged_lines(a: AgedTable, rows: Sequence[Mapping[str, Any]], base: Sequence[Mapping[str, Any]], *,
               one_table_amp: float) -> str:
    """The capacity conclusion's paragraph: each tier priced at the factor the table reaches at its age."""
    by_tier = {b["messages_per_day"]: b for b in base}
    check = {True: "its check on the run's later days met", False: "**its check on the run's later days missed**",
             None: "not checked"}[a.check_ok]
    out = [f"\n\n**What-if: message_record at {a.age_days} days old.** Projected from the space_amp run's factor per "
           f"simulated day ('{a.model}' model, {check}): {a.amp:.2f}, against {one_table_amp:.2f} priced above:", ""]
    for r in rows:
        b = by_tier.get(r["messages_per_day"])
        than = f" vs {b['resident_tb']:.1f} TB over {b['nodes_needed']} nodes" if b is not None else ""
        out.append(f"- {r['messages_per_day']:,.0f} messages/day: {r['resident_tb']:.1f} TB over "
                   f"**{r['nodes_needed']} nodes**{than}.")
    return "\n".join(out)
