"""History pages over runs of empty buckets vs history_max_empty_bucket_scan (design §4.1, S-3).

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import contextlib
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
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
from lab.calibration.experiments.rtt_sweep import DEFAULT_SWEEP_RTTS_US, fit_sweep, measure_at_rtts, no_model_text, sweep_rtts
from lab.calibration.precision import Halves, Precision, sample_until
from lab.calibration.rtt_model import RttModel, RttPoint, RttSweep, rtt_text
from lab.calibration.stability import Stability, choice_stability, sample_until_stable
from lab.measure import bootstrap_rounds, interval_of, latency_summary, percentile, relative_half_width, timed
from lab.measure.process_cpu import CpuMeter
from lab.measure.stats import BOOTSTRAP_RESAMPLES
from lab.results.jsonio import flatten
from lab.store import HeadUpdate, MessageStore, compose_message_id
from lab.workload import generate


@dataclass(frozen=True, kw_only=True)
class Params(TimedParams):
    runs: tuple[int, ...] = (0, 1, 2, 3, 4, 6, 8, 9, 10, 12, 16, 20, 24, 30)
    scan_limits: tuple[int, ...] = (4, 8, 16, 32)
    min_rounds: int = 5                # rounds always run: every scan limit x run length once each
    max_rounds: int = 60
    target_rel_half_width: float = 0.10  # of the cost of one empty bucket (bootstrap 95% CI over rounds)
    budget_seconds: float = 240.0
    rows_newest: int = 5
    rows_oldest: int = 40
    page_limit: int = 20
    profile: str = "chat_mix"
    hole_profile: str = "chat_mix"
    hole_messages: int = 200_000       # one sample of the workload's holes; more follow while the choice is unstable
    max_hole_messages: int = 1_000_000
    hole_budget_seconds: float = 30.0
    target_truncated_share: float = 0.001
    rtts_us: tuple[int, ...] = DEFAULT_SWEEP_RTTS_US  # emulated round trips measured besides the run's own
    rtt_rounds: int = 10                       # rounds of every hole length at each of them
    target_rtt_us: int | None = None           # the deployment's round trip: the worst page priced at it


@dataclass(frozen=True, kw_only=True)
class Result:
    params: Params
    design_scan_limit: int
    pages: pd.DataFrame        # one row per page read
    summary: pd.DataFrame      # scan_limit x run
    holes: pd.DataFrame        # the workload's holes (empty_buckets per hole)
    required: int              # smallest limit the workload's holes need
    recommended: int           # max(required, design)
    per_empty_bucket_ms: float
    base_page_ms: float
    per_empty_bucket_interval: tuple[float | None, float | None] = (None, None)
    precision: Precision | None = None
    halves: Halves | None = None            # the recommendation from each half of the workload's holes
    stability: Stability | None = None      # resamples of the holes choosing the recommendation
    hole_samples: int = 1                   # samples of hole_messages messages the holes came from
    cost_halves: tuple[float, float] | None = None  # per-empty-bucket ms from each half of the rounds
    loader_cpu_percent_of_core: tuple[float, ...] = ()  # this process (the client) per round
    loader_bound_rounds: int = 0                         # over the limit: not used for the cost
    rtt: RttSweep | None = None   # pages at other round trips: the model, the worst page per round trip

    @property
    def unstable(self) -> bool:
        """Too few resamples of the holes choose the recommendation (lab.calibration.stability)."""
        return self.stability is not None and not self.stability.stable

    @property
    def inconclusive(self) -> bool:
        return (self.halves is not None and not self.halves.agree) or self.unstable

    def truncated_share(self, limit: int) -> float:
        if self.holes.empty:
            return 0.0
        return float((self.holes.empty_buckets >= limit).mean())  # a hole of `limit` empty buckets ends the page

    def values(self) -> dict[str, Any]:
        s = self.summary
        d = s[s.scan_limit == self.design_scan_limit]
        out: dict[str, Any] = {
            "design_scan_limit": self.design_scan_limit, "recommended_scan_limit": self.recommended,
            "workload_required_scan_limit": self.required,
            "workload_truncated_share_at_required": self.truncated_share(self.required),
            "per_empty_bucket_ms": self.per_empty_bucket_ms, "base_page_ms": self.base_page_ms,
            "per_empty_bucket_ms_ci_low": self.per_empty_bucket_interval[0],
            "per_empty_bucket_ms_ci_high": self.per_empty_bucket_interval[1],
            "empty_buckets_precision": self.precision.to_json() if self.precision else None,
            "scan_limit_halves": self.halves.to_json() if self.halves else None,
            "scan_limit_inconclusive": self.inconclusive,
            "scan_limit_stability": self.stability.to_json() if self.stability else None,
            "workload_hole_messages": self.params.hole_messages * self.hole_samples,
            "loader_cpu_percent_of_core_max": max(self.loader_cpu_percent_of_core, default=None),
            "loader_bound_rounds": self.loader_bound_rounds,
            "per_empty_bucket_ms_halves": list(self.cost_halves) if self.cost_halves else None,
            "rounds": int(self.pages["repeat"].nunique()) if len(self.pages) else 0,
            "runs": list(self.params.runs), "scan_limits": list(self.params.scan_limits),
            "workload_holes": int(len(self.holes)),
            "workload_empty_buckets_max": int(self.holes.empty_buckets.max()) if len(self.holes) else 0,
            "workload_truncated_share_at_design": self.truncated_share(self.design_scan_limit),
            "workload_truncated_share_at_recommended": self.truncated_share(self.recommended),
            "worst_case_page_ms_at_design": self.base_page_ms + self.design_scan_limit * self.per_empty_bucket_ms,
            "worst_case_page_ms_at_recommended": self.base_page_ms + self.recommended * self.per_empty_bucket_ms,
            "target_rtt_us": self.params.target_rtt_us,
            "empty_buckets_rtt": self.rtt.to_json() if self.rtt else None,
            "empty_buckets_rtt_model": self.rtt.model.describe("empty bucket") if self.rtt else None,
            "empty_buckets_rtt_held_out": self.rtt.held_out.describe() if self.rtt and self.rtt.held_out else None,
            "worst_case_page_ms_at_target_rtt": self.rtt.choice_at_target if self.rtt else None,
        }
        out |= flatten(d, "run{run}_{value}", {"requests": int, "empty_buckets_scanned": int,
                                                "stopped": ("stopped_on_empty", bool), "p50_ms": float})
        stopped = d[d.stopped_on_empty]
        out["first_stopping_run_at_design"] = int(stopped.run.min()) if len(stopped) else None
        out["max_empty_buckets_scanned_at_design"] = int(d.empty_buckets_scanned.max()) if len(d) else 0
        return out


def recommend_limit(holes: pd.DataFrame, target_share: float, candidates: range = range(1, 66)) -> int:
    """Smallest constant leaving at most ``target_share`` of holes at least as long as it
    (a page crosses a hole of r empty buckets only while r < the constant)."""
    return _required(holes.empty_buckets.to_numpy(), target_share, candidates)


def _required(runs: np.ndarray, target_share: float, candidates: range = range(1, 66)) -> int:
    """:func:`recommend_limit` over the holes' lengths (counted once: a bootstrap asks it often)."""
    if not len(runs):
        return 1
    runs = runs.astype(np.int64)
    at_least = np.bincount(runs, minlength=max(candidates) + 2)[::-1].cumsum()[::-1]  # [c]: holes >= c
    for c in candidates:
        if at_least[c] / len(runs) <= target_share:
            return c
    return int(runs.max()) + 1


