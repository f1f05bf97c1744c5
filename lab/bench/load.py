"""`lab bench load`: is the load generator what limits a measurement? And the staircase.

In one run, on one node, into one fresh keyspace (dropped at the end):

1. ``send``: maximum ``store.send`` throughput of a plain client (``concurrency`` OS threads,
   the driver's default reactor, no Locust, no gevent) vs ``lab load --profile send_only
   --users <concurrency>`` (closed loop, the Locust users on the measured reactor);
2. ``read``: the same for history pages (latest page, then older pages, sometimes newer:
   the history readers' mix) over seeded conversations, ``--profile read_only``;
3. the ratio Locust / plain for each (1.0: the load generator costs nothing; well below
   1.0: Locust, not the store, limits a measurement at that concurrency);
4. a staircase of fixed-rate send steps at 50/75/90/105% of the higher of the two measured
   send maxima: per step the achieved rate, p99 from the due time (coordinated omission
   corrected) and of service time, and the load generator's CPU.

The order is plain send, Locust send, Locust read, plain read (ABBA), so a node that slows
down as it fills does not favour one side. Writes ``bench/load.json`` and the Locust runs'
own ``load-*/`` folders; the closing note carries the ratios and the staircase.
"""
from __future__ import annotations

import json
import random
import shutil
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from collections.abc import Callable

from lab.project import RESULTS_DIR
from lab.cluster.config import ClusterConfig
from lab.measure import a_over_b, now_ns
from lab.measure.clock import NS_PER_SECOND
from lab.measure.hdr import LatencyRecorder, OpStats, merge_stats, percentiles_us
from lab.load.runner import LoadOptions, run_load, seed_worker
from lab.load.plan import SEED_SHAPES, KeyRange, LoadPlan, load_profile, message_templates
from lab.results.runs import machine, new_run_dir

HISTORY_LIMIT = 50  # the history readers' page size (loadgen.users.HISTORY_LIMIT)


@dataclass(frozen=True, kw_only=True)
class LoadBenchParams:
    seconds: float = 15.0
    warmup_seconds: float = 3.0
    concurrency: int = 32
    processes: int = 1
    step_seconds: float = 10.0
    seed_size: str = "small"

    @classmethod
    def preset(cls, *, quick: bool) -> LoadBenchParams:
        return cls(seconds=8, warmup_seconds=2, concurrency=16, step_seconds=6, seed_size="tiny") if quick else cls()


@dataclass(frozen=True)
class LoadBenchResult:
    run_dir: Path
    json_path: Path
    data: dict[str, Any]
    closing_note: str


def _plain(config: ClusterConfig, *, threads: int, seconds: float, warmup: float,
           call: Callable[[Any, random.Random], None], store: Any) -> dict[str, Any]:
    """``threads`` closed-loop callers of ``call(store, rng)``; measured after ``warmup``."""
    import psutil

    recs = [LatencyRecorder(fixed_rate=False) for _ in range(threads)]
    start = now_ns() + int(warmup * NS_PER_SECOND)
    stop = start + int(seconds * NS_PER_SECOND)
    me = psutil.Process()

    def worker(i: int) -> None:
        rng = random.Random(i)
        while (t := now_ns()) < stop:
            err = None
            try:
                call(store, rng)
            except Exception as exc:  # recorded, as the Locust users do
                err = type(exc).__name__
            if t >= start:
                recs[i].record("call", started_ns=t, ended_ns=now_ns(), error=err)

    pool = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(threads)]
    for t in pool:
        t.start()
    time.sleep(warmup)
    cpu0 = sum(me.cpu_times()[:2])
    for t in pool:
        t.join()
    cpu = sum(me.cpu_times()[:2]) - cpu0
    stats = merge_stats(r.totals for r in recs).get("call", OpStats())
    return {"calls": stats.count, "errors": sum(stats.errors.values()), "throughput": round(stats.count / seconds, 2),
            "service_us": percentiles_us(stats.service),
            "client_cpu_percent_of_one_core": round(100 * cpu / seconds, 1)}


def _locust_row(result: Any) -> dict[str, Any]:
    s = result.summary
    allops = s["all_operations"]
    return {"calls": allops["count"], "errors": allops["errors"], "throughput": s["achieved_rate"],
            "service_us": allops["service_us"], "loadgen_cpu": s.get("loadgen_cpu"),
            "audit_ok": (s.get("audit") or {}).get("ok"), "load_dir": str(result.load_dir)}


def _run(config: ClusterConfig, options: LoadOptions, state_dirs: list[Path]) -> Any:
    result = run_load(config, options)
    if result.state_root is not None:
        state_dirs.append(result.state_root)
    return result


