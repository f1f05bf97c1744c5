"""CPU cost per operation under fixed-rate load: the server's, and the load generator's apart.

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from lab.calibration.capacity_model.cpu_sizing import SCYLLA_SIMPLE_OPS_PER_CORE_SECOND, WRITE_OPERATIONS
from lab.calibration.experiments.common import (
    RecordLoader,
    Testbed,
    TimedParams,
    scratch_name,
    scratch_store,
    single_partition_rows,
)
from lab.calibration.experiments.grouped_reads import _entries, s1_conversations
from lab.calibration.precision import Precision, sample_until
from lab.cluster.admin.server_cpu import cpu_seconds_between
from lab.errors import ValidationError
from lab.load.thread_driver import drive, loader_bound
from lab.load.verdict import Limits
from lab.measure import Stopwatch, median_ci, percentile, relative_half_width, summarize_histogram
from lab.measure.hdr import OpStats
from lab.measure.process_cpu import CpuMeter
from lab.measure.stats import TOO_FEW_ROUNDS
from lab.results.jsonio import flatten
from lab.store import HeadUpdate, compose_message_id
from lab.workload import generate, to_send_request

OPERATIONS = ("send", "history_latest", "history_older", "batch_s1_group", "batch_s1_dm", "react")
# High enough that a window's CPU stands out of a shared node's background (0.01 cores quiet,
# bursts of 0.2-1 core from other clients), low enough for one Python load generator.
DEFAULT_RATES: dict[str, float] = {"send": 60.0, "history_latest": 100.0, "history_older": 100.0,
                                   "batch_s1_group": 6.0, "batch_s1_dm": 15.0, "react": 60.0}
IDLE = "idle"
REACTION_KEYS = ("like", "love", "laugh", "wow")
REACTION_USERS = 50
PRECISION_RESAMPLES = 400  # the precision check between rounds (the summary uses the default 1000)


@dataclass(frozen=True, kw_only=True)
class Params(TimedParams):
    operations: tuple[str, ...] = OPERATIONS
    rates: dict[str, float] | None = None      # ops/s per operation (None: DEFAULT_RATES)
    window_seconds: float = 8.0
    idle_seconds: float = 4.0                  # idle windows around every operation window
    min_rounds: int = 5
    max_rounds: int = 20
    target_rel_half_width: float = 0.20        # of each operation's server CPU per op (bootstrap 95% CI)
    quiet_cores: float = 0.15                  # an idle window at or below this is quiet (no other client busy)
    min_quiet_windows: int = 3                 # quiet windows an operation needs to be estimated from them
    budget_seconds: float = 720.0
    workers: int = 8
    group_backlog: int = 500
    dm_count: int = 20
    dm_backlog: int = 5
    history_conversations: int = 10
    history_rows: int = 400                    # rows per history conversation (several pages)
    page_limit: int = 50
    profile: str = "chat_mix"

    def rate(self, op: str) -> float:
        return float((self.rates or {}).get(op, DEFAULT_RATES[op]))


@dataclass(frozen=True, kw_only=True)
class Result:
    params: Params
    windows: pd.DataFrame          # one row per (round, operation or idle) window
    summary: pd.DataFrame          # one row per operation
    precision: Precision
    server: str
    cpu_source: str                # proc | jmx | prometheus
    nodes: int
    loadgen_cores: int
    measured_replication_factor: int = 1     # copies of each row in the scratch keyspace (scales to production)
    per_node: pd.DataFrame = field(default_factory=pd.DataFrame)  # round x op x node/shard: CPU seconds

    def values(self) -> dict[str, Any]:
        out: dict[str, Any] = {"operations": list(self.params.operations), "window_seconds": self.params.window_seconds,
                               "rounds": int(self.windows["round"].nunique()) if len(self.windows) else 0,
                               "server": self.server, "cpu_source": self.cpu_source, "nodes": self.nodes,
                               "loadgen_cores": self.loadgen_cores, "cpu_precision": self.precision.to_json(),
                               "measured_replication_factor": self.measured_replication_factor,
                               "scylla_simple_ops_per_core_second": SCYLLA_SIMPLE_OPS_PER_CORE_SECOND}
        idle = self.windows[self.windows.op == IDLE]
        out["idle_server_cores"] = float(idle.server_cpu_seconds.sum() / idle.wall_seconds.sum()) if len(idle) else None
        rates = (idle.server_cpu_seconds / idle.wall_seconds).to_numpy() if len(idle) else np.empty(0)
        out["idle_server_cores_p10"] = percentile(rates, 10) if len(rates) else None
        out["idle_server_cores_p90"] = percentile(rates, 90) if len(rates) else None
        out |= flatten(self.summary, "cpu_{op}_{value}",
                       ["server_ms_per_op", "server_ms_per_op_ci_low", "server_ms_per_op_ci_high", "loadgen_ms_per_op",
                        "loadgen_ms_per_op_ci_low", "loadgen_ms_per_op_ci_high", "requests_per_op",
                        "server_us_per_request", "rate_requested", "rate_achieved", "corrected_p99_ms",
                        "service_p50_ms", "errors", "basis", "windows_used", "resolved", "loader_bound_windows",
                        "loadgen_cpu_percent_of_core"])
        reads = self.summary[self.summary.requests_per_op > 0]
        if len(reads):
            # the server's CPU per CQL request over every operation, weighted by requests
            total_ms = float((reads.server_ms_per_op * reads.ops).sum())
            total_requests = float((reads.requests_per_op * reads.ops).sum())
            us = 1000 * total_ms / total_requests if total_requests else None
            out["server_us_per_request"] = us
            out["server_requests_per_core_second"] = 1e6 / us if us and us > 0 else None
        return out




# ---- seeding ------------------------------------------------------------------------------------
@dataclass
class _Dataset:
    tenant: uuid.UUID
    group: list[Any]                 # BatchEntry of the group backlog (newest first)
    dms: list[Any]                   # BatchEntry of the DM shape
    history: list[tuple[uuid.UUID, int]]   # (conversation, an anchor several pages back)
    group_conversation: uuid.UUID
    group_seqs: np.ndarray
    sends: pd.DataFrame


def _seed(store: Any, params: Params, constants: Any) -> _Dataset:
    width = constants.message_seq_bucket_width
    sends_needed = int(params.rate("send") * params.window_seconds * params.max_rounds) + 10
    wl = generate(params.profile, size=max(sends_needed, 400), seed=params.seed, bucket_width=width).messages
    tenant = wl.tenant_id.value_counts().index[0]
    base = wl[wl.tenant_id == tenant]
    group, dms = s1_conversations(base, group_backlog=params.group_backlog, dm_count=params.dm_count,
                                  dm_backlog=params.dm_backlog, bucket_width=width)
    hist = []
    for i in range(params.history_conversations):
        h = single_partition_rows(base, rows=params.history_rows, first_seq=1, conversation_id=str(uuid.uuid4()),
                                  bucket_width=width)
        h["row"] += 30_000_000 + i * 10_000
        hist.append(h)
    group["row"] += 50_000_000
    rows = pd.concat([group, *dms, *hist], ignore_index=True)
    rows["tenant_id"] = tenant
    RecordLoader(store, dedup=False).load(rows, seed=params.seed, show_progress=params.show_progress, desc="seed")
    for conv_rows in [group, *dms, *hist]:  # heads: the latest page starts at H
        last = conv_rows.iloc[-1]
        mid = compose_message_id(time_ms=int(last.created_at_ms), node_id=1, counter=int(last.row))
        store.apply_head(HeadUpdate(tenant_id=uuid.UUID(str(tenant)), conversation_id=uuid.UUID(str(last.conversation_id)),
                                    conversation_seq=int(last.conversation_seq), message_id=mid, last_activity_id=mid,
                                    sender_id=uuid.UUID(str(last.sender_id))))
    dm_rows = pd.concat(dms, ignore_index=True)
    dm_rows["tenant_id"] = tenant
    group["tenant_id"] = tenant
    anchor = max(1, params.history_rows - 4 * params.page_limit)
    return _Dataset(tenant=uuid.UUID(str(tenant)),
                    group=_entries(group.nlargest(params.group_backlog, "conversation_seq")),
                    dms=_entries(dm_rows.sort_values("conversation_seq", ascending=False)
                                 .groupby("conversation_id").head(params.dm_backlog)),
                    history=[(uuid.UUID(str(h.conversation_id.iloc[0])), anchor) for h in hist],
                    group_conversation=uuid.UUID(str(group.conversation_id.iloc[0])),
                    group_seqs=group.conversation_seq.to_numpy(), sends=wl[wl.tenant_id == tenant].reset_index(drop=True))


def _calls(store: Any, data: _Dataset, params: Params) -> dict[str, Callable[[int], Any]]:
    rng = np.random.default_rng([params.seed, 16])
    users = [uuid.UUID(int=int(u)) for u in rng.integers(1, 2**62, REACTION_USERS)]
    sends = data.sends.to_dict("records")
    counter = iter(range(10**9))
    lock = threading.Lock()

    def send(k: int) -> Any:
        with lock:
            i = next(counter)
        row = dict(sends[i % len(sends)])
        row["client_message_id"] = f"cpu-{params.seed}-{i}"  # every call a new message, never a replay
        return store.send(to_send_request(row, seed=params.seed))

    def react(k: int) -> Any:
        seq = int(data.group_seqs[int(rng.integers(0, len(data.group_seqs)))])
        return store.react(data.tenant, data.group_conversation, seq, users[int(rng.integers(0, len(users)))],
                           REACTION_KEYS[k % len(REACTION_KEYS)])

    def batch(entries: list[Any]) -> Callable[[int], Any]:
        def read(k: int) -> Any:
            store.body_cache.clear()  # S-1: bodies from message_record, not the LRU
            return store.batch_read(data.tenant, entries)
        return read

    return {"send": send, "react": react, "batch_s1_group": batch(data.group), "batch_s1_dm": batch(data.dms),
            "history_latest": lambda k: store.history(data.tenant, data.history[k % len(data.history)][0],
                                                      limit=params.page_limit),
            "history_older": lambda k: store.history(data.tenant, data.history[k % len(data.history)][0],
                                                     anchor=data.history[k % len(data.history)][1],
                                                     limit=params.page_limit)}


# ---- the run ----------------------------------------------------------------------------------
def _requests(counter_snapshot: dict[str, dict[str, int]]) -> int:
    return sum(v for kinds in counter_snapshot.values() for v in kinds.values())


def run(testbed: Testbed, params: Params, *, constants: Any) -> Result:
    unknown = sorted(set(params.operations) - set(OPERATIONS))
    if unknown:
        raise ValidationError(f"unknown operations {', '.join(unknown)}; known: {', '.join(OPERATIONS)}", operations=unknown)
    rng = np.random.default_rng([params.seed, 61])
    windows: list[dict[str, Any]] = []
    per_node: list[dict[str, Any]] = []
    source = {"cpu": None}
    with scratch_store(testbed, scratch_name("cpu"), constants=constants, keep=params.keep_keyspace) as store:
        data = _seed(store, params, constants)
        copies = testbed.admin.replication(store.keyspace).copies
        testbed.admin.flush(store.keyspace)
        with contextlib.suppress(Exception):
            testbed.admin.wait_for_compactions(timeout=60, keyspace=store.keyspace)
        calls = _calls(store, data, params)
        testbed.settle_client_gc()  # set-up done: the loader's collector as the bench's (client_gc)
        for op in params.operations:  # warm-up: statements prepared, caches and JIT warm
            drive(calls[op], rate=min(params.rate(op), 10.0), seconds=1.0, workers=params.workers)
        store.drain(30)

        def window(rnd: int, seq: int, op: str) -> None:
            before_cpu, loader = testbed.admin.cpu_readings(), CpuMeter()  # this process: the load generator
            before_req = _requests(store.connection.counter.snapshot())
            watch = Stopwatch()
            driving, drive_seconds = None, 0.0
            if op == IDLE:
                time.sleep(params.idle_seconds)
                stats = OpStats()
            else:
                with CpuMeter() as meter:  # this process is the load generator: its CPU while it drives
                    stats, drive_seconds = drive(calls[op], rate=params.rate(op), seconds=params.window_seconds,
                                                 workers=params.workers)
                driving = meter.reading
                store.drain(30)  # send's asynchronous head update belongs to its window
            wall = watch.seconds()
            after_cpu, loader_cpu = testbed.admin.cpu_readings(), loader.stop()
            delta = cpu_seconds_between(before_cpu, after_cpu)
            source["cpu"] = after_cpu[0].source if after_cpu else None
            for (node, shard), sec in delta.items():
                per_node.append({"round": rnd, "op": op, "node": node, "shard": shard, "cpu_seconds": sec})
            s, c = summarize_histogram(stats.service), summarize_histogram(stats.corrected)
            windows.append({"round": rnd, "seq": seq, "op": op, "rate_requested": 0.0 if op == IDLE else params.rate(op),
                            "ops": stats.ok, "errors": sum(stats.errors.values()), "wall_seconds": wall,
                            "server_cpu_seconds": sum(delta.values()), "loadgen_cpu_seconds": loader_cpu.cpu_seconds,
                            "requests": _requests(store.connection.counter.snapshot()) - before_req,
                            "service_p50_ms": (s.p50 or 0) / 1000, "corrected_p99_ms": (c.p99 or 0) / 1000,
                            "loadgen_cpu_percent_of_core": driving.percent_of_core if driving else None,
                            "rate_driven": stats.ok / drive_seconds if drive_seconds else 0.0,
                            "lag_ms": ((c.mean or 0) - (s.mean or 0)) / 1000 if stats.ok else None})

        def one_round(rnd: int) -> None:
            order = [str(op) for op in rng.permutation(list(params.operations))]
            seq = 0
            window(rnd, seq, IDLE)
            for op in order:  # idle, op, idle, op, ..., idle: every op between two idle windows
                window(rnd, seq + 1, op)
                window(rnd, seq + 2, IDLE)
                seq += 2

        def achieved() -> float | None:
            table = per_op(pd.DataFrame(windows), _limits(params))
            worst = None
            for op in params.operations:
                used, _ = basis(table, op, params)
                if used.empty:
                    return None
                rel = relative_half_width(*median_ci(used.server_ms_per_op.to_numpy(), resamples=PRECISION_RESAMPLES))
                if rel is None:
                    return None
                worst = rel if worst is None else max(worst, rel)
            return worst

        def enough_quiet() -> bool:
            table = per_op(pd.DataFrame(windows), _limits(params))
            return all(basis(table, op, params)[1] == "quiet windows" for op in params.operations)

        precision = sample_until(one_round, achieved, quantity="server CPU per operation (worst operation)",
                                 target=params.target_rel_half_width, budget_seconds=params.budget_seconds,
                                 min_steps=params.min_rounds, max_steps=max(params.min_rounds, params.max_rounds),
                                 accept=enough_quiet)
    win = pd.DataFrame(windows)
    return Result(params=params, windows=win, summary=summarize(win, params), precision=precision,
                  server=testbed.connection.server_kind(), cpu_source=source["cpu"] or "none",
                  nodes=len({r["node"] for r in per_node}), loadgen_cores=os.cpu_count() or 1,
                  measured_replication_factor=copies, per_node=pd.DataFrame(per_node))


def per_op(windows: pd.DataFrame, limits: Limits | None = None) -> pd.DataFrame:
    """Per (round, operation): server CPU ms per op net of the idle rate around its window
    (the idle windows just before and after it), load-generator CPU ms per op, requests per op,
    and whether the window was loader-bound."""
    idle = windows[windows.op == IDLE]
    rate_at = {(int(w.round), int(w.seq)): w.server_cpu_seconds / w.wall_seconds
               for w in idle.itertuples() if w.wall_seconds > 0}
    rows = []
    for w in windows[windows.op != IDLE].itertuples():
        around = [rate_at[k] for k in ((int(w.round), int(w.seq) - 1), (int(w.round), int(w.seq) + 1)) if k in rate_at]
        rate = float(np.mean(around)) if around else 0.0
        ops = max(int(w.ops), 1)
        rows.append({"round": w.round, "op": w.op, "ops": int(w.ops), "idle_cores": rate,
                     "loadgen_cpu_percent_of_core": getattr(w, "loadgen_cpu_percent_of_core", None),
                     "loader_bound": loader_bound(w, limits),
                     "idle_max_cores": max(around) if around else float("nan"),
                     "server_ms_per_op": 1000 * (w.server_cpu_seconds - rate * w.wall_seconds) / ops,
                     "server_ms_per_op_gross": 1000 * w.server_cpu_seconds / ops,
                     "loadgen_ms_per_op": 1000 * w.loadgen_cpu_seconds / ops, "requests_per_op": w.requests / ops,
                     "rate_achieved": w.ops / w.wall_seconds if w.wall_seconds else 0.0})
    return pd.DataFrame(rows)


def basis(table: pd.DataFrame, op: str, params: Params) -> tuple[pd.DataFrame, str]:
    """The windows an operation's server CPU is estimated from: never a loader-bound one (its
    load was not what the window claims); of the rest the quiet ones when there are enough
    (module docstring), else all of them."""
    m = table[table.op == op]
    if "loader_bound" in m:
        m = m[~m.loader_bound.astype(bool)]
    if m.empty:
        return m, "every window loader-bound"
    quiet = m[m.idle_max_cores <= params.quiet_cores]
    if len(quiet) >= params.min_quiet_windows:
        return quiet, "quiet windows"
    return m, "all windows (too few quiet ones)"


def _limits(params: Params) -> Limits:
    return Limits(max_loader_cpu_percent_of_core=params.max_loader_cpu_percent_of_core)


def summarize(windows: pd.DataFrame, params: Params) -> pd.DataFrame:
    table = per_op(windows, _limits(params))
    rows = []
    for op in params.operations:
        m = table[table.op == op]
        w = windows[windows.op == op]
        if m.empty:
            continue
        used, why = basis(table, op, params)
        s_mean, s_low, s_high = median_ci(used.server_ms_per_op.to_numpy())
        l_mean, l_low, l_high = median_ci(m.loadgen_ms_per_op.to_numpy())
        req = float(m.requests_per_op.mean())
        rows.append({"op": op, "write": op in WRITE_OPERATIONS, "rounds": len(m), "ops": int(m.ops.sum()),
                     "errors": int(w.errors.sum()), "rate_requested": params.rate(op),
                     "rate_achieved": float(m.rate_achieved.mean()), "server_ms_per_op": s_mean,
                     "server_ms_per_op_ci_low": s_low, "server_ms_per_op_ci_high": s_high,
                     "basis": why, "windows_used": len(used),
                     "resolved": bool(s_low is not None and s_low > 0),
                     "loadgen_ms_per_op": l_mean, "loadgen_ms_per_op_ci_low": l_low,
                     "loadgen_ms_per_op_ci_high": l_high, "requests_per_op": req,
                     "server_us_per_request": 1000 * s_mean / req if req else float("nan"),
                     "service_p50_ms": percentile(w.service_p50_ms.to_numpy(), 50),
                     "corrected_p99_ms": float(w.corrected_p99_ms.max()),
                     "loader_bound_windows": int(m.loader_bound.astype(bool).sum()),
                     "loadgen_cpu_percent_of_core": (float(pd.to_numeric(m.loadgen_cpu_percent_of_core).max())
                                                     if m.loadgen_cpu_percent_of_core.notna().any() else None)})
    return pd.DataFrame(rows)


def _interval(low: Any, high: Any) -> str:
    missing = low is None or high is None or (isinstance(low, float) and np.isnan(low))
    return f"{TOO_FEW_ROUNDS}: confidence low" if missing else f"95% CI {low:.2f} to {high:.2f}"


def _op_line(r: Any, p: Params) -> str:
    head = f"- `{r.op}` at {r.rate_requested:g}/s (achieved {r.rate_achieved:.1f}/s, {r.errors} errors): "
    bound, lg = getattr(r, "loader_bound_windows", 0) or 0, getattr(r, "loadgen_cpu_percent_of_core", None)
    loader = (f" {bound} of {r.rounds} windows loader-bound (this process above {p.max_loader_cpu_percent_of_core:g}% "
              f"of its core while driving, at most {lg:.0f}%, or the rate not offered): not used." if bound else "")
    if r.windows_used == 0:
        return head + f"**no estimate: every window was loader-bound**{loader} Lower the rate or use a faster client."
    interval = _interval(r.server_ms_per_op_ci_low, r.server_ms_per_op_ci_high)
    return (head + f"server {r.server_ms_per_op:.2f} ms CPU per op ({interval}; {r.windows_used} {r.basis}), "
            f"{r.requests_per_op:.1f} CQL requests, {r.server_us_per_request:,.0f} µs per request; load generator "
            f"{r.loadgen_ms_per_op:.2f} ms per op; corrected p99 {r.corrected_p99_ms:,.1f} ms.{loader}"
            + ("" if r.resolved or interval.startswith(TOO_FEW_ROUNDS) else " **Not resolved** above the shared "
               "node's background (its interval reaches 0): more rounds or a quieter node."))


def conclusion(result: Result) -> str:
    v = result.values()
    p = result.params
    lines = [f"**CPU per operation** on {result.server} ({result.nodes} node(s), CPU from `{result.cpu_source}`), "
             f"{v['rounds']} rounds of {p.window_seconds:g}-second windows at fixed rates, net of the idle windows "
             f"(with no load from this run the server burnt {v['idle_server_cores'] or 0:.2f} cores on average, "
             f"{v['idle_server_cores_p10'] or 0:.2f} to {v['idle_server_cores_p90'] or 0:.2f} (p10-p90) from one idle "
             "window to the next: other work on a shared node). "
             f"Precision: {result.precision.describe()}."]
    ops = [_op_line(r, p) for r in result.summary.itertuples()]
    text = lines[0] + "\n\n" + "\n".join(ops)
    per_core = v.get("server_requests_per_core_second")
    if per_core:
        text += (f"\n\nOver all operations the server spent {v['server_us_per_request']:,.0f} µs of CPU per CQL request: "
                 f"{per_core:,.0f} requests per core-second, against ScyllaDB's sizing rule of about "
                 f"{SCYLLA_SIMPLE_OPS_PER_CORE_SECOND:,} simple operations per second per physical core "
                 f"({per_core / SCYLLA_SIMPLE_OPS_PER_CORE_SECOND:.2f}x). This is a JVM on a shared 2-core VM beside "
                 "its own load generator, and the lab's requests are not all simple (LWT, multi-row ranges): compare "
                 "ratios between operations, not the absolute against the published figure.")
    return text