def scan_limit_stability(holes: pd.DataFrame, target_share: float, design: int, *,
                         resamples: int = BOOTSTRAP_RESAMPLES) -> Stability:
    """How often resamples of the holes give the same recommendation, max(required, design)."""
    runs = holes.empty_buckets.to_numpy()
    return choice_stability(len(runs), lambda idx: max(_required(runs[idx], target_share), design),
                            resamples=resamples, unit="hole")


def _hole_seed(seed: int, sample: int) -> int:
    """The data seed of the ``sample``-th hole sample (the first: the run's own seed)."""
    return seed + 7919 * sample


def _conversation(base: pd.DataFrame, run: int, p: Params, width: int) -> pd.DataFrame:
    conv = str(uuid.uuid4())
    old = single_partition_rows(base, rows=p.rows_oldest, first_seq=1, conversation_id=conv, bucket_width=width)
    new = single_partition_rows(base.iloc[p.rows_oldest:], rows=p.rows_newest, first_seq=(run + 1) * width,
                                conversation_id=conv, bucket_width=width)
    new["row"] += len(base) * 10  # distinct message_ids from the old rows
    new["tenant_id"] = old.tenant_id.iloc[0]
    return pd.concat([old, new], ignore_index=True)


def page_cost(pages: pd.DataFrame) -> tuple[float, float]:
    """(ms per empty bucket, base page ms): the slope and intercept of the median page latency
    over the empty buckets a page scanned (pages that crossed their hole; all if too few)."""
    fit = pages[~pages.stopped_on_empty] if (~pages.stopped_on_empty).sum() > 2 else pages
    med = fit.groupby("empty_buckets_scanned").latency_ms.agg(lambda xs: percentile(xs, 50))
    if len(med) < 2:
        return 0.0, float(med.iloc[0]) if len(med) else 0.0
    slope, intercept = np.polyfit(med.index.to_numpy(float), med.to_numpy(), 1)
    return float(slope), float(intercept)


