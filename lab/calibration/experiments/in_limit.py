"""IN-list limit of the grouped batch read (design §4.3, §9: "suggested 100, to be measured").

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from lab.calibration.experiments.common import (
    RecordLoader,
    Testbed,
    TimedParams,
    scratch_name,
    scratch_store,
    single_partition_rows,
)
from lab.calibration.experiments.rtt_sweep import DEFAULT_SWEEP_RTTS_US, fit_sweep, measure_at_rtts, no_model_text, sweep_rtts
from lab.calibration.precision import Halves, Precision, halves
from lab.calibration.rtt_model import RttModel, RttPoint, RttSweep, rtt_text
from lab.calibration.stability import Stability, choice_stability, sample_until_stable
from lab.errors import InListTooLong, LabError
from lab.measure import bootstrap_rounds, interval_of, latency_summary, relative_half_width, timed, too_few
from lab.measure.percentiles import nearest_rank
from lab.measure.process_cpu import CpuMeter
from lab.results.jsonio import flatten
from lab.store import MESSAGE_RECORD_COLUMNS
from lab.workload import generate

_SETTINGS_CASSANDRA = ("partition_keys_in_select_fail_threshold", "partition_keys_in_select_warn_threshold",
                       "in_select_cartesian_product_fail_threshold", "in_select_cartesian_product_warn_threshold")
_SETTINGS_SCYLLA = ("max_clustering_key_restrictions_per_query", "max_partition_key_restrictions_per_query")


@dataclass(frozen=True, kw_only=True)
class Params(TimedParams):
    profile: str = "chat_mix"
    partition_rows: int = 1024
    in_sizes: tuple[int, ...] = (1, 2, 5, 10, 20, 50, 100, 150, 200, 300, 500)
    min_rounds: int = 30               # each round reads every size once, in shuffled order
    max_rounds: int = 1000             # high: an unstable choice samples on to the time budget
    target_rel_half_width: float = 0.10  # of the per-row cost at the recommended size (bootstrap 95% CI)
    budget_seconds: float = 300.0
    per_row_tolerance: float = 0.10    # the smallest size within 10% of the lowest per-row cost
    warmup: int = 20
    p99_budget_ms: float = 50.0
    probe_sizes: tuple[int, ...] = (1000, 2000, 4096)
    rtts_us: tuple[int, ...] = DEFAULT_SWEEP_RTTS_US  # emulated round trips measured besides the run's own
    rtt_rounds: int = 8                        # rounds of every size at each of them
    target_rtt_us: int | None = None           # the deployment's round trip: the recommendation is for it


@dataclass(frozen=True, kw_only=True)
class Result:
    params: Params
    design_in_limit: int
    per_size: pd.DataFrame
    samples: pd.DataFrame
    rejected: dict[int, str]
    server_limit: int | None
    settings: dict[str, Any]
    recommended: int | None
    precision: Precision | None = None
    halves: Halves | None = None
    recommended_interval: tuple[int | None, int | None] = (None, None)   # bootstrap 95%, in IN sizes
    stability: Stability | None = None        # resamples giving the same recommendation (lab.calibration.stability)
    per_row_interval: tuple[float | None, float | None] = (None, None)  # µs, at the recommended size
    lowest_per_row: int | None = None
    warnings: dict[int, list[str]] = field(default_factory=dict)
    loader_cpu_percent_of_core: tuple[float, ...] = ()   # this process (the client) per round
    loader_bound_rounds: int = 0                          # rounds over the limit: not used
    rtt: RttSweep | None = None          # the latencies at other round trips, the model, the choice at the target

    @property
    def loader_bound(self) -> bool:
        """Half the rounds or more were loader-bound: nothing is recommended from them."""
        return bool(self.loader_cpu_percent_of_core) and 2 * self.loader_bound_rounds >= len(
            self.loader_cpu_percent_of_core)

    @property
    def recommended_share(self) -> float | None:
        return self.stability.share if self.stability else None

    @property
    def unstable(self) -> bool:
        """A recommendation too few resamples choose (lab.calibration.stability): not proposed."""
        return self.recommended is not None and self.stability is not None and not self.stability.stable

    @property
    def inconclusive(self) -> bool:
        return (self.halves is not None and not self.halves.agree) or self.unstable

    def values(self) -> dict[str, Any]:
        ps = self.per_size.set_index("in_size")
        out = {"recommended_in_limit": self.recommended, "design_in_limit": self.design_in_limit,
               "server_in_limit": self.server_limit, "p99_budget_ms": self.params.p99_budget_ms,
               "partition_rows": self.params.partition_rows, "min_rounds": self.params.min_rounds,
               "in_sizes": list(self.params.in_sizes), "rejected_sizes": sorted(self.rejected),
               "server_settings": self.settings, "rounds": int(self.samples["round"].nunique()) if len(self.samples) else 0,
               "per_row_tolerance": self.params.per_row_tolerance, "lowest_per_row_in_size": self.lowest_per_row,
               "in_limit_precision": self.precision.to_json() if self.precision else None,
               "in_limit_halves": self.halves.to_json() if self.halves else None,
               "in_limit_inconclusive": self.inconclusive,
               "recommended_in_limit_ci_low": self.recommended_interval[0],
               "recommended_in_limit_ci_high": self.recommended_interval[1],
               "recommended_in_limit_bootstrap_share": self.recommended_share,
               "in_limit_stability": self.stability.to_json() if self.stability else None,
               "recommended_per_row_us_ci_low": self.per_row_interval[0],
               "recommended_per_row_us_ci_high": self.per_row_interval[1],
               "loader_cpu_percent_of_core_max": max(self.loader_cpu_percent_of_core, default=None),
               "loader_bound_rounds": self.loader_bound_rounds, "loader_bound": self.loader_bound}
        out |= _rtt_values(self)
        out |= flatten(self.per_size, "in{in_size}_{value}", {"p50_ms": float, "p99_ms": float, "per_row_us": float})
        if self.recommended is not None:
            out["recommended_p99_ms"] = float(ps.loc[self.recommended, "p99_ms"])
            out["recommended_per_row_us"] = float(ps.loc[self.recommended, "per_row_us"])
        return out


def _rtt_values(result: Result) -> dict[str, Any]:
    """The round-trip sweep's keys; with a target, the recommendation proposed is the target's."""
    sweep = result.rtt
    out: dict[str, Any] = {"recommended_in_limit_at_measured_rtt": result.recommended,
                           "target_rtt_us": result.params.target_rtt_us,
                           "in_limit_rtt": sweep.to_json() if sweep else None,
                           "in_limit_rtt_model": sweep.model.describe("key") if sweep else None,
                           "in_limit_rtt_held_out": sweep.held_out.describe() if sweep and sweep.held_out else None}
    if sweep is not None and sweep.target_rtt_us is not None and result.recommended is not None:
        out["recommended_in_limit"] = sweep.choice_at_target
    return out


def at_rtt(per_size: pd.DataFrame, model: RttModel, *, measured_rtt_us: int, rtt_us: int, p99_budget_ms: float,
           server_limit: int | None, tolerance: float) -> int | None:
    """:func:`recommend` on the measured curve moved to ``rtt_us`` by the model's round-trip term; None
    when the model moves a measured size to no time at all (a fit of noise: no choice from it)."""
    moved = per_size.copy()
    add = moved.in_size.map(lambda k: model.added_ms(k, from_rtt_us=measured_rtt_us, to_rtt_us=rtt_us))
    moved["mean_ms"] += add
    moved["p99_ms"] += add
    if (moved[moved.ok].mean_ms <= 0).any():
        return None
    moved["per_row_us"] = moved.mean_ms * 1000 / moved.in_size
    return recommend(moved, p99_budget_ms=p99_budget_ms, server_limit=server_limit, tolerance=tolerance)


def server_settings(testbed: Testbed) -> dict[str, Any]:
    """IN-list limits the server declares (Cassandra guardrails / Scylla config), best effort."""
    conn = testbed.connection
    out: dict[str, Any] = {}
    with contextlib.suppress(LabError):
        if conn.server_kind() == "scylla":
            for row in conn.execute("SELECT name, value FROM system.config"):
                if row.name in _SETTINGS_SCYLLA:
                    out[row.name] = row.value
        else:
            for row in conn.execute("SELECT name, value FROM system_views.settings"):
                if row.name in _SETTINGS_CASSANDRA:
                    out[row.name] = row.value
    return out


def recommend(per_size: pd.DataFrame, *, p99_budget_ms: float, server_limit: int | None,
              tolerance: float = 0.10) -> int | None:
    """The smallest size within ``tolerance`` of the lowest per-row cost, among sizes that
    succeeded, met the p99 budget and stay within the server limit (None: no such size)."""
    ok = per_size[(per_size.ok) & (per_size.p99_ms <= p99_budget_ms)]
    if server_limit is not None:
        ok = ok[ok.in_size <= server_limit]
    if ok.empty:
        return None
    best = float(ok.per_row_us.min())
    return int(ok[ok.per_row_us <= best * (1 + tolerance)].in_size.min())


def _round_matrix(samples: pd.DataFrame, sizes: list[int]) -> np.ndarray:
    """Latency (ms) per round x size (NaN where a size was not read or its read failed)."""
    rounds = int(samples["round"].max()) + 1 if len(samples) else 0
    out = np.full((rounds, len(sizes)), np.nan)
    col = {k: i for i, k in enumerate(sizes)}
    good = samples[samples.ok] if len(samples) else samples
    if "loader_bound" in good:  # a round in which the client was CPU-bound measured the client
        good = good[~good.loader_bound.astype(bool)]
    for r in good.itertuples():
        if r.in_size in col:
            out[int(r.round), col[int(r.in_size)]] = r.latency_ms
    return out


def _stats(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and p99 (the lab's nearest rank) per size over the rows of ``matrix`` (NaN ignored)."""
    means = np.nanmean(matrix, axis=0) if len(matrix) else np.full(matrix.shape[1], np.nan)
    p99 = np.full(matrix.shape[1], np.nan)
    for j in range(matrix.shape[1]):
        col = np.sort(matrix[:, j][~np.isnan(matrix[:, j])])
        if len(col):
            p99[j] = col[nearest_rank(99.0, len(col)) - 1]
    return means, p99