def run_load_bench(config: ClusterConfig, params: LoadBenchParams, *, results: Path = RESULTS_DIR,
                   log: Callable[[str], None] = lambda _m: None) -> LoadBenchResult:
    from lab.cluster.connection import connect
    from lab.store import MessageStore

    run_dir = new_run_dir(Path(results))
    bench_dir = run_dir / "bench"
    bench_dir.mkdir()
    keyspace = f"benchload_{uuid.uuid4().hex[:8]}"
    config = config.replace(keyspace=keyspace)
    common = dict(duration_seconds=params.seconds, warmup_seconds=params.warmup_seconds,
                  processes=params.processes, seed_size=params.seed_size, run_dir=run_dir)
    out: dict[str, Any] = {"params": asdict(params), "keyspace": keyspace, "machine": machine(),
                           "cluster": config.redacted()}
    state_dirs: list[Path] = []
    try:
        # the plain client's own key range, seeded like a Locust worker's
        plain_plan = LoadPlan(run_id=f"{run_dir.name}-plain", load_dir=(run_dir / "plain").resolve(),
                              state_root=(Path(config.lab_home) / "load-state" / f"{run_dir.name}-plain").resolve(),
                              profile="read_only", users=params.concurrency, seed_size=params.seed_size,
                              node_id_base=90)
        state_dirs.append(plain_plan.state_root)
        with MessageStore.open(config, state_dir=plain_plan.state_root / "setup", node_id=89) as s:
            s.create_schema()
        log("seeding the plain client's conversations")
        seed_worker(config, plain_plan)
        # reads see the seeded conversations as the Locust readers do (range 0, never sent to);
        # sends go to a range of their own (1), as the Locust senders have theirs
        keys = KeyRange(plain_plan.run_id, 0, SEED_SHAPES[params.seed_size])
        send_keys = KeyRange(plain_plan.run_id, 1, SEED_SHAPES[params.seed_size])
        templates = message_templates(load_profile("send_only").content)
        send_chats = send_keys.chats() + [send_keys.big_group]
        counter = iter(range(10**9))
        lock = threading.Lock()

        def send(store: Any, rng: random.Random) -> None:
            conv = rng.choice(send_chats)
            with lock:
                n = next(counter)
            store.send(send_keys.request(rng.choice(templates), conversation_id=conv,
                                         sender_id=rng.choice(send_keys.senders(conv)),
                                         client_message_id=send_keys.client_message_id(n, "plain")))

        def read(store: Any, rng: random.Random) -> None:
            conv = keys.big_group if rng.random() < 0.2 else rng.choice(keys.chats())  # the readers' choice
            page = store.history(keys.tenant_id, conv, direction="older", anchor=None, limit=HISTORY_LIMIT)
            for _ in range(rng.choice((0, 0, 1, 2))):  # the readers' session: a few older pages
                if not page.has_more or page.next_anchor is None:
                    break
                page = store.history(keys.tenant_id, conv, direction="older", anchor=page.next_anchor,
                                     limit=HISTORY_LIMIT)

        with MessageStore.open(config, state_dir=plain_plan.state_dir(), node_id=plain_plan.node_id) as store:
            log(f"plain send: {params.concurrency} threads, {params.seconds:g} s")
            out["plain_send"] = _plain(config, threads=params.concurrency, seconds=params.seconds,
                                       warmup=params.warmup_seconds, call=send, store=store)
            log("Locust send")
            out["locust_send"] = _locust_row(_run(config, LoadOptions(
                profile="send_only", users=params.concurrency, load_subdir="load-send-max", **common), state_dirs))
            log("Locust read")
            out["locust_read"] = _locust_row(_run(config, LoadOptions(
                profile="read_only", users=params.concurrency, load_subdir="load-read-max", **common), state_dirs))
            log(f"plain read: {params.concurrency} threads, {params.seconds:g} s")
            out["plain_read"] = _plain(config, threads=params.concurrency, seconds=params.seconds,
                                       warmup=params.warmup_seconds, call=read, store=store)
        out["ratio_send"] = a_over_b(out["locust_send"]["throughput"], out["plain_send"]["throughput"], digits=3)
        out["ratio_read"] = a_over_b(out["locust_read"]["throughput"], out["plain_read"]["throughput"], digits=3)
        max_send = max(out["plain_send"]["throughput"], out["locust_send"]["throughput"])
        log(f"staircase at 50/75/90/105% of {max_send:.1f} sends/s")
        stair = _run(config, LoadOptions(profile="send_only", staircase_max=max_send,
                                         step_seconds=params.step_seconds, load_subdir="load-staircase",
                                         **{**common, "warmup_seconds": 0.0}), state_dirs)
        out["staircase"] = {"max_rate": max_send, "load_dir": str(stair.load_dir),
                            "audit_ok": (stair.summary.get("audit") or {}).get("ok"),
                            "steps": [{k: st[k] for k in ("requested_rate", "achieved_rate", "corrected_us",
                                                            "service_us", "loadgen_cpu")}
                                      for st in stair.summary.get("steps", [])]}
    finally:
        with connect(config) as conn:
            conn.execute(f"DROP KEYSPACE IF EXISTS {keyspace}")
        for d in state_dirs:  # the DEKs of a dropped keyspace protect nothing
            shutil.rmtree(d, ignore_errors=True)
    note = closing_note(out)
    out["closing_note"] = note
    path = bench_dir / "load.json"
    path.write_text(json.dumps(out, indent=2))
    return LoadBenchResult(run_dir=run_dir, json_path=path, data=out, closing_note=note)


def closing_note(out: dict[str, Any]) -> str:
    ps, ls, pr, lr = out["plain_send"], out["locust_send"], out["plain_read"], out["locust_read"]
    lines = [f"lab load vs a plain driver client, {out['params']['concurrency']} concurrent callers, same node, same run:",
             f"  send: Locust {ls['throughput']}/s vs plain {ps['throughput']}/s -> ratio {out['ratio_send']}",
             f"  read: Locust {lr['throughput']}/s vs plain {pr['throughput']}/s -> ratio {out['ratio_read']}",
             f"staircase (send_only, fixed rate, max {out['staircase']['max_rate']:.1f}/s):"]
    for st in out["staircase"]["steps"]:
        cpu = (st.get("loadgen_cpu") or {}).get("mean_percent_of_one_core")
        lines.append(f"  requested {st['requested_rate']:>8.1f}/s achieved {st['achieved_rate']:>8.1f}/s  "
                     f"p99 {st['corrected_us']['p99']} us (service {st['service_us']['p99']} us)  "
                     f"load generator CPU {cpu}% of one core")
    return "\n".join(lines)
