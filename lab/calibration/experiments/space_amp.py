"""lsm_space_amp: bytes on disk against live bytes over a simulated period (design §7).

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import math
import time
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from lab.calibration.capacity_model.aging import PROJECTION_AGE_DAYS, AgingFit, Mix, describe, fit_aging, projection_ages, series_by_day
from lab.calibration.capacity_model.amplification import (
    DAY_S,
    MAIN_TABLE,
    PROFILE,
    SCENARIOS,
    TimeScale,
    arrivals,
    halves_of,
    head_row_fit,
    head_values,
    per_replicate,
    retention_mix,
    scenario_profile,
    steady_start_day,
    summarize_tables,
)
from lab.calibration.capacity_model.disk_sizing import twcs_windows_kept
from lab.calibration.experiments.common import Testbed, progress, scratch_name, scratch_store
from lab.calibration.precision import Halves, Precision, sample_until
from lab.cluster.admin.disk import PeakSampler, settled_disk_bytes
from lab.errors import ValidationError
from lab.measure import LinearFit, Stopwatch, mean_ci, relative_half_width
from lab.measure.stats import MIN_INTERVAL_ROUNDS
from lab.results.jsonio import flatten
from lab.store import HeadUpdate, table_specs
from lab.workload import generate, to_message

TABLES = ("message_record", "message_index", "conversation_head")
EXPIRED_CHECK_SIM_SECONDS = 600        # TWCS's expired_sstable_check_frequency_seconds default
TOMBSTONE_INTERVAL_SIM_SECONDS = DAY_S  # tombstone_compaction_interval default


@dataclass(frozen=True, kw_only=True)
class Params:
    profile: str = "chat_mix"
    rows_per_day: int = 120            # per replicate
    seconds_per_day: float = 5.0       # wall seconds per simulated day
    flush_every_days: int = 1
    steady_days: int = 14              # simulated days of the steady interval (2 TWCS windows)
    days: int | None = None            # None: steady_start_day + steady_days
    replicates: int = 5                # (main, twin) keyspace pairs per scenario and batch, side by side
    max_batches: int = 2
    target_rel_half_width: float = 0.05
    stationarity_tolerance: float = 0.05   # halves of the steady interval agree within this share of the mean
    budget_seconds: float = 900.0
    poll_seconds: float = 0.05
    settle_timeout_seconds: float = 60.0
    retention: dict[str, float] | None = None   # share of conversations per retention class (None: the profile's)
    scenarios: tuple[str, ...] = ("profile", "expiring_only")   # SCENARIOS
    seed: int = 0
    keep_keyspaces: bool = False       # leave the last batch's (main, twin) keyspaces on the server
    show_progress: bool = True


@dataclass(frozen=True, kw_only=True)
class Result:
    params: Params
    series: pd.DataFrame      # batch x replicate x step x table x node: disk, live, amp, peak, sstables
    summary: pd.DataFrame     # scenario x table: steady and peak amp (mean, CI over replicates)
    per_replicate: pd.DataFrame  # batch x replicate x table: steady and peak amp of that replicate
    precision: Precision
    halves: dict[str, Halves | None]   # scenario -> the halves of its steady interval (message_record)
    design: dict[str, Any]
    steady_start_day: int
    days: int
    late_steps: int
    head: LinearFit | None    # conversation_head live bytes of one copy = sstable + per_conversation x conversations
    keyspaces: tuple[tuple[str, str], ...] = ()   # (main, twin) of the last batch, kept on the server

    @property
    def steady_reached(self) -> bool:
        return self.days >= self.steady_start_day + 1

    def values(self) -> dict[str, Any]:
        reps = self.per_replicate
        out: dict[str, Any] = {**self.design, "days": self.days, "steady_start_day": self.steady_start_day,
                               "steady_state_reached": self.steady_reached, "late_steps": self.late_steps,
                               "seconds_per_day": self.params.seconds_per_day, "profile": self.params.profile,
                               "rows_per_day": self.params.rows_per_day, "scenarios": list(self.params.scenarios),
                               "replicates": replicates_per_scenario(reps),
                               **head_values(self.head),
                               "keyspaces": [list(k) for k in self.keyspaces]}
        out |= flatten(self.summary, "{scenario}_{table}_space_amp_{value}",
                       {k: _plain for k in ("steady", "steady_ci_low", "steady_ci_high", "peak", "peak_ci_low",
                                            "peak_ci_high")})
        out |= flatten(self.summary, "{scenario}_{table}_{value}", {"final_sstables_per_node": _plain})
        for scenario, h in self.halves.items():
            out[f"{scenario}_halves"] = h.to_json() if h is not None else None
        main = self.summary[(self.summary.scenario == PROFILE) & (self.summary.table == MAIN_TABLE)]
        measured = len(main) > 0 and self.steady_reached
        m = main.iloc[0] if measured else None
        for key, field in (("", "steady"), ("_ci_low", "steady_ci_low"), ("_ci_high", "steady_ci_high"),
                           ("_peak", "peak"), ("_peak_ci_low", "peak_ci_low"), ("_peak_ci_high", "peak_ci_high")):
            out[f"lsm_space_amp{key}"] = _plain(m[field]) if m is not None else None
        h = self.halves.get(PROFILE)
        out["lsm_space_amp_stationary"] = h.agree if h is not None else None
        out["lsm_space_amp_halves"] = h.to_json() if h is not None else None
        out["lsm_space_amp_precision"] = self.precision.to_json()
        return out | self.aging_values()

    def aging(self) -> tuple[Mix, AgingFit | None]:
        """message_record's factor per simulated day (the profile's mix) fitted as the table ages."""
        mix = Mix.from_design(self.design["retention_mix"], window_days=self.design["window_days"],
                              gc_grace_days=self.design["gc_grace_seconds"] / DAY_S)
        return mix, fit_aging(mix, *series_by_day(self.series, scenario=PROFILE, table=MAIN_TABLE))

    def aging_values(self) -> dict[str, Any]:
        mix, fit = self.aging()
        return {"lsm_space_amp_aging": fit.to_json(mix, projection_ages(mix)) if fit else None,
                "lsm_space_amp_projected": round(fit.amp(mix, PROJECTION_AGE_DAYS), 3) if fit else None,
                "projection_age_days": PROJECTION_AGE_DAYS,
                "lsm_space_amp_aging_text": describe(fit, mix, projection_ages(mix)) if fit else None}


def replicates_per_scenario(reps: pd.DataFrame) -> int:
    """Replicates (over all batches) behind each scenario's interval: the profile's (every
    scenario runs as many), not scenarios x replicates."""
    if not len(reps):
        return 0
    mine = reps[reps.scenario == PROFILE] if (reps.scenario == PROFILE).any() else reps
    return len(mine[["scenario", "batch", "replicate"]].drop_duplicates()) // mine.scenario.nunique()


def _plain(v: Any) -> Any:
    if v is None:
        return None
    v = float(v)
    return None if math.isnan(v) else v


# ---- the run ----------------------------------------------------------------------------------
def _tables(testbed: Testbed, constants: Any, scale: TimeScale, *, twin_of: str | None = None) -> list[tuple]:
    """The main keyspace's tables keep the design's strategies with wall-clock settings scaled;
    a twin's (``twin_of``: its main keyspace) are size-tiered with gc_grace 0 (major-compacted
    every step: the live bytes) and the main table's bloom filter (LCS defaults to a 0.1 false
    positive chance, the others to 0.01: the Filter component would differ by that alone)."""
    import dataclasses


    specs = table_specs(constants)
    out = []
    for table in TABLES:
        spec = specs[table]
        if twin_of:
            row = testbed.connection.execute("SELECT bloom_filter_fp_chance FROM system_schema.tables WHERE "
                                             "keyspace_name = %s AND table_name = %s", (twin_of, table)).one()
            out.append((dataclasses.replace(spec, compaction={"class": "SizeTieredCompactionStrategy"},
                                            gc_grace_seconds=0), (f"bloom_filter_fp_chance = {float(row[0])}",)))
            continue
        compaction = {**spec.compaction, "tombstone_compaction_interval": str(scale.wall(TOMBSTONE_INTERVAL_SIM_SECONDS))}
        if compaction["class"] == "TimeWindowCompactionStrategy":
            compaction["expired_sstable_check_frequency_seconds"] = str(scale.wall(EXPIRED_CHECK_SIM_SECONDS))
        out.append((dataclasses.replace(spec, compaction=compaction, gc_grace_seconds=scale.wall(spec.gc_grace_seconds)),
                    tuple(testbed.connection.dialect.expiring_table_options())))
    return out


def _head(message: Any) -> Any:
    """The head update ``send`` submits for a message (preview = its body)."""

    return HeadUpdate(tenant_id=message.tenant_id, conversation_id=message.conversation_id,
                      conversation_seq=message.conversation_seq, message_id=message.message_id,
                      last_activity_id=message.last_activity_id, sender_id=message.sender_id,
                      preview=message.body, e2ee=message.e2ee)


def _replicate(testbed: Testbed, stack: Any, p: Params, constants: Any, scale: TimeScale, seed: int, days: int,
               scenario: str) -> dict:
    """A (main, twin) keyspace pair and its rows (the scenario's retention mix), in arrival order
    with their simulated TTLs."""

    main = stack.enter_context(scratch_store(testbed, scratch_name("amp"), constants=constants, keep=p.keep_keyspaces,
                                             tables=_tables(testbed, constants, scale)))
    twin = stack.enter_context(scratch_store(testbed, scratch_name("ampl"), constants=constants, keep=p.keep_keyspaces,
                                             tables=_tables(testbed, constants, scale, twin_of=main.keyspace)))
    rows = arrivals(generate(scenario_profile(p.profile, p.retention, scenario, constants), size=p.rows_per_day * days, seed=seed,
                              bucket_width=constants.message_seq_bucket_width).messages, days)
    ttl = np.array([main.retention.ttl_seconds(int(c), uuid.UUID(str(t)))
                    for c, t in zip(rows.retention_class, rows.tenant_id)], dtype=np.int64)
    return {"main": main, "twin": twin, "rows": rows, "ttl": ttl, "next": 0, "seed": seed, "conversations": set(),
            "scenario": scenario, "copies": testbed.admin.replication(twin.keyspace).copies or 1}


def _measure(testbed: Testbed, reps: list[dict], base: dict[str, Any]) -> list[dict[str, Any]]:
    """Per replicate, table and node: the main keyspace's bytes on disk (settled) and SSTables,
    and the twin's live bytes after its major compaction (the admin adapter's live SSTable
    bytes: all components of the one SSTable, what b_row divides)."""
    disk = settled_disk_bytes(testbed.admin, [(rep["main"].keyspace, t) for rep in reps for t in TABLES])
    out = []
    for r, rep in enumerate(reps):
        for table in TABLES:
            counts = {str(n["node"]): int(n["sstable_count"])
                      for n in testbed.admin.table_stats(rep["main"].keyspace, table).per_node}
            testbed.admin.compact(rep["twin"].keyspace, table)
            live = {str(n["node"]): int(n["live_disk_bytes"])
                    for n in testbed.admin.table_stats(rep["twin"].keyspace, table).per_node}
            read = disk[(rep["main"].keyspace, table)]
            out += [{**base, "scenario": rep["scenario"], "replicate": r, "table": table,
                     "conversations": len(rep["conversations"]), "copies": rep["copies"], "node": node,
                     "disk_bytes": b, "live_bytes": live.get(node, 0), "sstables": counts.get(node),
                     "rows_written": rep["next"], "source": read.source} for node, b in read.per_node.items()]
    return out


def _batch(testbed: Testbed, p: Params, constants: Any, batch: int, days: int, scale: TimeScale,
           scenarios: list[str], series: list[dict[str, Any]], late: list[int], kept: list[tuple[str, str]]) -> None:
    """One batch of replicates through the whole simulated period (module docstring)."""
    import contextlib

    window_s = constants.message_record_twcs_window_days * DAY_S
    with contextlib.ExitStack() as stack:
        reps = [_replicate(testbed, stack, p, constants, scale, p.seed + 100 * batch + r, days, scenario)
                for scenario in scenarios for r in range(p.replicates)]
        # simulated time starts a few windows back, aligned to a window (timestamps stay in the past)
        start_s = (int(time.time()) - (days + 2) * DAY_S) // window_s * window_s - window_s
        targets = [(r, rep["main"].keyspace, t) for r, rep in enumerate(reps) for t in TABLES]
        bar = progress(range(days), total=days, desc=f"batch {batch + 1}: simulated days", enabled=p.show_progress)
        with PeakSampler(testbed.admin, targets, poll_seconds=p.poll_seconds) as sampler:
            clock, step, day = Stopwatch(), 0, 0.0   # the simulated period's clock: seconds_per_day a day
            while day < days:
                end_day = min((math.floor(day / p.flush_every_days) + 1) * p.flush_every_days, days)
                wait = end_day * p.seconds_per_day - clock.seconds()
                if wait > 0:
                    time.sleep(wait)
                elif step:
                    late.append(step)
                watch = Stopwatch()
                day = min(clock.seconds() / p.seconds_per_day, float(days))
                step += 1
                for rep in reps:
                    _write_arrivals(testbed, rep, now_s=day * DAY_S, start_s=start_s, scale=scale)
                for rep in reps:
                    testbed.admin.flush(rep["main"].keyspace)
                    testbed.admin.flush(rep["twin"].keyspace)
                for rep in reps:
                    testbed.admin.wait_for_compactions(timeout=p.settle_timeout_seconds, keyspace=rep["main"].keyspace)
                rows = _measure(testbed, reps, {"batch": batch, "step": step, "sim_day": day})
                peaks = sampler.take()
                for row in rows:
                    row["step_seconds"] = watch.seconds()
                    row["peak_bytes"] = max(row["disk_bytes"], peaks.get((row["replicate"], row["table"], row["node"]), 0))
                series += rows
                if hasattr(bar, "update"):
                    bar.update(int(day) - bar.n)
            if hasattr(bar, "close"):
                bar.close()
        kept[:] = [(rep["main"].keyspace, rep["twin"].keyspace) for rep in reps]


def _write_arrivals(testbed: Testbed, rep: dict[str, Any], *, now_s: float, start_s: int, scale: TimeScale) -> None:
    """Write the rows that arrived up to simulated ``now_s`` to both keyspaces (same TTL, same
    write timestamp), then the newest head of every conversation they touched."""

    rows, ttl = rep["rows"], rep["ttl"]
    end = int(np.searchsorted(rows.arrival_s.to_numpy(), now_s, side="right"))
    items: list[tuple[Any, tuple]] = []
    heads: dict[tuple[Any, Any], Any] = {}
    for i in range(rep["next"], end):
        row = rows.iloc[i]
        ttl_wall = scale.remaining_ttl(arrival_s=float(row.arrival_s), ttl_s=int(ttl[i]), now_s=now_s)
        if ttl_wall is None:  # expired before this step wrote it (an overrun step): as the archiver skips it
            continue
        message = to_message(row.to_dict(), seed=rep["seed"])
        ts_us = int((start_s + float(row.arrival_s)) * 1_000_000)
        for store in (rep["main"], rep["twin"]):
            items += store.seeding.statements(message, ttl_seconds=ttl_wall, timestamp_us=ts_us)
        heads[(message.tenant_id, message.conversation_id)] = message
    rep["next"] = end
    rep["conversations"].update(heads)
    if items:
        testbed.connection.execute_concurrent(items, concurrency=64)
    for message in heads.values():
        for store in (rep["main"], rep["twin"]):
            store.submit_head(_head(message))
    for store in (rep["main"], rep["twin"]):
        store.drain(30)


def run(testbed: Testbed, params: Params, *, constants: Any) -> Result:
    unknown = sorted(set(params.scenarios) - set(SCENARIOS))
    if unknown or PROFILE not in params.scenarios:
        raise ValidationError(f"scenarios must include {PROFILE!r} and be among {', '.join(SCENARIOS)}, got "
                              f"{list(params.scenarios)}", field="scenarios", value=list(params.scenarios))
    scale = TimeScale(seconds_per_day=params.seconds_per_day)
    mixes = {sc: retention_mix(params.profile, params.retention, sc, constants) for sc in params.scenarios}
    never = sum(m["share"] for m in mixes[PROFILE].values() if m["ttl_days"] == 0)
    scenarios = [sc for sc in params.scenarios if sc == PROFILE or never > 0]  # no class never expires: one mix
    window_days = constants.message_record_twcs_window_days
    start = steady_start_day(max_ttl_days=max((m["ttl_days"] for m in mixes[PROFILE].values()), default=0.0),
                             window_days=window_days, gc_grace_days=constants.message_record_gc_grace_seconds / DAY_S,
                             flush_every_days=params.flush_every_days)
    days = params.days if params.days is not None else start + params.steady_days
    series: list[dict[str, Any]] = []
    late: list[int] = []
    kept: list[tuple[str, str]] = []

    def achieved() -> float | None:
        reps = per_replicate(pd.DataFrame(series), start)
        main = reps[(reps.table == MAIN_TABLE) & (reps.scenario == PROFILE)].steady
        return relative_half_width(*mean_ci(main)) if len(main) >= 2 else None

    precision = sample_until(lambda b: _batch(testbed, params, constants, b, days, scale, scenarios, series, late, kept), achieved,
                             quantity="lsm_space_amp (message_record, steady state)",
                             target=params.target_rel_half_width, budget_seconds=params.budget_seconds,
                             min_steps=1, max_steps=max(1, params.max_batches), step_unit="batch",
                             samples_per_step=params.replicates, sample_unit="replicate")
    frame = pd.DataFrame(series)
    reps = per_replicate(frame, start)
    design = {"design_lsm_space_amp": constants.lsm_space_amp, "window_days": window_days,
              "gc_grace_seconds": constants.message_record_gc_grace_seconds,
              "retention_mix": mixes[PROFILE], "retention_mixes": {sc: mixes[sc] for sc in scenarios},
              "never_expiring_share": never,
              "capacity_sstables_per_node": twcs_windows_kept(constants.default_retention_days * DAY_S,
                                                               window_days * DAY_S),
              "nodes": int(frame.node.nunique()) if len(frame) else 0,
              "disk_source": str(frame.source.iloc[0]) if len(frame) else None}
    halves = {sc: halves_of(frame[frame.scenario == sc], start, tolerance=params.stationarity_tolerance)
              if len(frame) else None for sc in scenarios}
    return Result(params=params, series=frame, summary=summarize_tables(reps, frame), per_replicate=reps,
                  precision=precision, halves=halves, design=design, steady_start_day=start, days=days,
                  late_steps=len(late), head=head_row_fit(frame[frame.scenario == PROFILE]) if len(frame) else None,
                  keyspaces=tuple(kept) if params.keep_keyspaces else ())


def _ci(low: float | None, high: float | None) -> str:
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return f"no interval: fewer than {MIN_INTERVAL_ROUNDS} replicates"
    return f"95% CI {low:.3f}-{high:.3f}"


def _count(n: int, unit: str) -> str:
    return f"{n} {unit}{'' if n == 1 else 's'}"


def _ttl_text(days: float) -> str:
    return "never" if not days else f"{days:g} d"


def conclusion(result: Result) -> str:
    v = result.values()
    p = result.params
    scenarios = list(result.design.get("retention_mixes") or [PROFILE])
    mix = ", ".join(f"{name} {m['share']:.0%} (TTL {_ttl_text(m['ttl_days'])})"
                    for name, m in result.design["retention_mix"].items())
    lines = [f"**Simulated period**: {result.days} days of `{p.profile}` ({p.rows_per_day} rows a day per replicate; "
             f"retention mix {mix}), {p.seconds_per_day:g} wall seconds per simulated day, a flush every "
             f"{p.flush_every_days} day(s), message_record in {result.design['window_days']}-day TWCS windows; "
             f"{_count(v['replicates'], 'replicate')}"
             + (f" of each of the {len(scenarios)} retention mixes ({', '.join(scenarios)})" if len(scenarios) > 1 else "")
             + f", {result.late_steps} late step(s). Steady state from day "
             f"{result.steady_start_day} (longest finite TTL + window + gc_grace + a flush)."]
    if not result.steady_reached:
        lines.append(f"**The period ended before the steady state** (day {result.steady_start_day}): the figures below "
                     "are from its second half and measure no steady state; lsm_space_amp is not measured.")
    for scenario, g in result.summary.groupby("scenario", sort=False):
        rows = [f"- `{r.table}`: steady {r.steady:.3f} ({_ci(r.steady_ci_low, r.steady_ci_high)}), peak "
                f"{r.peak:.3f} ({_ci(r.peak_ci_low, r.peak_ci_high)}), {r.final_sstables_per_node:.0f} SSTables "
                "per node at the end" for r in g.itertuples()]
        lines.append(f"**Space amplification, {SCENARIOS[scenario]}** (bytes on disk / live bytes, nodes summed):\n\n"
                     + "\n".join(rows))
    h = result.halves.get(PROFILE)
    design = result.design["design_lsm_space_amp"]
    if h is not None and result.steady_reached:
        if h.agree:
            lines.append(f"**lsm_space_amp = {v['lsm_space_amp']:.3f}** (message_record, steady; halves {h.first:.3f} / "
                         f"{h.second:.3f} agree within {h.tolerance:.3f}) against appendix B's {design}; "
                         f"precision {result.precision.describe()}. A node keeps {v['lsm_space_amp_peak']:.3f}x the live "
                         "bytes at its peak (compactions in flight).")
        else:
            lines.append(f"**Not stationary**: message_record's amplification moved from {h.first:.3f} to {h.second:.3f} "
                         f"between the halves of the steady interval (tolerance {h.tolerance:.3f}). "
                         + (f"{result.design['never_expiring_share']:.0%} of the rows never expire (compliance_hold, "
                            "tenant_custom without a mapping) and land in every TWCS window, so no window is ever fully "
                            "expired and nothing is dropped: the factor grows with the table's age. "
                            if result.design["never_expiring_share"] > 0 else "")
                         + f"No value to put in appendix B (kept: {design}); §7's projection is a lower bound.")
    other = v.get("expiring_only_message_record_space_amp_steady")
    if other is not None and result.steady_reached:
        eh = result.halves.get("expiring_only")
        lines.append(f"Without the rows that never expire (e.g. compliance_hold in a table of its own) message_record "
                     f"settles at {other:.3f} ({_ci(v['expiring_only_message_record_space_amp_steady_ci_low'], v['expiring_only_message_record_space_amp_steady_ci_high'])}, peak "
                     f"{v['expiring_only_message_record_space_amp_peak']:.3f}"
                     + (f"; {'stationary' if eh.agree else 'still moving'}: halves {eh.first:.3f} / {eh.second:.3f}"
                        if eh is not None else "") + ").")
    if v.get("lsm_space_amp_aging_text"):
        lines.append(f"**As the table ages** (message_record's factor per simulated day): {v['lsm_space_amp_aging_text']}. "
                     f"The capacity table prices a what-if at {PROJECTION_AGE_DAYS} days beside appendix B's {design}.")
    final = result.summary[result.summary.scenario == PROFILE].set_index("table")
    if MAIN_TABLE in final.index:
        lines.append(f"SSTables: message_record ends with {final.loc[MAIN_TABLE].final_sstables_per_node:.0f} per node "
                     f"after {result.days} days; the capacity model counts {result.design['capacity_sstables_per_node']} "
                     "at steady state (every window older than the retention dropped).")
    return "\n\n".join(lines)
