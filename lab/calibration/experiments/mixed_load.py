"""Server CPU per node under a fixed-rate mixed load, net of the idle rate: the CPU part of
the model check (:mod:`lab.calibration.experiments.model_check`).

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import math
import threading
import time
from collections import Counter
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd

from lab.calibration.capacity_model.predictions import operation_sequence
from lab.calibration.experiments import cpu_cost
from lab.calibration.experiments.common import Testbed, scratch_name, scratch_store
from lab.cluster.admin.server_cpu import cpu_seconds_between
from lab.errors import ValidationError
from lab.load.thread_driver import drive, loader_bound
from lab.load.verdict import Limits
from lab.measure import Stopwatch, summarize_histogram
from lab.measure.process_cpu import CpuMeter, process_cpu_seconds

IDLE = "idle"
WARMUP_SECONDS = 2.0
WARMUP_RATE = 20.0
ACHIEVED_SHARE_FLOOR = 0.95   # a mixed window below this share of the requested rate did not carry the load
MIN_WORKERS = 8                # the floor of the sized pool
MAX_WORKERS = 64
WORKERS_HEADROOM = 2.0


def workers_for(rate: float, latency_seconds: float | None) -> int:
    """Threads for ``rate`` calls/s of ``latency_seconds`` each: ceil(headroom x rate x latency)
    (Little's law with room to spare), within [MIN_WORKERS, MAX_WORKERS]; MIN_WORKERS when the
    latency is unknown."""
    if rate < 0 or (latency_seconds is not None and latency_seconds < 0):
        raise ValidationError(f"rate and latency must be >= 0, got {rate}, {latency_seconds}", rate=rate)
    if not latency_seconds:
        return MIN_WORKERS
    return max(MIN_WORKERS, min(MAX_WORKERS, math.ceil(WORKERS_HEADROOM * rate * latency_seconds)))


@dataclass(frozen=True, kw_only=True)
class MixedLoad:
    """What the windows measured: one row per (window, node), the operations each mixed window
    completed, and the replication of the scratch keyspace."""

    windows: pd.DataFrame      # seq, kind, wall_seconds, node, cpu_seconds, loadgen_cpu_seconds, ops, errors,
                               # rate_requested, rate_driven, loadgen_cpu_percent_of_core, lag_ms, loader_bound
    counts: list[dict[str, int]]   # per mixed window (in order): operations completed by kind
    copies: int
    requested_rate: float
    limits: Limits = Limits()
    workers: int = MIN_WORKERS
    workers_rule: str = ""     # how the count was chosen (given, or sized from rate x the warmup's p99)

    def loader_bound_rounds(self) -> list[int]:
        """The rounds whose mixed window was loader-bound: never used for the check."""
        w = self.windows.drop_duplicates("seq")
        return sorted(int(r) for r in w[(w.kind != IDLE) & w.loader_bound.astype(bool)]["round"])

    def rounds(self) -> pd.DataFrame:
        """Per (round, node): the mixed window's CPU net of its idle neighbours' rate."""
        w = self.windows
        rate = {(int(r.seq), r.node): r.cpu_seconds / r.wall_seconds
                for r in w[w.kind == IDLE].itertuples() if r.wall_seconds > 0}
        rows = []
        for r in w[w.kind != IDLE].itertuples():
            around = [rate[k] for k in ((int(r.seq) - 1, r.node), (int(r.seq) + 1, r.node)) if k in rate]
            idle = float(np.mean(around)) if around else 0.0
            rows.append({"round": int(r.round), "node": r.node, "wall_seconds": r.wall_seconds,
                         "cpu_seconds": r.cpu_seconds, "idle_cores": idle,
                         "net_cpu_seconds": r.cpu_seconds - idle * r.wall_seconds,
                         "loader_bound": bool(r.loader_bound)})
        return pd.DataFrame(rows)

    def load(self) -> dict[str, Any]:
        """Requested and achieved rates, errors, the load generator's CPU: was the load carried?"""
        w = self.windows.drop_duplicates("seq")
        mixed = w[w.kind != IDLE]
        wall = float(mixed.wall_seconds.sum())
        ops = int(mixed.ops.sum())
        achieved = ops / wall if wall else 0.0
        errors = int(mixed.errors.sum())
        bound = self.loader_bound_rounds()
        carried = achieved >= ACHIEVED_SHARE_FLOOR * self.requested_rate and errors == 0 and not bound
        verdict = ("carried" if carried else "loader-bound" if bound else "errors" if errors
                   else "below the requested rate")
        pct = mixed.loadgen_cpu_percent_of_core.dropna()
        return {"requested_rate": self.requested_rate, "achieved_rate": achieved,
                "achieved_share": achieved / self.requested_rate if self.requested_rate else None,
                "errors": errors, "loadgen_cores": float(mixed.loadgen_cpu_seconds.sum()) / wall if wall else None,
                "loadgen_cpu_percent_of_core_max": float(pct.max()) if len(pct) else None,
                "loader_bound_rounds": bound, "limits": self.limits.to_json(), "verdict": verdict,
                "workers": self.workers, "workers_rule": self.workers_rule,
                "ops_by_kind": dict(sum((Counter(c) for c in self.counts), Counter()))}


def run_mixed_load(testbed: Testbed, *, constants: Any, rates: dict[str, float], rounds: int, window_seconds: float,
                   idle_seconds: float, workers: int | None = None, seed: int = 0, keep: bool = False,
                   show_progress: bool = False, dataset: dict[str, int] | None = None,
                   limits: Limits | None = None) -> MixedLoad:
    """Seed cpu_cost's dataset in a scratch store and run the idle / mixed windows (module
    docstring); ``dataset``: cpu_cost.Params fields that size it (group_backlog, dm_count, ...);
    ``workers``: the driver's threads (None: sized after the warmup, :func:`workers_for`)."""
    return run_mixed_steps(testbed, constants=constants, steps={"mixed": rates}, rounds=rounds,
                           window_seconds=window_seconds, idle_seconds=idle_seconds, workers=workers, seed=seed,
                           keep=keep, show_progress=show_progress, dataset=dataset, limits=limits)[0]


def run_mixed_steps(testbed: Testbed, *, constants: Any, steps: dict[str, dict[str, float]], rounds: int,
                    window_seconds: float, idle_seconds: float, workers: int | None = None, seed: int = 0,
                    keep: bool = False, show_progress: bool = False, dataset: dict[str, int] | None = None,
                    limits: Limits | None = None) -> list[MixedLoad]:
    """:func:`run_mixed_load` at several rates of one mix (``steps``: label -> rates) on one seeded
    store: every round visits every step once, in a shuffled order, each mixed window between two
    idle ones, so a drift of the machine spreads over the steps instead of biasing one. One
    :class:`MixedLoad` per step, in the order given."""
    for label, rates in steps.items():
        unknown = sorted(set(rates) - set(cpu_cost.OPERATIONS))
        if unknown:
            raise ValidationError(f"unknown operations {', '.join(unknown)}; known: {', '.join(cpu_cost.OPERATIONS)}",
                                  operations=unknown)
        if not any(r > 0 for r in rates.values()):
            raise ValidationError(f"step {label!r} has no positive rate", step=label)
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ValidationError(f"workers must be a whole number >= 1 (or None: sized), got {workers!r}",
                              field="workers", value=workers)
    limits = limits or Limits()
    active = {label: {op: float(r) for op, r in rates.items() if r > 0} for label, rates in steps.items()}
    sequences = {label: operation_sequence(a) for label, a in active.items()}
    totals = {label: sum(a.values()) for label, a in active.items()}
    fastest = max(totals, key=totals.get)
    union = {op: max(a.get(op, 0.0) for a in active.values()) for op in set().union(*active.values())}
    cp = cpu_cost.Params(rates=union, window_seconds=window_seconds, max_rounds=rounds + 1, seed=seed,
                         show_progress=show_progress, **(dataset or {}))
    counts: Counter[str] = Counter()
    lock = threading.Lock()
    rows: list[dict[str, Any]] = []
    per_window: dict[str, list[dict[str, int]]] = {label: [] for label in steps}
    sized: dict[str, tuple[int, str]] = {}
    order_rng = np.random.default_rng([seed, 71])
    with scratch_store(testbed, scratch_name("mcload"), constants=constants, keep=keep) as store:
        data = cpu_cost._seed(store, cp, constants)
        copies = testbed.admin.replication(store.keyspace).copies
        testbed.admin.flush(store.keyspace)
        testbed.admin.wait_for_compactions(timeout=60, keyspace=store.keyspace)
        calls = cpu_cost._calls(store, data, cp)
        testbed.settle_client_gc()  # set-up done: the loader's collector as the bench's (client_gc)
        current = {"sequence": sequences[fastest]}

        def call(k: int) -> None:
            sequence = current["sequence"]
            op = sequence[k % len(sequence)]
            calls[op](k)
            with lock:
                counts[op] += 1

        warm, _ = drive(call, rate=min(totals[fastest], WARMUP_RATE), seconds=WARMUP_SECONDS,
                        workers=workers or MIN_WORKERS)
        store.drain(30)
        warm_latency = summarize_histogram(warm.service)   # µs
        p99 = warm_latency.p99
        for label, total in totals.items():
            if workers is not None:
                sized[label] = (workers, "given")
            elif p99 is None:
                sized[label] = (MIN_WORKERS, f"{MIN_WORKERS}: the warmup measured no latency")
            else:
                sized[label] = (workers_for(total, p99 / 1e6),
                                f"sized: ceil({WORKERS_HEADROOM:g} x {total:g}/s x the warmup's p99 {p99 / 1000:.1f} ms "
                                f"over {warm_latency.count} calls), within {MIN_WORKERS}-{MAX_WORKERS}")

        def window(seq: int, rnd: int, kind: str, label: str) -> None:
            before, lg = testbed.admin.cpu_readings(), process_cpu_seconds()
            watch = Stopwatch()
            errors = 0
            judged: dict[str, Any] = {"rate_requested": 0.0, "rate_driven": 0.0, "loadgen_cpu_percent_of_core": None,
                                      "lag_ms": None, "loader_bound": False, "corrected_p99_ms": None}
            with lock:
                counts.clear()
            if kind == IDLE:
                time.sleep(idle_seconds)
            else:
                current["sequence"] = sequences[label]
                with CpuMeter() as meter:  # this process is the load generator: its CPU while it drives
                    stats, drive_seconds = drive(call, rate=totals[label], seconds=window_seconds,
                                                 workers=sized[label][0])
                store.drain(30)  # send's asynchronous head update belongs to its window
                errors = sum(stats.errors.values())
                s, c = summarize_histogram(stats.service), summarize_histogram(stats.corrected)
                judged.update(rate_requested=totals[label],
                              rate_driven=stats.ok / drive_seconds if drive_seconds else 0.0,
                              loadgen_cpu_percent_of_core=meter.reading.percent_of_core if meter.reading else None,
                              lag_ms=((c.mean or 0) - (s.mean or 0)) / 1000 if stats.ok else None,
                              corrected_p99_ms=(c.p99 / 1000) if c.p99 is not None else None)
                judged["loader_bound"] = loader_bound(SimpleNamespace(**judged), limits)
            wall = watch.seconds()
            after, lg_after = testbed.admin.cpu_readings(), process_cpu_seconds()
            with lock:
                done = dict(counts)
            if kind != IDLE:
                per_window[label].append(done)
            per_node: dict[str, float] = {}
            for (node, _shard), sec in cpu_seconds_between(before, after).items():
                per_node[node] = per_node.get(node, 0.0) + sec
            rows.extend({"seq": seq, "round": rnd, "kind": kind, "step": label, "wall_seconds": wall, "node": node,
                         "cpu_seconds": sec, "loadgen_cpu_seconds": lg_after - lg,
                         "ops": sum(done.values()) if kind != IDLE else 0,
                         "sends": done.get("send", 0) if kind != IDLE else 0, "errors": errors, **judged}
                        for node, sec in per_node.items())

        seq = 0
        window(seq, -1, IDLE, "")
        for rnd in range(rounds):
            for label in [str(x) for x in order_rng.permutation(list(steps))] if len(steps) > 1 else list(steps):
                window(seq + 1, rnd, "mixed", label)
                window(seq + 2, rnd, IDLE, label)
                seq += 2
    table = pd.DataFrame(rows)
    out = []
    for label in steps:
        # this step's mixed windows and the idle windows on either side of each
        mine = set(table[(table.kind != IDLE) & (table.step == label)].seq)
        keep_seqs = mine | {q - 1 for q in mine} | {q + 1 for q in mine}
        out.append(MixedLoad(windows=table[table.seq.isin(keep_seqs)].reset_index(drop=True), counts=per_window[label],
                             copies=copies, requested_rate=totals[label], limits=limits, workers=sized[label][0],
                             workers_rule=sized[label][1]))
    return out
