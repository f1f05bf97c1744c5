"""TWCS SSTable counts over simulated time (design §2.1, §2.3, §3).

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from lab.calibration.capacity_model.disk_sizing import twcs_windows_kept
from lab.calibration.capacity_model.twcs_model import count_after_expiry, per_group, predicted_count
from lab.calibration.experiments.common import Testbed, progress, scratch_name, scratch_store
from lab.results.jsonio import flatten
from lab.store import table_specs
from lab.workload import generate, to_message

DAY_S = 86_400
HOUR_S = 3_600
# gc_grace of the tables while the simulation writes and counts: an SSTable is fully expired only
# once its rows' TTL passed *and* gc_grace after it, so however long the fill takes on a slow
# machine, no short-TTL SSTable is dropped (nor purged away in a compaction) before expiry is due
FILL_GC_GRACE_SECONDS = 10 * DAY_S


@dataclass(frozen=True, kw_only=True)
class Params:
    profile: str = "text_only"
    record_windows_days: tuple[int, ...] = (1, 7)
    dedup_windows_hours: tuple[int, ...] = (1, 6)
    record_days: int = 21             # simulated days of message_record, one flush per day
    dedup_hours: int = 24             # simulated hours of client_dedup, one flush per hour
    rows_per_interval: int = 20
    expire_days: int = 7              # leading simulated days written with the short TTL
    expire_hours: int = 6
    short_ttl_seconds: int = 20
    expired_check_seconds: int = 1
    settle_timeout_seconds: float = 300.0   # a deadline per count, not a pace: a settled node answers at once
    seed: int = 0
    keep_keyspace: bool = False
    show_progress: bool = True


@dataclass(frozen=True, kw_only=True)
class Family:
    base: str            # message_record | client_dedup
    unit: str            # DAYS | HOURS
    unit_seconds: int
    windows: tuple[int, ...]
    intervals: int
    expire_intervals: int

    def table(self, window: int) -> str:
        return f"{self.base}_w{window}{self.unit[0].lower()}"


@dataclass(frozen=True, kw_only=True)
class Result:
    params: Params
    keyspace: str
    series: pd.DataFrame     # step x table: measured and predicted counts, settled or not
    final: pd.DataFrame      # table: final counts, after expiry, steady-state prediction
    design: dict[str, Any]

    def values(self) -> dict[str, Any]:
        out: dict[str, Any] = {"keyspace": self.keyspace, **self.design}
        out |= flatten(self.final, "{table}_{value}",
                       {"sstables": ("measured_before_expiry", int), "predicted_sstables": ("predicted_before_expiry", int),
                        "windows": int, "sstables_after_expiry": ("measured_after_expiry", int),
                        "predicted_after_expiry": int, "steady_state_windows": int, "compaction_groups": int})
        out["all_match_prediction"] = bool((self.final.measured_before_expiry == self.final.predicted_before_expiry).all())
        out["expiry_matches_prediction"] = bool((self.final.measured_after_expiry == self.final.predicted_after_expiry).all())
        # a count read before the node's compactions settled tests nothing (settle_timeout_seconds passed)
        out["compactions_settled"] = bool(self.series.settled.all() and self.final.settled_after_expiry.all())
        return out


# ---- the run --------------------------------------------------------------------------------
def _create_tables(testbed: Testbed, ks: str, constants: Any, families: list[Family], p: Params) -> None:
    specs = table_specs(constants)
    for fam in families:
        for w in fam.windows:
            spec = dataclasses.replace(
                specs[fam.base], name=fam.table(w), gc_grace_seconds=FILL_GC_GRACE_SECONDS, comment="",
                compaction={"class": "TimeWindowCompactionStrategy", "compaction_window_unit": fam.unit,
                            "compaction_window_size": str(w),
                            "expired_sstable_check_frequency_seconds": str(p.expired_check_seconds)})
            testbed.connection.execute(spec.ddl(ks, extra_options=testbed.connection.dialect.expiring_table_options()))
    testbed.connection.wait_schema_agreement()


def _row_pool(p: Params, intervals: int, width: int) -> pd.DataFrame:
    """Workload rows for every interval (and the expiry trigger), generated once."""
    return generate(p.profile, size=p.rows_per_interval * (intervals + 1), seed=p.seed, bucket_width=width).messages


def _interval_rows(pool: pd.DataFrame, p: Params, interval: int) -> pd.DataFrame:
    return pool.iloc[interval * p.rows_per_interval:(interval + 1) * p.rows_per_interval]


def _counts(testbed: Testbed, ks: str, tables: list[str]) -> dict[str, int]:
    return {t: testbed.admin.table_stats(ks, t).sstable_count for t in tables}


@dataclass(frozen=True, kw_only=True)
class FamilyPlan:
    """One family's tables over the simulation, and what each flush did (filled as it runs)."""

    family: Family
    start_s: int                                  # the simulated start: aligned to the largest window
    tables: tuple[str, ...]
    flush_windows: dict[str, list[int]]           # per table: the window of each flush
    expiring: list[bool] = field(default_factory=list)   # per flush: its rows written with the short TTL
    flush_groups: list[set] = field(default_factory=list)  # per flush: the (node, shard) groups its rows reached

    @classmethod
    def starting(cls, family: Family, now_s: float) -> FamilyPlan:
        span = max(family.windows) * family.unit_seconds
        tables = tuple(family.table(w) for w in family.windows)
        return cls(family=family, tables=tables, flush_windows={t: [] for t in tables},
                   start_s=(int(now_s) - (family.intervals + 2) * family.unit_seconds) // span * span - span)

    def ttl(self, short: bool, params: Params, constants: Any) -> int:
        if short:
            return params.short_ttl_seconds
        return 0 if self.family.base == "message_record" else constants.client_dedup_ttl_seconds

    def holding(self) -> set:
        return set().union(*self.flush_groups)


@dataclass(frozen=True, kw_only=True)
class Writer:
    """The prepared inserts of every table and how one family's row becomes their values."""

    inserts: dict[str, Any]
    seal: Any                       # store.seeding.record_values: a message_record row, sealed

    def values(self, plan: FamilyPlan, msg: Any, *, ttl: int, t_us: int, client_message_id: str,
               seq: int | None = None) -> tuple:
        if plan.family.base == "message_record":
            return self.seal(msg) + (ttl, t_us)
        return (msg.tenant_id, msg.sender_id, client_message_id, msg.message_id.to_bytes(16, "big"),
                msg.conversation_seq if seq is None else seq, 1, msg.created_at_ms, ttl, t_us)


def _writer(testbed: Testbed, ks: str, store: Any, plans: list[FamilyPlan]) -> Writer:
    columns = store.seeding.record_columns
    inserts = {}
    for plan in plans:
        for t in plan.tables:
            inserts[t] = testbed.connection.prepare(
                f"INSERT INTO {ks}.{t} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) "
                "USING TTL ? AND TIMESTAMP ?" if plan.family.base == "message_record" else
                f"INSERT INTO {ks}.{t} (tenant_id, sender_id, client_message_id, message_id, conversation_seq, "
                "state, created_at) VALUES (?, ?, ?, ?, ?, ?, ?) USING TTL ? AND TIMESTAMP ?")
    return Writer(inserts=inserts, seal=store.seeding.record_values)


def _open_expiry(testbed: Testbed, ks: str, plans: list[FamilyPlan]) -> None:
    """gc_grace 0 on every table: from now on an SSTable whose rows' TTL passed is fully expired."""
    for plan in plans:
        for t in plan.tables:
            testbed.connection.execute(f"ALTER TABLE {ks}.{t} WITH gc_grace_seconds = 0")
    testbed.connection.wait_schema_agreement()


def _simulate(testbed: Testbed, ks: str, params: Params, constants: Any, plans: list[FamilyPlan], writer: Writer,
              pool: pd.DataFrame) -> tuple[list[dict[str, Any]], float | None]:
    """Both families advance together, one simulated interval of each per step (a day of
    message_record, an hour of client_dedup), so one keyspace flush serves all four tables;
    after each, once every table's compaction check has seen the new SSTable and nothing is left
    to compact, the SSTables measured against the window arithmetic. Returns the series and when
    the last short-TTL row was written."""
    series: list[dict[str, Any]] = []
    last_short_write = None
    steps = max(p.family.intervals for p in plans)
    for i in progress(range(steps), total=steps, desc="simulated intervals", enabled=params.show_progress):
        items, stepped = [], []
        for plan in plans:
            fam = plan.family
            if i >= fam.intervals:
                continue
            short = i < fam.expire_intervals
            rows = _interval_rows(pool, params, i)
            groups: set = set()
            lo = (plan.start_s + i * fam.unit_seconds) * 1_000_000
            ts = lo + np.sort(np.random.default_rng([params.seed, i]).integers(
                0, fam.unit_seconds * 1_000_000, len(rows)))
            for row, t_us in zip(rows.to_dict("records"), ts):
                msg = to_message(row, seed=params.seed)
                values = writer.values(plan, msg, ttl=plan.ttl(short, params, constants), t_us=int(t_us),
                                       client_message_id=f"{msg.client_message_id}-{i}")
                items += [(writer.inserts[t], values) for t in plan.tables]
                groups.update(testbed.connection.placement(writer.inserts[plan.tables[0]], values))
            plan.expiring.append(short)
            plan.flush_groups.append(groups)
            stepped.append((plan, int(ts.max() // 1_000_000)))
        testbed.connection.execute_concurrent(items, concurrency=64)
        if any(plan.expiring[-1] for plan, _ in stepped):
            last_short_write = time.time()
        testbed.admin.flush(ks)
        tables = [t for plan, _ in stepped for t in plan.tables]
        settled = testbed.admin.wait_for_twcs_settled(ks, tables, timeout=params.settle_timeout_seconds)
        counts = _counts(testbed, ks, tables)
        for plan, max_s in stepped:
            fam = plan.family
            for w, t in zip(fam.windows, plan.tables):
                fw = plan.flush_windows[t]
                fw.append(max_s // (w * fam.unit_seconds))
                series.append({"family": fam.base, "table": t, "window": w, "unit": fam.unit, "step": i + 1,
                               "simulated_time_s": (i + 1) * fam.unit_seconds, "measured": counts[t], "settled": settled,
                               "predicted": predicted_count(fw, plan.flush_groups), "windows": len(set(fw)),
                               "compaction_groups": len(plan.holding())})
    return series, last_short_write


def _expire(testbed: Testbed, params: Params, constants: Any, plans: list[FamilyPlan], writer: Writer,
            pool: pd.DataFrame) -> dict[str, int]:
    """One more write per table after the short TTL: the expired check runs on it. Returns each
    table's SSTables predicted after expiry."""
    predicted_after: dict[str, int] = {}
    for plan in plans:
        fam = plan.family
        last_us = (plan.start_s + fam.intervals * fam.unit_seconds - 1) * 1_000_000
        # trigger rows: the next interval's first row, then rows until every group holding
        # SSTables got one (a single Cassandra node: the first row alone)
        candidates = pd.concat([_interval_rows(pool, params, fam.intervals),
                                pool.iloc[:fam.intervals * params.rows_per_interval]])
        holding = plan.holding()
        triggers, reached = [], set()
        for j, row in enumerate(candidates.to_dict("records")):
            msg = to_message(row, seed=params.seed)
            values = writer.values(plan, msg, ttl=plan.ttl(False, params, constants), t_us=last_us,
                                   client_message_id="trigger" if j == 0 else f"trigger-{j}", seq=1)
            groups = set(testbed.connection.placement(writer.inserts[plan.tables[0]], values))
            if j == 0 or groups - reached:
                triggers.append(values)
                reached |= groups
            if holding <= reached:
                break
        for w, t in zip(fam.windows, plan.tables):
            for values in triggers:
                testbed.connection.execute(writer.inserts[t], values)
            trigger_window = (last_us // 1_000_000) // (w * fam.unit_seconds)
            fw = plan.flush_windows[t]
            predicted_after[t] = sum(
                count_after_expiry(per_group(fw, plan.flush_groups, g),
                                   [e for e, gs in zip(plan.expiring, plan.flush_groups) if g in gs],
                                   trigger_window if g in reached else None)
                for g in holding | reached)
    return predicted_after


def _settled_counts(testbed: Testbed, ks: str, params: Params, tables: list[str],
                    predicted_after: dict[str, int]) -> tuple[dict[str, int], bool]:
    """The SSTables once compactions settle at no more than the prediction (the fully expired
    ones dropped), or as they are at the timeout; and whether they had settled."""
    testbed.admin.flush(ks)
    deadline = time.monotonic() + params.settle_timeout_seconds
    while True:
        settled = testbed.admin.wait_for_twcs_settled(ks, tables, timeout=max(0.0, deadline - time.monotonic()))
        after = _counts(testbed, ks, tables)
        if (settled and all(after[t] <= predicted_after[t] for t in tables)) or time.monotonic() >= deadline:
            return after, settled
        # settled above the prediction: the last check may have skipped the expired test (it runs
        # once per expired_check_seconds), or the TTL had not passed on the node's clock yet
        time.sleep(params.expired_check_seconds + 0.1)
        testbed.admin.nudge_compactions(ks)  # else the drop may wait for the node's minute poll


def _final_rows(plans: list[FamilyPlan], series: list[dict[str, Any]], after: dict[str, int],
                predicted_after: dict[str, int], settled_after: bool, constants: Any) -> list[dict[str, Any]]:
    retention_s = constants.default_retention_days * DAY_S
    rows = []
    for plan in plans:
        fam = plan.family
        for w, t in zip(fam.windows, plan.tables):
            fw = plan.flush_windows[t]
            last = [s for s in series if s["table"] == t][-1]
            horizon = retention_s if fam.base == "message_record" else constants.client_dedup_ttl_seconds
            rows.append({
                "family": fam.base, "table": t, "window": w, "unit": fam.unit, "flushes": len(fw),
                "windows": len(set(fw)), "measured_before_expiry": last["measured"],
                "predicted_before_expiry": last["predicted"], "measured_after_expiry": after[t],
                "compaction_groups": last["compaction_groups"], "predicted_after_expiry": predicted_after[t],
                "settled_after_expiry": settled_after,
                "expired_windows": len({fw[i] for i, e in enumerate(plan.expiring) if e}),
                "steady_state_windows": twcs_windows_kept(horizon, w * fam.unit_seconds),
                "steady_state_windows_365d": twcs_windows_kept(365 * DAY_S, w * fam.unit_seconds)
                if fam.base == "message_record" else None})
    return rows


def run(testbed: Testbed, params: Params, *, constants: Any) -> Result:
    width = constants.message_seq_bucket_width
    families = [
        Family(base="message_record", unit="DAYS", unit_seconds=DAY_S, windows=params.record_windows_days,
               intervals=params.record_days, expire_intervals=params.expire_days),
        Family(base="client_dedup", unit="HOURS", unit_seconds=HOUR_S, windows=params.dedup_windows_hours,
               intervals=params.dedup_hours, expire_intervals=params.expire_hours),
    ]
    ks = scratch_name("twcs")
    # a store on the scratch keyspace seals the rows (store.seeding.record_values), as it seals its own
    with scratch_store(testbed, ks, constants=constants, keep=params.keep_keyspace) as store:
        _create_tables(testbed, ks, constants, families, params)
        now_s = time.time()
        plans = [FamilyPlan.starting(fam, now_s) for fam in families]
        writer = _writer(testbed, ks, store, plans)
        pool = _row_pool(params, max(f.intervals for f in families), width)
        series, last_short_write = _simulate(testbed, ks, params, constants, plans, writer, pool)
        # expiry: gc_grace 0, wait out the short TTL, then one more write per table triggers the expired check
        _open_expiry(testbed, ks, plans)
        if last_short_write is not None:
            wait = last_short_write + params.short_ttl_seconds + 1.5 - time.time()
            if wait > 0:
                time.sleep(wait)
        predicted_after = _expire(testbed, params, constants, plans, writer, pool)
        after, settled_after = _settled_counts(testbed, ks, params, [t for plan in plans for t in plan.tables],
                                               predicted_after)
        final_rows = _final_rows(plans, series, after, predicted_after, settled_after, constants)
    design = {"design_message_record_window_days": constants.message_record_twcs_window_days,
              "design_client_dedup_window_hours": constants.client_dedup_twcs_window_hours,
              "retention_days": constants.default_retention_days,
              "client_dedup_ttl_seconds": constants.client_dedup_ttl_seconds,
              "record_days": params.record_days, "dedup_hours": params.dedup_hours,
              "shards_per_node": max(testbed.admin.shards_per_node().values(), default=1)}
    return Result(params=params, keyspace=ks, series=pd.DataFrame(series), final=pd.DataFrame(final_rows),
                  design=design)


def conclusion(result: Result) -> str:
    f = result.final.set_index("table")
    p = result.params
    lines = []
    for fam, span, unit in (("message_record", p.record_days, "days"), ("client_dedup", p.dedup_hours, "hours")):
        rows = f[f.family == fam]
        parts = [f"{r.window}-{unit[:-1]} window: **{r.measured_before_expiry}** SSTables "
                 f"(predicted {r.predicted_before_expiry}, {r.windows} windows), "
                 f"{r.measured_after_expiry} after {r.expired_windows} window(s) expired "
                 f"(predicted {r.predicted_after_expiry})" for r in rows.itertuples()]
        lines.append(f"**{fam}** after {span} simulated {unit} (one flush per {unit[:-1]}): " + "; ".join(parts) + ".")
    v = result.values()
    if not v["compactions_settled"]:
        lines.append(f"**Compactions had not settled** within {p.settle_timeout_seconds:.0f} s for some counts: "
                     "those are the node's state mid-compaction, not a test of the window arithmetic (a busy "
                     "node: raise settle_timeout_seconds).")
    match = "match" if v["all_match_prediction"] else "do NOT all match"
    lines.append(f"Measured counts {match} the window arithmetic (older windows compacted to one SSTable each, "
                 "the newest size-tiered), and whole expired windows are dropped as files, without compaction.")
    rec = f[f.family == "message_record"]
    if len(rec) >= 2:
        r1, r7 = rec.sort_values("window").iloc[0], rec.sort_values("window").iloc[-1]
        lines.append(f"At steady state with {result.design['retention_days']}-day retention, message_record keeps "
                     f"{r1.steady_state_windows} SSTables per node (per shard on Scylla) with {r1.window}-day windows vs "
                     f"{r7.steady_state_windows} with {r7.window}-day windows; with 365-day retention "
                     f"{int(r1.steady_state_windows_365d)} vs {int(r7.steady_state_windows_365d)}: the design's 7 days keeps the "
                     "count low while expiring data in weekly files.")
    ded = f[f.family == "client_dedup"].sort_values("window")
    if len(ded) >= 2:
        a, b = ded.iloc[0], ded.iloc[-1]
        lines.append(f"client_dedup (TTL {result.design['client_dedup_ttl_seconds']} s): {a.steady_state_windows} live "
                     f"windows with {a.window}-hour windows vs {b.steady_state_windows} with {b.window}-hour windows; "
                     "shorter windows free expired dedup data sooner (§3's 1 hour) at the price of more files "
                     "(the DDL's 6 hours).")
    return "\n\n".join(lines)