def _recommend_rows(matrix: np.ndarray, sizes: list[int], params: Params, server_limit: int | None) -> int | None:
    """:func:`recommend` over the rounds of ``matrix`` (numpy only: a bootstrap calls it a thousand
    times per check)."""
    means, p99 = _stats(matrix)
    k = np.asarray(sizes, float)
    with np.errstate(invalid="ignore"):
        ok = ~np.isnan(means) & (p99 <= params.p99_budget_ms)
    if server_limit is not None:
        ok &= k <= server_limit
    if not ok.any():
        return None
    per_row = means * 1000 / k
    best = float(per_row[ok].min())
    return int(k[ok & (per_row <= best * (1 + params.per_row_tolerance))].min())


def run(testbed: Testbed, params: Params, *, constants: Any) -> Result:
    width = constants.message_seq_bucket_width
    rng = np.random.default_rng([params.seed, 5])
    sizes = sorted({int(k) for k in params.in_sizes if 0 < int(k) <= params.partition_rows})
    samples: list[dict[str, Any]] = []
    rejected: dict[int, str] = {}
    limits: list[int] = []  # limits the server named in its rejections
    warnings: dict[int, list[str]] = {}
    with scratch_store(testbed, scratch_name("inlimit"), constants=constants, keep=params.keep_keyspace) as store:
        base = generate(params.profile, size=min(params.partition_rows, 2000), seed=params.seed,
                        bucket_width=width).messages
        conv = str(uuid.uuid4())
        part = single_partition_rows(base, rows=params.partition_rows, first_seq=width, conversation_id=conv,
                                     bucket_width=width)
        RecordLoader(store, dedup=False).load(part, seed=params.seed, show_progress=params.show_progress,
                                             desc=f"partition of {params.partition_rows} rows")
        testbed.admin.flush(store.keyspace, "message_record")
        testbed.admin.compact(store.keyspace, "message_record")
        # BYPASS CACHE on Scylla (the dialect's): a flush fills its row cache, and this reads SSTables
        cql = testbed.connection.dialect.sstable_read(
            f"SELECT {', '.join(MESSAGE_RECORD_COLUMNS)} FROM {{ks}}.message_record "
            "WHERE tenant_id = ? AND conversation_id = ? AND seq_bucket = ? AND conversation_seq IN ?")
        stmt = store.prepare_raw(cql)
        key = (uuid.UUID(str(part.tenant_id.iloc[0])), uuid.UUID(conv), 1)
        seqs = part.conversation_seq.to_numpy()

        def read(k: int, pool: np.ndarray) -> tuple[int, float, list[str]]:
            chosen = [int(s) for s in rng.choice(pool, size=k, replace=False)]
            result, timing = timed(lambda: store.connection.execute(stmt, key + (chosen,)))
            rows = len(list(result))
            return rows, timing.elapsed_ms, list(getattr(result.response_future, "warnings", None) or [])

        for _ in range(params.warmup):
            read(min(10, len(seqs)), seqs)

        round_cpu: list[float] = []

        def one_round(rep: int) -> None:
            meter = CpuMeter()
            first = len(samples)
            for k in rng.permutation(sizes):
                k = int(k)
                if k in rejected:
                    continue
                try:
                    rows, ms, warn = read(k, seqs)
                except LabError as exc:
                    rejected[k] = f"{type(exc).__name__}: {exc}"
                    limits.extend([exc.limit] if isinstance(exc, InListTooLong) else [])
                    continue
                if warn:
                    warnings.setdefault(k, []).extend(warn)
                samples.append({"round": rep, "in_size": k, "latency_ms": ms, "rows": rows, "ok": rows == k})
            pct = meter.stop().percent_of_core or 0.0
            round_cpu.append(pct)
            for sample in samples[first:]:
                sample["loader_bound"] = pct > params.max_loader_cpu_percent_of_core

        def current() -> tuple[np.ndarray, int | None]:
            return _round_matrix(pd.DataFrame(samples), sizes), (min(limits) if limits else None)

        def achieved() -> float | None:
            """Relative half-width of the bootstrap interval of the per-row cost at the current
            recommendation."""
            m, limit = current()
            rec = _recommend_rows(m, sizes, params, limit)
            if rec is None:
                return None
            j = sizes.index(rec)
            boot = bootstrap_rounds(len(m), lambda idx: float(np.nanmean(m[idx, j])) * 1000 / rec, resamples=400)
            low, high = interval_of(boot)
            return relative_half_width(float(np.nanmean(m[:, j])) * 1000 / rec, low, high)

        def halves_agree() -> bool:
            m, limit = current()
            split = halves(len(m), lambda idx: _recommend_rows(m[idx], sizes, params, limit))
            return split is None or split.agree

        def stability(resamples: int) -> Stability:
            m, limit = current()
            return choice_stability(len(m), lambda idx: _recommend_rows(m[idx], sizes, params, limit),
                                    resamples=resamples)

        precision, _ = sample_until_stable(
            one_round, stability, achieved=achieved, quantity="per-row cost at the recommended IN size",
            target=params.target_rel_half_width, budget_seconds=params.budget_seconds, min_steps=params.min_rounds,
            max_steps=max(params.min_rounds, params.max_rounds), accept=halves_agree)
        # beyond the sweep: does the server refuse larger lists at all? (values need not exist)
        for k in sorted(int(p) for p in params.probe_sizes):
            if k <= max(sizes, default=0) or any(r <= k for r in rejected):
                continue
            pool = np.arange(width, width + max(k, width), dtype=np.int64)[:width]
            pool = pool if k <= len(pool) else np.arange(width, width + k)
            try:
                read(k, pool)
            except LabError as exc:
                rejected[k] = f"{type(exc).__name__}: {exc}"
                limits += [exc.limit] if isinstance(exc, InListTooLong) else []

        def call_on(conn: Any, _scope: Any) -> Any:
            on = conn.prepare(cql.format(ks=store.keyspace))
            return lambda k: timed(lambda: list(conn.execute(on, key + ([int(s) for s in rng.choice(
                seqs, size=int(k), replace=False)],))))[1].elapsed_ms

        swept = measure_at_rtts(testbed, sweep_rtts(testbed.config.rtt_us, params.rtts_us, params.target_rtt_us),
                                call_on, [k for k in sizes if k not in rejected], rounds=params.rtt_rounds,
                                seed=params.seed)

    df = pd.DataFrame(samples)
    used = df[~df.loader_bound.astype(bool)] if len(df) and "loader_bound" in df else df
    bound_rounds = sum(1 for pct in round_cpu if pct > params.max_loader_cpu_percent_of_core)
    rows_out = []
    for k in sizes + sorted(r for r in rejected if r not in sizes):
        g = used[used.in_size == k] if len(used) else used
        summary = latency_summary(g.latency_ms if len(g) else [])
        ok = k not in rejected and len(g) > 0 and bool(g.ok.all())
        rows_out.append({"in_size": k, **summary, "per_row_us": summary["mean_ms"] * 1000 / k,
                         "per_row_p50_us": summary["p50_ms"] * 1000 / k, "ok": ok,
                         "rejected": rejected.get(k, ""), "warnings": len(warnings.get(k, []))})
    per_size = pd.DataFrame(rows_out)
    accepted = [k for k in sizes if k not in rejected]
    server_limit = max((k for k in accepted if k < min(rejected)), default=None) if rejected else None
    if limits:  # the server said its limit (InListTooLong): that, not the largest size that passed
        server_limit = min(limits)
    recommended = recommend(per_size, p99_budget_ms=params.p99_budget_ms, server_limit=server_limit,
                            tolerance=params.per_row_tolerance)
    if round_cpu and 2 * bound_rounds >= len(round_cpu):
        recommended = None  # the client, not the server, set most rounds' latencies: nothing to recommend
    lowest = recommend(per_size, p99_budget_ms=params.p99_budget_ms, server_limit=server_limit, tolerance=0.0)
    m = _round_matrix(df, sizes)
    boot = bootstrap_rounds(len(m), lambda idx: _recommend_rows(m[idx], sizes, params, server_limit))
    picked = [b for b in boot if b is not None]
    rec_interval = interval_of(picked) if picked else (None, None)
    stable = choice_stability(len(m), lambda idx: _recommend_rows(m[idx], sizes, params, server_limit),
                              choice=recommended)
    per_row_ci: tuple[float | None, float | None] = (None, None)
    sweep = None
    if swept:
        main = [RttPoint(rtt_us=testbed.config.rtt_us, x=float(r.in_size), latency_ms=float(r.mean_ms), n=int(r.n))
                for r in per_size.itertuples() if r.ok]
        sweep = fit_sweep(main, swept, measured_rtt_us=testbed.config.rtt_us, target_rtt_us=params.target_rtt_us,
                          choose=lambda m, r: at_rtt(per_size, m, measured_rtt_us=testbed.config.rtt_us, rtt_us=r,
                                                     p99_budget_ms=params.p99_budget_ms, server_limit=server_limit,
                                                     tolerance=params.per_row_tolerance))
    if recommended is not None:
        j = sizes.index(recommended)
        per_row_ci = interval_of(bootstrap_rounds(len(m), lambda idx: float(np.nanmean(m[idx, j])) * 1000 / recommended))
    return Result(params=params, design_in_limit=constants.batch_read_in_list_limit, per_size=per_size,
                  samples=df, rejected=rejected, server_limit=server_limit, settings=server_settings(testbed),
                  recommended=recommended, warnings=warnings, precision=precision,
                  halves=halves(len(m), lambda idx: _recommend_rows(m[idx], sizes, params, server_limit)),
                  recommended_interval=tuple(int(x) if x is not None else None for x in rec_interval),
                  stability=stable, per_row_interval=per_row_ci, lowest_per_row=lowest,
                  loader_cpu_percent_of_core=tuple(round(p, 1) for p in round_cpu), loader_bound_rounds=bound_rounds,
                  rtt=sweep)


