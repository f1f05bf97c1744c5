"""`lab bench load`: is the load generator what limits a measurement? And the staircase.

More: docs/bench-internals.md.
"""
from __future__ import annotations

import random
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from lab.bench.load_generator_report import (
    FIXED_RATE_FRACTION,
    STAIRCASE_FRACTIONS,
    LoadBenchParams,
    LoadBenchReport,
    LoadBenchResult,
    OperationCosts,
    Staircase,
    ThroughputRun,
)
from lab.cluster.config import ClusterConfig
from lab.cluster.connection import connect
from lab.cluster.services import ServicesConfig
from lab.load.plan import DRIVER_MODES, SEED_SHAPES, KeyRange, LoadPlan, load_profile, message_templates
from lab.load.runner import LoadOptions, LoadResult, run_load
from lab.load.worker_seed import seed_worker
from lab.measure import client_gc, now_ns, summarize_histogram
from lab.measure.hdr import LatencyRecorder, OpStats, merge_stats
from lab.measure.timing import NS_PER_SECOND
from lab.project import RESULTS_DIR
from lab.results.environment import environment
from lab.results.jsonio import write_json
from lab.results.run_folders import new_run_dir
from lab.results.scratch import scratch_keyspace
from lab.store import MessageStore

BENCH_DIR = "bench"
JSON_FILE = "load.json"
KEYSPACE_PREFIX = "benchload"
CHAT_PROFILE = "chat"  # the profile whose operations get their loader CPU per call


def _plain(*, threads: int, seconds: float, warmup: float, call: Callable[[Any, random.Random], None],
           store: Any, rate: float | None = None) -> ThroughputRun:
    """``threads`` callers of ``call(store, rng)``, measured after ``warmup``: closed loop, or with
    ``rate`` open loop at that total rate (call k of the schedule due at k / rate; each thread
    takes every ``threads``-th due time, as the Locust users share a fixed rate)."""
    import psutil

    recs = [LatencyRecorder(fixed_rate=False) for _ in range(threads)]
    begin = now_ns()
    start = begin + int(warmup * NS_PER_SECOND)
    stop = start + int(seconds * NS_PER_SECOND)
    me = psutil.Process()

    def worker(i: int) -> None:
        rng = random.Random(i)
        k = i
        while (t := now_ns()) < stop:
            if rate is not None:
                due = begin + int(k * NS_PER_SECOND / rate)
                k += threads
                if due >= stop:
                    break
                if due > t:
                    time.sleep((due - t) / NS_PER_SECOND)
                    t = now_ns()
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
    return ThroughputRun(calls=stats.count, errors=sum(stats.errors.values()),
                         throughput=round(stats.count / seconds, 2), service_us=summarize_histogram(stats.service),
                         client_cpu_percent_of_one_core=round(100 * cpu / seconds, 1), measured_seconds=seconds,
                         requested_rate=rate)


def locust_figures(result: LoadResult) -> ThroughputRun:
    """A Locust run's side of a comparison: calls, rate, service time, loader CPU (per call)."""
    s = result.summary
    return ThroughputRun(calls=s.all_operations.count, errors=s.all_operations.errors, throughput=s.achieved_rate,
                         service_us=s.all_operations.service_us, loadgen_cpu=s.loadgen_cpu,
                         measured_seconds=s.measured_seconds, requested_rate=s.requested_rate,
                         audit_ok=s.audit.ok if s.audit is not None else None, load_dir=str(result.load_dir))


def common_options(params: LoadBenchParams, run_dir: Path) -> dict[str, Any]:
    """What every Locust run of the bench shares: its seconds, processes, seed and driver."""
    return dict(duration_seconds=params.seconds, warmup_seconds=params.warmup_seconds, processes=params.processes,
                seed_size=params.seed_size, run_dir=run_dir, **DRIVER_MODES[params.driver])


def chat_options(params: LoadBenchParams, run_dir: Path, *, load_subdir: str = "load-chat") -> LoadOptions:
    """The chat profile's run (closed loop, ``concurrency`` users), whose loader CPU per call the
    bench reports per operation and ``--profile`` profiles."""
    return LoadOptions(profile=CHAT_PROFILE, users=params.concurrency, load_subdir=load_subdir,
                       **common_options(params, run_dir))


def _run(config: ClusterConfig, options: LoadOptions, state_dirs: list[Path], services: Any) -> LoadResult:
    result = run_load(config, options, services=services)
    if result.state_root is not None:
        state_dirs.append(result.state_root)
    return result


def run_load_bench(config: ClusterConfig, params: LoadBenchParams, *, results: Path = RESULTS_DIR,
                   log: Callable[[str], None] = lambda _m: None, services: Any = None) -> LoadBenchResult:
    """``services`` (lab.cluster.services, default ServicesConfig()): every store of both sides, and
    both sides' ``client_gc`` (the plain client's in this process, the Locust workers' in theirs)."""

    services = services if services is not None else ServicesConfig()

    state_dirs: list[Path] = []
    try:
        with client_gc.restored(), connect(config) as conn, \
                scratch_keyspace(conn, KEYSPACE_PREFIX, create=False) as keyspace:
            run_dir = new_run_dir(Path(results))  # after the cluster answered: a failed connect leaves no folder
            bench_dir = run_dir / BENCH_DIR
            bench_dir.mkdir()
            env = environment(config, conn, services=services.describe_run()).to_json()
            report = _measure(config.replace(keyspace=keyspace), params, run_dir, state_dirs, log,
                              keyspace=keyspace, env=env, services=services)
    finally:
        for d in state_dirs:  # the DEKs of a dropped keyspace protect nothing
            shutil.rmtree(d, ignore_errors=True)
    path = write_json(bench_dir / JSON_FILE, report)
    return LoadBenchResult(run_dir=run_dir, json_path=path, report=report)