def worst_page_at(model: RttModel, *, base_ms: float, per_bucket_ms: float, limit: int, measured_rtt_us: int,
                  rtt_us: int) -> float | None:
    """The worst page at ``limit`` (base + limit empty buckets), moved to ``rtt_us`` by the model's
    round-trip term; None when the model moves it to no time at all (a fit of noise: no figure)."""
    ms = base_ms + limit * per_bucket_ms + model.added_ms(limit, from_rtt_us=measured_rtt_us, to_rtt_us=rtt_us)
    return round(ms, 2) if ms > 0 else None


def _sweep(testbed: Testbed, params: Params, constants: Any, state: Path, keyspace: str,
           conversations: dict[int, tuple[Any, Any]]) -> list[dict[str, Any]]:
    """Latest pages over every hole shorter than the largest scan limit, through the latency proxy."""
    limit = max(params.scan_limits)
    runs = {r: c for r, c in conversations.items() if r < limit}
    def call_on(conn: Any, scope: contextlib.ExitStack) -> Any:
        reader = scope.enter_context(MessageStore.open(
            testbed.config.replace(keyspace=keyspace), state_dir=state, connection=conn,
            constants=constants.replace(history_max_empty_bucket_scan=limit), **testbed.services.store_options()))
        return lambda r: timed(lambda: reader.history(*runs[int(r)], limit=params.page_limit))[1].elapsed_ms

    return measure_at_rtts(testbed, sweep_rtts(testbed.config.rtt_us, params.rtts_us, params.target_rtt_us),
                           call_on, sorted(runs), rounds=params.rtt_rounds, seed=params.seed)


def _usable(pages: pd.DataFrame) -> pd.DataFrame:
    """The pages of the rounds that were not loader-bound (the client's CPU under its limit)."""
    return pages[~pages.loader_bound.astype(bool)] if len(pages) and "loader_bound" in pages else pages


def _by_rounds(pages: pd.DataFrame, rounds: np.ndarray | list[int]) -> pd.DataFrame:
    """The pages of the given rounds (with repetition: a bootstrap resample)."""
    groups = dict(tuple(pages.groupby("repeat")))
    return pd.concat([groups[int(r)] for r in rounds if int(r) in groups], ignore_index=True)