def _p99_ms(value: float, n: int) -> str:
    """'p99 4.23 ms', or what lab.measure's rule says instead ('n=30: too few for p99')."""
    return f"p99 {value:.2f} ms" if too_few(99, n) is None else too_few(99, n)


def conclusion(result: Result) -> str:
    v = result.values()
    p = result.params
    n = int(v.get("rounds") or 0)  # one read per size per round
    lines = []
    if result.server_limit is None:
        largest = max([k for k in p.in_sizes if k <= p.partition_rows] + [k for k in p.probe_sizes], default=0)
        lines.append(f"**Server limit**: none detected up to {largest} IN elements "
                     f"(server settings: {result.settings or 'not readable'}). ScyllaDB rejects more than "
                     "100 by default (`max_clustering_key_restrictions_per_query`): the store must keep splitting.")
    else:
        lines.append(f"**Server limit**: the server rejected IN lists above {result.server_limit} elements "
                     f"(first rejected: {min(result.rejected)}).")
    cpu = result.loader_cpu_percent_of_core
    loader = (f"The client (this process) used at most {max(cpu):.0f}% of its core per round"
              + (f"; {result.loader_bound_rounds} of {len(cpu)} rounds were over {p.max_loader_cpu_percent_of_core:g}% "
                 "(loader-bound: their latencies are the client's) and were not used." if result.loader_bound_rounds
                 else f" (limit {p.max_loader_cpu_percent_of_core:g}%).")) if cpu else ""
    if result.loader_bound:
        lines.append(f"**No recommendation**: {loader} Keep {result.design_in_limit}; measure from a client with "
                     "CPU to spare.")
        return "\n\n".join(lines)
    if result.recommended is None:
        lines.append(f"**Recommendation**: no IN size met the p99 budget of {p.p99_budget_ms:g} ms on this cluster; "
                     "keep the design's 100 and re-measure on production hardware.")
    else:
        k = result.recommended
        lo, hi = result.recommended_interval
        tol = 100 * p.per_row_tolerance
        if result.halves is not None and not result.halves.agree:
            head = (f"**Inconclusive** (the first half of the rounds gives {result.halves.first}, the second "
                    f"{result.halves.second}): keep {result.design_in_limit}; the full sample's choice would be {k}")
        elif result.unstable:
            head = (f"**Inconclusive** ({result.stability.describe()}): not proposed, keep {result.design_in_limit}; "
                    f"the full sample's choice would be {k}")
        else:
            head = f"**Recommended IN limit: {v['recommended_in_limit']}**" + (
                "" if result.params.target_rtt_us is None or result.rtt is None else
                f" for a round trip of {result.params.target_rtt_us / 1000:g} ms ({k} where it was measured)")
        lines.append(f"{head} — the smallest size within {tol:g}% of the lowest per-row cost "
                     f"({v['recommended_per_row_us']:.0f} µs/row, {_p99_ms(v['recommended_p99_ms'], n)}; lowest at "
                     f"{result.lowest_per_row}) among sizes with p99 <= {p.p99_budget_ms:g} ms "
                     f"(single reads cost {v.get('in1_per_row_us', float('nan')):.0f} µs/row). Bootstrap over "
                     f"{v['rounds']} interleaved rounds: 95% interval {lo}-{hi}; "
                     f"{result.stability.describe() if result.stability else 'no bootstrap'}.")
        if result.precision is not None:
            lines.append(f"Precision of the per-row cost at {k}: {result.precision.describe()}.")
        if loader:
            lines.append(loader)
        d = result.design_in_limit
        if f"in{d}_p99_ms" in v:
            lines.append(f"At the design's {d}: p50 {v[f'in{d}_p50_ms']:.2f} ms, {_p99_ms(v[f'in{d}_p99_ms'], n)}, "
                         f"{v[f'in{d}_per_row_us']:.0f} µs/row.")
        if result.server_limit is None and k > 100:
            lines.append("Above 100 the gain must be weighed against ScyllaDB's default limit of 100: "
                         "raising the constant needs the server setting raised too.")
    if result.rtt is not None:
        lines.append(rtt_text(result.rtt, "the IN-limit rule gives"))
    elif no_model_text(p.target_rtt_us, "two IN sizes"):
        lines.append(no_model_text(p.target_rtt_us, "two IN sizes"))
    return "\n\n".join(lines)