def _measure(config: ClusterConfig, params: LoadBenchParams, run_dir: Path, state_dirs: list[Path],
             log: Callable[[str], None], *, keyspace: str, env: Mapping[str, Any], services: Any) -> LoadBenchReport:
    """The four maximum runs (ABBA), the fixed-rate send and read pairs, the chat profile's operations
    and the staircase, in the scratch keyspace of ``config``."""

    common = common_options(params, run_dir)
    # the plain client's own key range, seeded like a Locust worker's
    plain_plan = LoadPlan(run_id=f"{run_dir.name}-plain", load_dir=(run_dir / "plain").resolve(),
                          state_root=(Path(config.lab_home) / "load-state" / f"{run_dir.name}-plain").resolve(),
                          profile="read_only", users=params.concurrency, seed_size=params.seed_size,
                          node_id_base=90)
    state_dirs.append(plain_plan.state_root)
    with MessageStore.open(config, state_dir=plain_plan.state_root / "setup", node_id=89,
                           **services.store_options()) as s:
        s.create_schema()
    log("seeding the plain client's conversations")
    seed_worker(config, plain_plan, services=services)
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
        # the store's default page size, as the Locust history readers use
        page = store.history(keys.tenant_id, conv, direction="older", anchor=None)
        for _ in range(rng.choice((0, 0, 1, 2))):  # the readers' session: a few older pages
            if not page.has_more or page.next_anchor is None:
                break
            page = store.history(keys.tenant_id, conv, direction="older", anchor=page.next_anchor)

    with MessageStore.open(config, state_dir=plain_plan.state_dir(), node_id=plain_plan.node_id,
                           **services.store_options()) as store:
        client_gc.settle(services.client_gc)  # the plain side's set-up is done, as a Locust worker's is
        log(f"plain send: {params.concurrency} threads, {params.seconds:g} s")
        plain_send = _plain(threads=params.concurrency, seconds=params.seconds, warmup=params.warmup_seconds,
                            call=send, store=store)
        log("Locust send")
        locust_send = locust_figures(_run(config, LoadOptions(
            profile="send_only", users=params.concurrency, load_subdir="load-send-max", **common), state_dirs, services))
        log("Locust read")
        locust_read = locust_figures(_run(config, LoadOptions(
            profile="read_only", users=params.concurrency, load_subdir="load-read-max", **common), state_dirs, services))
        log(f"plain read: {params.concurrency} threads, {params.seconds:g} s")
        plain_read = _plain(threads=params.concurrency, seconds=params.seconds, warmup=params.warmup_seconds,
                            call=read, store=store)
        # like with like: both sides at one fixed rate the slower side sustains, same users / threads
        fixed = round(FIXED_RATE_FRACTION * min(plain_send.throughput, locust_send.throughput), 1) or 1.0
        log(f"plain send at {fixed:g}/s: {params.concurrency} threads, {params.seconds:g} s")
        plain_fixed = _plain(threads=params.concurrency, seconds=params.seconds, warmup=params.warmup_seconds,
                             call=send, store=store, rate=fixed)
        # the read pair at one rate too: the maxima differ, and CPU per call falls as the rate rises
        fixed_read = round(FIXED_RATE_FRACTION * min(plain_read.throughput, locust_read.throughput), 1) or 1.0
        log(f"plain read at {fixed_read:g}/s: {params.concurrency} threads, {params.seconds:g} s")
        plain_read_fixed = _plain(threads=params.concurrency, seconds=params.seconds, warmup=params.warmup_seconds,
                                  call=read, store=store, rate=fixed_read)
    log(f"Locust send at {fixed:g}/s")
    locust_fixed = locust_figures(_run(config, LoadOptions(
        profile="send_only", rate=fixed, users=params.concurrency, load_subdir="load-send-fixed", **common),
        state_dirs, services))
    log(f"Locust read at {fixed_read:g}/s")
    locust_read_fixed = locust_figures(_run(config, LoadOptions(
        profile="read_only", rate=fixed_read, users=params.concurrency, load_subdir="load-read-fixed", **common),
        state_dirs, services))
    log(f"Locust {CHAT_PROFILE} profile: loader CPU per operation")
    chat = _run(config, chat_options(params, run_dir), state_dirs, services)
    costs = OperationCosts(profile=CHAT_PROFILE, load_dir=str(chat.load_dir), run=locust_figures(chat),
                           operations=chat.summary.operation_cpu)
    max_send = max(plain_send.throughput, locust_send.throughput)
    log(f"staircase at {STAIRCASE_FRACTIONS} of {max_send:.1f} sends/s")
    stair = _run(config, LoadOptions(profile="send_only", staircase_max=max_send,
                                     step_seconds=params.step_seconds, load_subdir="load-staircase",
                                     **{**common, "warmup_seconds": 0.0}), state_dirs, services)
    staircase = Staircase(max_rate=max_send, load_dir=str(stair.load_dir),
                          audit_ok=stair.summary.audit.ok if stair.summary.audit is not None else None,
                          steps=stair.summary.steps, stopped_at_step=stair.summary.staircase_stopped_at_step)
    return LoadBenchReport(run_id=run_dir.name, params=params, keyspace=keyspace, environment=env,
                           plain_send=plain_send, locust_send=locust_send, locust_read=locust_read,
                           plain_read=plain_read, staircase=staircase, plain_send_fixed=plain_fixed,
                           locust_send_fixed=locust_fixed, plain_read_fixed=plain_read_fixed,
                           locust_read_fixed=locust_read_fixed, chat=costs)
