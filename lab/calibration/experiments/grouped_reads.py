"""Grouped vs naive batch reads (design §4.3, S-1).

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from lab.calibration.experiments.common import (
    RecordLoader,
    Testbed,
    TimedParams,
    progress,
    scratch_name,
    scratch_store,
    single_partition_rows,
)
from lab.calibration.experiments.range_density_rtt import RangeDensityRtt, range_density_by_rtt, rtt_values
from lab.calibration.precision import Halves, halves
from lab.calibration.stability import Stability, choice_stability, sample_until_stable
from lab.cluster.tracing import traced
from lab.errors import CalibrationError
from lab.measure import a_over_b, bootstrap_rounds, interval_of, latency_summary, percentile, timed
from lab.measure.process_cpu import CpuMeter
from lab.measure.stats import BOOTSTRAP_RESAMPLES
from lab.results.jsonio import flatten
from lab.store import MESSAGE_RECORD_COLUMNS, BatchEntry, MessageStore, compose_message_id
from lab.workload import generate

# Halves of the trace rounds agree within a tenth (the threshold's step); a resample chooses the density within half that.
RANGE_DENSITY_HALVES_TOLERANCE, RANGE_DENSITY_STABILITY_TOLERANCE = 0.1, 0.05

NAIVE_CONCURRENCY = 32


@dataclass(frozen=True, kw_only=True)
class Params(TimedParams):
    profile: str = "chat_mix"
    dataset_messages: int = 2000
    mix_sizes: tuple[int, ...] = (50, 200)
    group_backlog: int = 500
    dm_count: int = 20
    dm_backlog: int = 5
    repeats: int = 5
    density_partition_rows: int = 4000
    density_entries: int = 400
    densities: tuple[float, ...] = (1.0, 0.9, 0.75, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1)
    density_trace_repeats: int = 6  # trace rounds always run: one traced read per density and method each
    max_trace_repeats: int = 12     # more rounds while the recommended density is not stable ...
    density_budget_seconds: float = 240.0  # ... or until one more round would overrun this budget
    target_rtt_us: int | None = None       # the deployment's round trip: the threshold for it (range_density_rtt)


@dataclass(frozen=True, kw_only=True)
class Result:
    params: Params
    in_list_limit: int
    runs: pd.DataFrame       # one row per (shape, method, repeat)
    summary: pd.DataFrame    # shape x method
    density: pd.DataFrame    # density sweep: one row per density (range vs IN p50)
    recommended_range_min_density: float
    density_traces: pd.DataFrame | None = None  # one row per (density, trace): server µs of range and IN
    range_density_ci: tuple[float | None, float | None] = (None, None)  # bootstrap over whole trace rounds
    range_density_halves: Halves | None = None  # first vs second half of the trace rounds
    range_density_stability: Stability | None = None  # resamples of the trace rounds choosing it
    rtt: RangeDensityRtt | None = None    # the threshold at other round trips (range_density_rtt)

    @property
    def trace_rounds(self) -> int:
        traces = self.density_traces
        return int(traces.trace.nunique()) if traces is not None and len(traces) else 0

    def values(self) -> dict[str, Any]:
        out: dict[str, Any] = {"in_list_limit": self.in_list_limit, "repeats": self.params.repeats}
        out |= flatten(self.summary, "{shape}_{method}_{value}",
                       {"entries": int, "record_reads": int, "requests": int, "point_reads": int, "index_reads": int,
                        "p50_ms": float, "reads_per_entry": float, "us_per_entry": float})
        out["recommended_range_min_density"] = self.recommended_range_min_density
        out["recommended_range_min_density_ci_low"], out["recommended_range_min_density_ci_high"] = \
            self.range_density_ci
        out["range_density_halves"] = self.range_density_halves.to_json() if self.range_density_halves else None
        out["range_density_stability"] = self.range_density_stability.to_json() if self.range_density_stability else None
        out["density_trace_rounds"] = self.trace_rounds
        out |= rtt_values(self.rtt, self.recommended_range_min_density) | {"target_rtt_us": self.params.target_rtt_us}
        if len(self.runs) and "loader_bound" in self.runs:  # the client's CPU over each timed batch read
            out["loader_bound_runs"] = int(self.runs.loader_bound.sum())
            out["loader_cpu_percent_of_core_max"] = float(self.runs.loader_cpu_percent_of_core.max())
        out["density_entries"] = self.params.density_entries
        out |= flatten(self.density.assign(percent=(100 * self.density.density).round().astype(int)),
                       "density{percent}_{value}",
                       {"range_p50_ms": float, "in_p50_ms": float, "range_rows": int, "in_requests": int,
                        "range_server_us": float, "in_server_us": float, "range_rows_read": int})
        s = self.summary.set_index(["shape", "method"])
        for shape in self.summary["shape"].unique():
            if (shape, "naive") in s.index and (shape, "grouped") in s.index:
                out[f"{shape}_speedup"] = a_over_b(s.loc[(shape, "naive"), "p50_ms"], s.loc[(shape, "grouped"), "p50_ms"])
        return out


def _entries(rows: pd.DataFrame) -> list[Any]:
    return [BatchEntry(conversation_id=uuid.UUID(str(r.conversation_id)), conversation_seq=int(r.conversation_seq),
                       message_id=compose_message_id(time_ms=int(r.created_at_ms), node_id=1, counter=int(r.row)))
            for r in rows.itertuples()]


def _mix(messages: pd.DataFrame, tenant: str, n: int, rng: np.random.Generator) -> pd.DataFrame:
    """A mailbox backlog of about ``n`` entries: spread over the tenant's conversations in
    proportion to their activity, the latest messages of each."""
    mine = messages[messages.tenant_id == tenant]
    sizes = mine.groupby("conversation_id").size()
    counts = np.minimum(rng.multinomial(min(n, len(mine)), (sizes / sizes.sum()).to_numpy()), sizes.to_numpy())
    picked = [mine[mine.conversation_id == conv].nlargest(int(k), "conversation_seq")
              for conv, k in zip(sizes.index, counts) if k > 0]
    return pd.concat(picked, ignore_index=True)


def s1_conversations(base: pd.DataFrame, *, group_backlog: int, dm_count: int, dm_backlog: int,
                     bucket_width: int) -> tuple[pd.DataFrame, list[pd.DataFrame]]:
    """S-1's two shapes as rows to load: one group with twice ``group_backlog`` messages and
    ``dm_count`` direct conversations of ``dm_backlog`` (+3) messages each, every one its own
    partition, their ``row`` numbers kept apart (the cpu_cost notebook seeds the same shapes)."""
    group = single_partition_rows(base, rows=2 * group_backlog, first_seq=1, conversation_id=str(uuid.uuid4()),
                                  bucket_width=bucket_width)
    dms = []
    for i in range(dm_count):
        dm = single_partition_rows(base.iloc[i * dm_backlog:], rows=dm_backlog + 3, first_seq=1,
                                   conversation_id=str(uuid.uuid4()), bucket_width=bucket_width)
        dm["row"] += (i + 1) * 100_000
        dms.append(dm)
    return group, dms


def run(testbed: Testbed, params: Params, *, constants: Any) -> Result:
    width = constants.message_seq_bucket_width
    rng = np.random.default_rng([params.seed, 9])
    wl = generate(params.profile, size=params.dataset_messages, seed=params.seed, bucket_width=width)
    messages = wl.messages
    tenant = messages.tenant_id.value_counts().index[0]
    base = messages[messages.tenant_id == tenant]
    group, dms = s1_conversations(base, group_backlog=params.group_backlog, dm_count=params.dm_count,
                                  dm_backlog=params.dm_backlog, bucket_width=width)
    dm_rows = pd.concat(dms, ignore_index=True)
    density_part = single_partition_rows(base, rows=params.density_partition_rows, first_seq=1,
                                         conversation_id=str(uuid.uuid4()), bucket_width=width)
    for extra in (group, dm_rows, density_part):
        extra["tenant_id"] = tenant
    group["row"] += 50_000_000
    density_part["row"] += 70_000_000

    shapes: dict[str, pd.DataFrame] = {
        f"s1_group_{params.group_backlog}": group.nlargest(params.group_backlog, "conversation_seq"),
        f"s1_dm_{params.dm_count}x{params.dm_backlog}": dm_rows.sort_values("conversation_seq", ascending=False)
        .groupby("conversation_id").head(params.dm_backlog),
        f"group_{params.group_backlog}_sparse": group.iloc[::2].head(params.group_backlog),
    }
    for n in params.mix_sizes:
        shapes[f"mix_{n}"] = _mix(messages, tenant, n, rng)

    runs: list[dict[str, Any]] = []
    with scratch_store(testbed, scratch_name("grouped"), constants=constants, keep=params.keep_keyspace) as store:
        loader = RecordLoader(store, dedup=False)
        loader.load(messages, seed=params.seed, show_progress=params.show_progress, desc="workload")
        loader.load(pd.concat([group, dm_rows, density_part], ignore_index=True), seed=params.seed,
                    show_progress=params.show_progress, desc="S-1 shapes")
        testbed.admin.flush(store.keyspace)
        conn = store.connection
        point = store.prepare_raw(f"SELECT {', '.join(MESSAGE_RECORD_COLUMNS)} FROM {{ks}}.message_record WHERE "
                                  "tenant_id = ? AND conversation_id = ? AND seq_bucket = ? AND conversation_seq = ?",
                                  key_columns=("tenant_id", "conversation_id", "seq_bucket", "conversation_seq"))
        point_summary = store.prepare_raw(
            "SELECT conversation_seq, counts FROM {ks}.message_reaction_summary WHERE tenant_id = ? AND "
            "conversation_id = ? AND seq_bucket = ? AND conversation_seq = ?",
            key_columns=("tenant_id", "conversation_id", "seq_bucket", "conversation_seq"))
        tenant_id = uuid.UUID(str(tenant))

        def grouped(entries: list[Any]) -> int:
            store.body_cache.clear()
            return len(store.batch_read(tenant_id, entries).messages)

        def naive(entries: list[Any]) -> int:
            items = []
            for e in entries:
                key = (tenant_id, e.conversation_id, e.conversation_seq // width, e.conversation_seq)
                items += [(point, key), (point_summary, key)]
            results = conn.execute_concurrent(items, concurrency=NAIVE_CONCURRENCY)
            return sum(1 for r in results[0::2] for row in r if store.decode_record(row))

        total = params.repeats * len(shapes) * 2
        bar = iter(progress(range(total), total=total, desc="batch reads", enabled=params.show_progress))
        for name, rows in shapes.items():
            entries = _entries(rows)
            for method, fn in (("grouped", grouped), ("naive", naive)):
                fn(entries[:10])  # warm-up: statements prepared
                for rep in range(params.repeats):
                    before = conn.counter.snapshot()
                    with CpuMeter() as meter:  # this process is the client: was it what the latency measured?
                        found, timing = timed(lambda: fn(entries))
                    after = conn.counter.snapshot()

                    def delta(table: str, kind: str | None = None) -> int:
                        a, b = after.get(table, {}), before.get(table, {})
                        kinds = [kind] if kind else set(a) | set(b)
                        return sum(a.get(k, 0) - b.get(k, 0) for k in kinds)

                    record_reads = sum(delta("message_record", k) for k in ("point_read", "range_read", "in_read"))
                    runs.append({"shape": name, "method": method, "repeat": rep, "entries": len(entries),
                                 "found": found, "latency_ms": timing.elapsed_ms, "record_reads": record_reads,
                                 "point_reads": delta("message_record", "point_read"),
                                 "index_reads": delta("message_index"),
                                 "requests": sum(delta(t) for t in set(after) | set(before)),
                                 "groups": rows.groupby(["conversation_id", "seq_bucket"]).ngroups,
                                 "loader_cpu_percent_of_core": meter.reading.percent_of_core,
                                 "loader_bound": (meter.reading.percent_of_core or 0) > params.max_loader_cpu_percent_of_core})
                    next(bar, None)
        density, traces, stable = _density_sweep(testbed, store, _entries(density_part), params, constants,
                                                 tenant_id=tenant_id)
    df = pd.DataFrame(runs)
    summary_rows = []
    for (shape, method), g in df.groupby(["shape", "method"], sort=False):
        lat = latency_summary(g[~g.loader_bound].latency_ms)  # never from a read the client's CPU bound
        first = g.iloc[0]
        summary_rows.append({"shape": shape, "method": method, "entries": int(first.entries),
                             "groups": int(first.groups), "found": int(g.found.min()),
                             "record_reads": int(first.record_reads), "point_reads": int(first.point_reads),
                             "index_reads": int(first.index_reads), "requests": int(first.requests), **lat,
                             "reads_per_entry": first.record_reads / first.entries,
                             "us_per_entry": lat["p50_ms"] * 1000 / first.entries})
    rounds = int(traces.trace.nunique()) if len(traces) else 0
    over = rounds_recommender(density, traces)
    return Result(params=params, in_list_limit=constants.batch_read_in_list_limit, runs=df,
                  summary=pd.DataFrame(summary_rows), density=density,
                  recommended_range_min_density=recommend_range_density(density), density_traces=traces,
                  range_density_ci=interval_of(bootstrap_rounds(rounds, over)) if rounds >= 2 else (None, None),
                  range_density_halves=halves(rounds, over, tolerance=RANGE_DENSITY_HALVES_TOLERANCE),
                  range_density_stability=stable,
                  rtt=range_density_by_rtt(density, recommend_range_density, measured_rtt_us=testbed.config.rtt_us,
                                           target_rtt_us=params.target_rtt_us))


def range_density_stability(density: pd.DataFrame, traces: pd.DataFrame, *,
                            resamples: int = BOOTSTRAP_RESAMPLES) -> Stability:
    """How often resamples of the trace rounds recommend the sweep's density (within
    RANGE_DENSITY_STABILITY_TOLERANCE)."""
    rounds = int(traces.trace.nunique()) if len(traces) else 0
    return choice_stability(rounds, rounds_recommender(density, traces), choice=recommend_range_density(density),
                            tolerance=RANGE_DENSITY_STABILITY_TOLERANCE, resamples=resamples, unit="trace round")


def rounds_recommender(density: pd.DataFrame, traces: pd.DataFrame) -> Callable[[Any], float]:
    """``over(rounds)``: the recommendation with the sweep's server times re-taken (median) over
    the trace rounds ``rounds`` only (a bootstrap resample repeats some). The traces are laid
    out once as round x density matrices: a bootstrap asks a thousand times."""
    ranges = traces.pivot(index="trace", columns="density", values="range_server_us")
    ins = traces.pivot(index="trace", columns="density", values="in_server_us")
    base = density.drop(columns=["range_server_us", "in_server_us"]).set_index("density").loc[ranges.columns]
    range_m, in_m = ranges.to_numpy(float), ins.to_numpy(float)

    def over(rounds: Any) -> float:
        idx = list(rounds)
        sweep = base.assign(range_server_us=[percentile(col, 50) for col in range_m[idx].T],
                            in_server_us=[percentile(col, 50) for col in in_m[idx].T])
        return recommend_range_density(sweep.reset_index())

    return over


def _density_sweep(testbed: Testbed, store: Any, entries: list[Any], params: Params, constants: Any, *,
                   tenant_id: uuid.UUID) -> tuple[pd.DataFrame, pd.DataFrame, Stability]:
    """Range vs IN lists over one fully written partition, per density (module docstring):
    one row per density, one per (density, trace round) with the traced server times (the
    trace rounds are the units the recommendation's interval, halves and stability resample),
    and the recommendation's stability. Trace rounds go on past ``density_trace_repeats``
    while the recommendation is not stable (lab.calibration.stability), to the budget."""

    by_seq = sorted(entries, key=lambda e: e.conversation_seq)
    n = min(params.density_entries, len(by_seq))
    limit = constants.batch_read_in_list_limit
    conversation_id = by_seq[0].conversation_id
    bucket = by_seq[0].conversation_seq // constants.message_seq_bucket_width
    # Same keyspace and state (DEKs) as ``store``; only the range threshold differs; no LRU.
    readers = {method: MessageStore.open(testbed.config.replace(keyspace=store.keyspace), state_dir=store.state_dir,
                                         connection=testbed.connection, **testbed.services.store_options(),
                                         constants=constants.replace(batch_read_range_min_density=threshold,
                                                                     body_lru_entries=0))
               for method, threshold in (("range", 0.0), ("in", 2.0))}
    # The message_record statements batch_read issues (lab.store.read.batch), traced one by one:
    # the server's own time per request, which the client's row decoding does not blur.
    where = ("SELECT " + ", ".join(MESSAGE_RECORD_COLUMNS) + " FROM {ks}.message_record WHERE tenant_id = ? "
             "AND conversation_id = ? AND seq_bucket = ? AND ")
    range_stmt = store.prepare_raw(where + "conversation_seq >= ? AND conversation_seq <= ?")
    in_stmt = store.prepare_raw(where + "conversation_seq IN ?")
    key = (tenant_id, conversation_id, bucket)

    def server_us(method: str, seqs: list[int]) -> tuple[int, int]:
        """(µs the server spent, rows it read) for the group's message_record requests."""
        calls = ([(range_stmt, key + (seqs[0], seqs[-1]))] if method == "range" else
                 [(in_stmt, key + (seqs[i:i + limit],)) for i in range(0, len(seqs), limit)])
        traces = [traced(store.connection, stmt, values)[1] for stmt, values in calls]
        return sum(t.duration_us for t in traces), sum(t.rows_read for t in traces)

    sweep: list[dict[str, Any]] = []  # per density: what the timed reads gave, and the trace rounds' times
    try:
        for d in params.densities:
            span = min(len(by_seq), max(n, round(n / d)))
            picked = [by_seq[i * span // n] for i in range(n)]
            seqs = [e.conversation_seq for e in picked]
            samples: dict[str, list[float]] = {"range": [], "in": []}
            reads: dict[str, int] = {}
            for rep in range(params.repeats + 1):  # the first pair warms up and is dropped
                for method in (("range", "in") if rep % 2 else ("in", "range")):
                    reader = readers[method]
                    before = reader.connection.counter.reads("message_record")
                    result, timing = timed(lambda: reader.batch_read(tenant_id, picked))
                    if len(result.messages) != n:
                        raise CalibrationError(f"density {d}: the {method} read returned {len(result.messages)} "
                                               f"of {n} messages", notebook="grouped_reads")
                    reads[method] = reader.connection.counter.reads("message_record") - before
                    if rep:
                        samples[method].append(timing.elapsed_ms)
            sweep.append({"density": round(n / (seqs[-1] - seqs[0] + 1), 4), "span": span, "seqs": seqs,
                          "samples": samples, "reads": reads, "server": {"range": [], "in": []}, "scanned": {}})

        def trace_round(t: int) -> None:  # both methods per density, order alternating
            for point in sweep:
                for method in (("range", "in") if t % 2 else ("in", "range")):
                    us, point["scanned"][method] = server_us(method, point["seqs"])
                    point["server"][method].append(us)

        def stability(resamples: int) -> Stability:
            return range_density_stability(*_sweep_frames(sweep, n), resamples=resamples)

        _, stable = sample_until_stable(
            trace_round, stability, budget_seconds=params.density_budget_seconds,
            min_steps=max(1, params.density_trace_repeats),
            max_steps=max(1, params.density_trace_repeats, params.max_trace_repeats), step_unit="trace round")
    finally:
        for reader in readers.values():
            reader.close()
    return (*_sweep_frames(sweep, n), stable)


def _sweep_frames(sweep: list[dict[str, Any]], entries: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The density sweep's two tables from its per-density records: one row per density (median
    server times over the trace rounds so far) and one per (density, trace round)."""
    rows = [{"density": p["density"], "entries": entries, "range_rows": p["span"],
             "range_server_us": percentile(p["server"]["range"], 50),
             "in_server_us": percentile(p["server"]["in"], 50),
             "range_rows_read": p["scanned"]["range"], "in_rows_read": p["scanned"]["in"],
             "range_p50_ms": latency_summary(p["samples"]["range"])["p50_ms"],
             "in_p50_ms": latency_summary(p["samples"]["in"])["p50_ms"],
             "range_requests": p["reads"]["range"], "in_requests": p["reads"]["in"]} for p in sweep]
    traces = [{"density": p["density"], "trace": i, "range_server_us": r, "in_server_us": v}
              for p in sweep for i, (r, v) in enumerate(zip(p["server"]["range"], p["server"]["in"]))]
    return pd.DataFrame(rows), pd.DataFrame(traces, columns=["density", "trace", "range_server_us", "in_server_us"])


def recommend_range_density(density: pd.DataFrame) -> float:
    """The density where one range read costs the server as much as the IN lists it replaces.

    A range's server time grows with the rows of its span, ``range_us = a + b / density``
    (least squares over the sweep); the IN lists read the same ``entries`` rows whatever the
    density, so their time is one number (the sweep's median). Ranges are cheaper from
    ``b / (in_us - a)`` up; the result is clamped to [the sweep's lowest density, 1] and is 1
    (contiguous groups only) when a range costs more even at density 1."""
    x = 1.0 / density.density.to_numpy(float)
    slope, intercept = np.polyfit(x, density.range_server_us.to_numpy(float), 1)
    in_us = percentile(density.in_server_us, 50)
    if in_us <= intercept + slope or slope <= 0:
        return 1.0 if in_us <= intercept + slope else round(float(density.density.min()), 2)
    crossover = slope / (in_us - intercept)
    return round(min(1.0, max(float(density.density.min()), crossover)), 2)


def _density_precision(result: Result) -> str:
    """' (95% CI 0.40-0.52 over 6 trace rounds, ...; halves 0.44 / 0.47: agree)', or what is missing."""
    low, high = result.range_density_ci
    h = result.range_density_halves
    st = result.range_density_stability
    choice = (f"; {'**' + st.describe() + '**: not proposed, the constant is kept' if not st.stable else st.describe()}"
              if st is not None else "")
    if low is None or h is None:
        return f" ({result.trace_rounds} trace round{'' if result.trace_rounds == 1 else 's'}: no interval{choice})"
    verdict = "agree" if h.agree else f"**inconclusive** (more than {h.tolerance:g} apart: the constant is kept)"
    return (f" (95% CI {low:.2f}-{high:.2f} over {result.trace_rounds} trace rounds, bootstrap by "
            f"round; halves {h.first:.2f} / {h.second:.2f}: {verdict}{choice})")


def _measured(ms: Any) -> bool:
    return ms is not None and math.isfinite(float(ms)) and float(ms) > 0


def _p50(ms: Any) -> str:
    """A p50 in ms, or why there is none (every timed read of the shape left out as loader-bound,
    or too few left for a percentile)."""
    return f"{float(ms):.1f} ms" if _measured(ms) else "not measured (too few timed reads kept: see loader-bound below)"


def conclusion(result: Result) -> str:
    s = result.summary.set_index(["shape", "method"])
    p = result.params
    lines = []
    for shape, limit in ((f"s1_group_{p.group_backlog}", 2), (f"s1_dm_{p.dm_count}x{p.dm_backlog}", p.dm_count + 1)):
        g, n = s.loc[(shape, "grouped")], s.loc[(shape, "naive")]
        ok = g.record_reads <= limit and g.point_reads == 0 and g.index_reads == 0
        lines.append(f"**{shape}** ({int(g.entries)} entries): grouped {int(g.record_reads)} message_record reads "
                     f"({g.reads_per_entry:.3f} per entry, {'within' if ok else 'OVER'} S-1's <= {limit}, "
                     f"{int(g.point_reads)} point reads, {int(g.index_reads)} message_index reads), p50 "
                     f"{_p50(g.p50_ms)}; naive {int(n.record_reads)} point reads, p50 {_p50(n.p50_ms)}"
                     + (f" ({n.p50_ms / g.p50_ms:.1f}x slower)." if _measured(g.p50_ms) and _measured(n.p50_ms)
                        else "."))
    sparse = f"group_{p.group_backlog}_sparse"
    if (sparse, "grouped") in s.index:
        g = s.loc[(sparse, "grouped")]
        lines.append(f"Every other message of the group ({sparse}, density 0.5) costs {int(g.record_reads)} reads "
                     f"(a range when the density reaches batch_read_range_min_density, else IN lists split at "
                     f"{result.in_list_limit} elements).")
    if len(result.density):
        d = result.density.sort_values("density", ascending=False)
        pairs = ", ".join(f"{r.density:.2f}: {r.range_server_us / 1000:.1f} vs {r.in_server_us / 1000:.1f} ms"
                          for r in d.itertuples())
        lines.append(f"**Range vs IN by density** ({p.density_entries} entries over a fully written partition; "
                     f"server time of the message_record requests from their traces, one range vs "
                     f"{int(d.in_requests.iloc[0])} IN lists): {pairs}. A range costs the server no more from density "
                     f"{result.recommended_range_min_density:.2f} up: recommended batch_read_range_min_density = "
                     f"{result.recommended_range_min_density:.2f}{_density_precision(result)}.")
    for shape in [x for x in s.index.get_level_values(0).unique() if str(x).startswith("mix_")]:
        g, n = s.loc[(shape, "grouped")], s.loc[(shape, "naive")]
        lines.append(f"Mailbox mix {shape} ({int(g.entries)} entries over {int(g.groups)} partitions): grouped "
                     f"{int(g.record_reads)} reads ({g.us_per_entry:.0f} µs/entry) vs naive {int(n.record_reads)} "
                     f"({n.us_per_entry:.0f} µs/entry).")
    lines += [result.rtt.describe()] if result.rtt is not None else []
    bound = int(result.runs.loader_bound.sum()) if "loader_bound" in result.runs else 0
    if bound:
        lines.append(f"{bound} of {len(result.runs)} timed batch reads were loader-bound (this process above "
                     f"{p.max_loader_cpu_percent_of_core:g}% of its core during the read: the client's latency) and are "
                     "left out of the latencies above; the read counts and the density's server times are unaffected.")
    return "\n\n".join(lines)
