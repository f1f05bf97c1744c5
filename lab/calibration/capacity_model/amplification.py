"""Space amplification of an LSM table: its definitions, compressed time, and the steady state.

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import dataclasses
import math
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from lab.calibration.precision import Halves
from lab.measure import LinearFit, fit_linear, mean_ci
from lab.store import RetentionPolicy
from lab.workload import load_profile

DAY_S = 86_400
MAIN_TABLE = "message_record"   # the table §7 sizes
PROFILE = "profile"
# retention mixes side by side: the profile's (what lsm_space_amp is measured on), and the same
# without the classes that never expire (what TWCS's whole-file expiry assumes: every row of a
# window expires; e.g. compliance_hold rows kept in a table of their own)
SCENARIOS = {PROFILE: "the profile's retention mix",
             "expiring_only": "the profile's mix without the classes that never expire"}


@dataclass(frozen=True, kw_only=True)
class TimeScale:
    """Simulated seconds to wall seconds (module docstring: compressed time)."""

    seconds_per_day: float

    def wall(self, sim_seconds: float) -> int:
        """A server setting in whole wall seconds; 0 stays 0 (no TTL), anything else at least 1."""
        if sim_seconds <= 0:
            return 0
        return max(1, math.ceil(sim_seconds * self.seconds_per_day / DAY_S))

    def remaining_ttl(self, *, arrival_s: float, ttl_s: int, now_s: float) -> int | None:
        """The wall TTL of a row written at simulated ``now_s`` that arrived at ``arrival_s``
        with a ``ttl_s`` period: 0 = never expires, None = expired already (not written)."""
        if ttl_s == 0:
            return 0
        left = arrival_s + ttl_s - now_s
        return self.wall(left) if left > 0 else None


def steady_start_day(*, max_ttl_days: float, window_days: float, gc_grace_days: float, flush_every_days: int) -> int:
    """First simulated day on which a whole TWCS window of expiring rows can have been dropped."""
    return math.ceil(max_ttl_days + window_days + gc_grace_days + flush_every_days)


def steady_rows(series: pd.DataFrame, start_day: int) -> pd.DataFrame:
    """The steps of the steady interval (simulated day at the step's end >= ``start_day``); the
    last half of the period when it ended before ``start_day`` (flagged by the Result)."""
    s = series[series.sim_day >= start_day]
    if s.empty and len(series):
        s = series[series.sim_day >= series.sim_day.max() / 2]
    return s


REPLICATE = ["scenario", "batch", "replicate"]


def step_amplification(series: pd.DataFrame) -> pd.DataFrame:
    """Per (scenario, batch, replicate, table, step): disk, live and peak bytes with nodes summed,
    and their ratios ``amp`` (disk / live) and ``peak_amp`` (peak / live); steps without live bytes
    (nothing written yet) are left out."""
    g = series.groupby(REPLICATE + ["table", "step", "sim_day"], sort=False).agg(
        disk=("disk_bytes", "sum"), live=("live_bytes", "sum"), peak=("peak_bytes", "sum")).reset_index()
    g = g[g.live > 0].copy()
    g["amp"] = g.disk / g.live
    g["peak_amp"] = g.peak / g.live
    return g


def per_replicate(series: pd.DataFrame, start_day: int) -> pd.DataFrame:
    """Per (scenario, batch, replicate, table): the steady amplification (mean over the steady
    steps of disk / live, nodes summed) and the peak (max over those steps of peak / live)."""
    g = step_amplification(steady_rows(series, start_day))
    return g.groupby(REPLICATE + ["table"], sort=False).agg(
        steady=("amp", "mean"), peak=("peak_amp", "max"), steps=("step", "nunique")).reset_index()


def summarize_tables(reps: pd.DataFrame, series: pd.DataFrame) -> pd.DataFrame:
    """Per (scenario, table): steady and peak amplification, mean and Student-t interval over
    replicates, and the SSTables per node at the period's end."""
    rows = []
    for (scenario, table), g in reps.groupby(["scenario", "table"], sort=False):
        m, lo, hi = mean_ci(g.steady)
        pm, plo, phi = mean_ci(g.peak)
        mine = series[(series.scenario == scenario) & (series.table == table)]
        last = mine[mine.step == mine.step.max()]
        rows.append({"scenario": scenario, "table": table, "replicates": len(g), "steady": m, "steady_ci_low": lo,
                     "steady_ci_high": hi, "peak": pm, "peak_ci_low": plo, "peak_ci_high": phi,
                     "final_sstables_per_node": float(last.sstables.mean()) if len(last) else math.nan})
    return pd.DataFrame(rows)


def halves_of(series: pd.DataFrame, start_day: int, *, tolerance: float, table: str = MAIN_TABLE) -> Halves | None:
    """The steady amplification of the first and the second half of the steady interval (every
    replicate of ``series``: pass one scenario's rows): a factor that differs by more than
    ``tolerance`` x its mean is not stationary."""
    g = step_amplification(steady_rows(series[series.table == table], start_day))
    days = sorted(g.sim_day.unique())
    if len(days) < 2:
        return None
    mid = days[len(days) // 2]
    first = float(g[g.sim_day < mid].amp.mean())
    second = float(g[g.sim_day >= mid].amp.mean())
    return Halves(first=round(first, 4), second=round(second, 4), tolerance=round(tolerance * (first + second) / 2, 4))


def head_row_fit(series: pd.DataFrame) -> LinearFit | None:
    """conversation_head's live bytes (one copy: nodes summed / copies) against the conversations
    written, over every step and replicate: ``per_conversation`` is what one more head row
    costs, ``sstable`` the fixed components of the one SSTable (Statistics alone is ~5 KB on
    Cassandra 5.0, more than a few hundred head rows at the lab's volumes). None when the
    steps cannot separate the two."""
    h = series[(series.table == "conversation_head") & (series.conversations > 0)]
    g = h.groupby(REPLICATE + ["step"]).agg(live=("live_bytes", "sum"), copies=("copies", "first"),
                                           conversations=("conversations", "first")).reset_index()
    try:
        return fit_linear([[1.0, float(c)] for c in g.conversations], (g.live / g.copies).to_numpy(),
                          ("sstable", "per_conversation"))
    except ValueError:
        return None


def head_values(fit: LinearFit | None) -> dict[str, float | None]:
    """The head fit as values.json keys (the model check's conversation_head input)."""
    if fit is None:
        return {"conversation_head_bytes_per_conversation": None, "conversation_head_sstable_bytes": None}
    i, k = fit.names.index("per_conversation"), fit.names.index("sstable")
    return {"conversation_head_bytes_per_conversation": fit.coefficients[i],
            "conversation_head_bytes_per_conversation_ci_low": fit.ci_low[i],
            "conversation_head_bytes_per_conversation_ci_high": fit.ci_high[i],
            "conversation_head_sstable_bytes": fit.coefficients[k]}


# ---- the mixes and the arrivals ---------------------------------------------------------------
def scenario_profile(profile_name: str, retention: dict[str, float] | None, scenario: str, constants: Any) -> Any:
    """The workload profile with the scenario's retention mix (``retention`` replacing the
    profile's when given)."""

    profile = load_profile(profile_name)
    retention = {k: v for k, v in (retention or profile.retention).items() if float(v) > 0}
    if scenario != PROFILE:
        retention = {k: v for k, v in retention.items() if ttl_days(k, constants) > 0}
    profile = dataclasses.replace(profile, retention=dict(retention))
    profile.retention_weights()  # unknown classes or no weight left: ConfigError now, before any keyspace
    return profile


def ttl_days(retention_class: str, constants: Any) -> float:
    policy = RetentionPolicy(default_days=constants.default_retention_days,
                             ephemeral_ttl_seconds=constants.ephemeral_ttl_seconds)
    return policy.ttl_seconds(retention_class, uuid.UUID(int=1)) / DAY_S


def retention_mix(profile_name: str, retention: dict[str, float] | None, scenario: str,
                  constants: Any) -> dict[str, Any]:
    """The scenario's retention classes (share of conversations) and each class's TTL in days
    under the store's policy (0: never expires)."""
    shares = {k: float(v) for k, v in scenario_profile(profile_name, retention, scenario, constants).retention.items()}
    total = sum(shares.values()) or 1.0
    return {name: {"share": share / total, "ttl_days": ttl_days(name, constants)} for name, share in shares.items()}


def arrivals(messages: pd.DataFrame, days: int) -> pd.DataFrame:
    """The rows in created_at order, each with its simulated arrival (s) spread over the period."""
    rows = messages.sort_values(["created_at_ms", "row"]).reset_index(drop=True)
    t = rows.created_at_ms.to_numpy(dtype=np.float64)
    span = max(t.max() - t.min(), 1.0)
    rows["arrival_s"] = (t - t.min()) / span * (days * DAY_S - 1)
    return rows