def run(testbed: Testbed, params: Params, *, constants: Any) -> Result:
    width = constants.message_seq_bucket_width
    base = generate(params.profile, size=max(200, params.rows_oldest + params.rows_newest + 10),
                    seed=params.seed, bucket_width=width).messages
    pages: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        state = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="lab-empty-")))
        store = stack.enter_context(scratch_store(testbed, scratch_name("empty"), constants=constants,
                                                  keep=params.keep_keyspace, state_dir=state))
        conversations = {}
        for r in progress(params.runs, total=len(params.runs), desc="conversations", enabled=params.show_progress):
            rows = _conversation(base, r, params, width)
            RecordLoader(store, dedup=False).load(rows, seed=params.seed)
            last = rows.iloc[-1]
            mid = compose_message_id(time_ms=int(last.created_at_ms), node_id=1, counter=int(last.row))
            tenant, conv = uuid.UUID(str(last.tenant_id)), uuid.UUID(str(last.conversation_id))
            store.apply_head(HeadUpdate(tenant_id=tenant, conversation_id=conv,
                                        conversation_seq=int(last.conversation_seq), message_id=mid,
                                        last_activity_id=mid, sender_id=uuid.UUID(str(last.sender_id))))
            conversations[r] = (tenant, conv)
        testbed.admin.flush(store.keyspace)
        readers = {}
        for limit in params.scan_limits:
            readers[limit] = stack.enter_context(MessageStore.open(
                testbed.config.replace(keyspace=store.keyspace), constants=constants.replace(history_max_empty_bucket_scan=limit),
                state_dir=state, connection=testbed.connection, **testbed.services.store_options()))
        round_cpu: list[float] = []

        def one_round(rep: int) -> None:
            meter, first = CpuMeter(), len(pages)
            for limit, reader in readers.items():
                for r, (tenant, conv) in conversations.items():
                    alerts_before = reader.alerts.empty_bucket_stops
                    reads_before = reader.connection.counter.reads("message_record")
                    page, timing = timed(lambda: reader.history(tenant, conv, limit=params.page_limit))
                    pages.append({
                        "repeat": rep, "scan_limit": limit, "run": r, "latency_ms": timing.elapsed_ms,
                        "requests": page.requests, "buckets_scanned": page.buckets_scanned,
                        "empty_buckets_scanned": page.empty_buckets_scanned,
                        "message_record_reads": reader.connection.counter.reads("message_record") - reads_before,
                        "messages": len(page.messages), "has_more": page.has_more,
                        "stopped_on_empty": page.stopped_on_empty,
                        "alerts": reader.alerts.empty_bucket_stops - alerts_before})
            pct = meter.stop().percent_of_core or 0.0
            round_cpu.append(pct)
            for page in pages[first:]:  # a round in which the client was CPU-bound measured the client
                page["loader_bound"] = pct > params.max_loader_cpu_percent_of_core

        def achieved() -> float | None:
            df = _usable(pd.DataFrame(pages))
            n = int(df.repeat.nunique())
            low, high = interval_of(bootstrap_rounds(n, lambda idx: page_cost(_by_rounds(df, idx))[0], resamples=300))
            return relative_half_width(page_cost(df)[0], low, high)

        precision = sample_until(one_round, achieved, quantity="ms per empty bucket",
                                 target=params.target_rel_half_width, budget_seconds=params.budget_seconds,
                                 min_steps=params.min_rounds, max_steps=max(params.min_rounds, params.max_rounds))
        swept = _sweep(testbed, params, constants, state, store.keyspace, conversations)
    df = pd.DataFrame(pages)
    summary_rows = []
    for (limit, r), g in df.groupby(["scan_limit", "run"]):
        lat = latency_summary(g.latency_ms)
        first = g.iloc[0]
        summary_rows.append({"scan_limit": limit, "run": r, **lat, "requests": int(first.requests),
                             "buckets_scanned": int(first.buckets_scanned),
                             "empty_buckets_scanned": int(first.empty_buckets_scanned),
                             "messages": int(first.messages), "has_more": bool(first.has_more),
                             "stopped_on_empty": bool(first.stopped_on_empty), "alerts": int(g.alerts.sum()),
                             "consistent": bool(g.requests.nunique() == 1 and g.messages.nunique() == 1)})
    summary = pd.DataFrame(summary_rows)
    used = _usable(df)
    slope, intercept = page_cost(used) if len(used) else (float("nan"), float("nan"))
    n_rounds = int(used.repeat.nunique()) if len(used) else 0
    kept = sorted(used.repeat.unique()) if len(used) else []
    slope_ci = interval_of(bootstrap_rounds(n_rounds, lambda idx: page_cost(_by_rounds(used, [kept[i] for i in idx]))[0]))
    cost_halves = ((page_cost(_by_rounds(used, kept[:n_rounds // 2]))[0],
                    page_cost(_by_rounds(used, kept[n_rounds // 2:]))[0]) if n_rounds >= 2 else None)
    # Only ever raise the limit from a workload sample: lowering a safety stop on the evidence
    # of one synthetic population would truncate histories that population did not produce.
    design = constants.history_max_empty_bucket_scan
    samples: list[pd.DataFrame] = []

    def more_holes(i: int) -> None:
        samples.append(generate(params.hole_profile, size=params.hole_messages, seed=_hole_seed(params.seed, i),
                                bucket_width=width).holes)

    _, stable = sample_until_stable(
        more_holes, lambda n: scan_limit_stability(pd.concat(samples, ignore_index=True),
                                                   params.target_truncated_share, design, resamples=n),
        budget_seconds=params.hole_budget_seconds, min_steps=1,
        max_steps=max(1, params.max_hole_messages // max(1, params.hole_messages)), step_unit="hole sample")
    hole_rows = pd.concat(samples, ignore_index=True)
    required = recommend_limit(hole_rows, params.target_truncated_share)
    recommended = max(required, design)
    mid = len(hole_rows) // 2
    split = Halves(first=max(recommend_limit(hole_rows.iloc[:mid], params.target_truncated_share), design),
                   second=max(recommend_limit(hole_rows.iloc[mid:], params.target_truncated_share), design)) \
        if len(hole_rows) >= 2 else None
    sweep = None
    if swept:
        crossed = used[(used.scan_limit == max(params.scan_limits)) & ~used.stopped_on_empty.astype(bool)]
        main = [RttPoint(rtt_us=testbed.config.rtt_us, x=float(k), latency_ms=float(g.latency_ms.mean()), n=len(g))
                for k, g in crossed.groupby("empty_buckets_scanned")]
        sweep = fit_sweep(main, swept, measured_rtt_us=testbed.config.rtt_us, target_rtt_us=params.target_rtt_us,
                          choose=lambda m, r: worst_page_at(m, base_ms=float(intercept), per_bucket_ms=float(max(slope, 0.0)),
                                                            limit=recommended, measured_rtt_us=testbed.config.rtt_us,
                                                            rtt_us=r))
    return Result(params=params, design_scan_limit=design, pages=df,
                  summary=summary, holes=hole_rows, required=required, recommended=recommended,
                  per_empty_bucket_ms=float(max(slope, 0.0)), base_page_ms=float(intercept),
                  per_empty_bucket_interval=slope_ci, precision=precision, halves=split, cost_halves=cost_halves,
                  stability=stable, hole_samples=len(samples),
                  loader_cpu_percent_of_core=tuple(round(p, 1) for p in round_cpu),
                  loader_bound_rounds=sum(1 for p in round_cpu if p > params.max_loader_cpu_percent_of_core),
                  rtt=sweep)


def conclusion(result: Result) -> str:
    v = result.values()
    p = result.params
    d = result.design_scan_limit
    first_stop = v["first_stopping_run_at_design"]
    lines = [f"**Termination**: with history_max_empty_bucket_scan = {d}, a latest page over a hole of r empty "
             f"buckets reads r + 2 buckets while r < {d}; from r = {first_stop} on it stops after "
             f"{v['max_empty_buckets_scanned_at_design']} empty buckets with has_more=false and one "
             f"`empty_bucket_stops` alert per page, never scanning further (S-3: the 1 -> 100000 jump, 24 empty "
             f"buckets, costs {v.get('run24_requests', 'n/a')} requests)." if first_stop is not None else
             f"**Termination**: no page stopped on empty buckets for runs up to {max(p.runs)} at the design's {d}."]
    lo, hi = result.per_empty_bucket_interval
    ci = f" (bootstrap 95% CI {lo:.2f}-{hi:.2f} ms over {v['rounds']} rounds)" if lo is not None else ""
    lines.append(f"**Cost**: each empty bucket adds {v['per_empty_bucket_ms']:.2f} ms to a page{ci} "
                 f"(base {v['base_page_ms']:.2f} ms), so the worst page at {d} costs about "
                 f"{v['worst_case_page_ms_at_design']:.1f} ms."
                 + (f" Precision: {result.precision.describe()}." if result.precision else "")
                 + (f" {result.loader_bound_rounds} of {v['rounds']} rounds were loader-bound (this process above "
                    f"{p.max_loader_cpu_percent_of_core:g}% of its core: the client's latency) and were not used."
                    if result.loader_bound_rounds else ""))
    lines.append(f"**Workload** (`{p.hole_profile}`, {p.hole_messages} messages): {v['workload_holes']} holes from "
                 f"crashed reservation windows, the longest {v['workload_empty_buckets_max']} empty buckets; "
                 f"{100 * v['workload_truncated_share_at_design']:.3f}% of holes are longer than {d}.")
    need, rec = result.required, result.recommended
    if result.halves is not None and not result.halves.agree:
        lines.append(f"**Inconclusive**: the two halves of the workload's holes need {result.halves.first} and "
                     f"{result.halves.second}: keep history_max_empty_bucket_scan = {d} and measure a larger hole "
                     "sample (`hole_messages`).")
    elif result.unstable:
        lines.append(f"**Inconclusive** ({result.stability.describe()}, over {v['workload_holes']} holes of "
                     f"{v['workload_hole_messages']} messages): not proposed, keep history_max_empty_bucket_scan = {d}; "
                     f"the full sample's choice would be {rec}. Measure a larger hole sample (`max_hole_messages`).")
    elif rec == d:
        lines.append(f"**Recommendation: keep history_max_empty_bucket_scan = {d}** "
                     f"({result.stability.describe() if result.stability else 'no bootstrap'}). The workload needs {need} "
                     f"(the smallest value leaving at most {100 * p.target_truncated_share:g}% of its holes "
                     f"unscannable); {d} covers it with margin for heavier crash patterns, at a worst page of about "
                     f"{v['worst_case_page_ms_at_design']:.1f} ms.")
    else:
        lines.append(f"**Recommendation: raise history_max_empty_bucket_scan to {rec}** "
                     f"({result.stability.describe() if result.stability else 'no bootstrap'}). With {d}, "
                     f"{100 * v['workload_truncated_share_at_design']:.3f}% of the workload's holes cut paging short "
                     f"(more than the target {100 * p.target_truncated_share:g}%); at {rec} the worst page costs about "
                     f"{v['worst_case_page_ms_at_recommended']:.1f} ms.")
    if result.rtt is not None:
        lines.append(rtt_text(result.rtt, f"the worst page at the recommended {result.recommended} costs (ms)",
                              "empty bucket")
                     + " The limit itself follows the workload's holes; the round trip sets what its worst page costs.")
    elif no_model_text(p.target_rtt_us, "two hole lengths shorter than the largest scan limit"):
        lines.append(no_model_text(p.target_rtt_us, "two hole lengths shorter than the largest scan limit"))
    return "\n\n".join(lines)
