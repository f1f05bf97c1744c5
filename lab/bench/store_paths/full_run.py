"""``run_bench``: every comparison on a fresh keyspace (dropped at the end), then the files.

Order: schema; send throughput; seeding of the read comparisons; flush (memtables to SSTables,
so the reads hit disk); latest history page (latency, then client CPU); grouped vs naive per S-1
shape; the driver's I/O loops (lab.bench.store_paths.driver_loops). Each phase's wall time is recorded (``timings_seconds``), and the load average before and after.
"""
from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.bench.store_paths.bench_report import Comparison, StoreBenchReport
from lab.bench.store_paths.driver_loops import probe_driver_loops
from lab.bench.store_paths.grouped_vs_naive import bench_grouped
from lab.bench.store_paths.history_cpu import bench_history_cpu
from lab.bench.store_paths.history_page import bench_history
from lab.bench.store_paths.output import write_chart, write_csv
from lab.bench.store_paths.params import BenchParams
from lab.bench.store_paths.recording import BenchRun, Log
from lab.bench.store_paths.seeded_rows import seed_history, seed_shapes
from lab.bench.store_paths.send_throughput import bench_send
from lab.cluster.admin import admin_for
from lab.cluster.config import ClusterConfig
from lab.cluster.connection import Connection, connect
from lab.cluster.services import ServicesConfig
from lab.errors import LabError
from lab.measure import Stopwatch, client_gc, utc_now_iso
from lab.project import RESULTS_DIR
from lab.results.environment import environment, loadavg
from lab.results.jsonio import write_json
from lab.results.run_folders import new_run_dir
from lab.results.scratch import scratch_keyspace
from lab.store import MessageStore

BENCH_DIR = "bench"
JSON_FILE = "store.json"
CSV_FILE = "store.csv"
PNG_FILE = "store.png"
KEYSPACE_PREFIX = "bench"
CLIENT_NOTE = "Python driver on the same machine as the node (client CPU is part of every figure)"


@dataclass(frozen=True, kw_only=True)
class BenchResult:
    run_dir: Path
    json_path: Path
    csv_path: Path
    png_path: Path | None
    report: StoreBenchReport

    @property
    def closing_note(self) -> str:
        return self.report.closing_note


@contextlib.contextmanager
def _phase(timings: dict[str, float], name: str) -> Iterator[None]:
    with Stopwatch() as watch:
        yield
    timings[name] = round(watch.seconds(), 2)


def _flush(config: ClusterConfig, conn: Connection, keyspace: str) -> bool | str:
    """Memtables to SSTables before the reads (through the admin adapter); a failure is recorded,
    not fatal: the reads then come partly from memtables, which the report says."""

    admin = admin_for(config, conn)
    try:
        admin.flush(keyspace)
        return True
    except (LabError, OSError) as exc:
        return f"failed: {type(exc).__name__}: {exc}"
    finally:
        close = getattr(admin, "close", None)
        if close is not None:
            close()


def _measure(store: MessageStore, config: ClusterConfig, conn: Connection, keyspace: str, params: BenchParams,
             pool: ThreadPoolExecutor, log: Log, timings: dict[str, float],
             gc_mode: str) -> tuple[dict[str, Comparison], bool | str, dict[str, Any]]:
    with _phase(timings, "schema_seconds"):
        log(f"keyspace {keyspace}: creating the schema")
        store.create_schema()
    client_gc.settle(gc_mode)  # each measured phase starts after a set-up (lab.measure.client_gc)
    with _phase(timings, "send_seconds"):
        log(f"send throughput: full write path vs bare LWT ({params.send_concurrency} threads)")
        comparisons = {"send_throughput": bench_send(BenchRun(store, params, pool, log))}
    run = BenchRun(store, params, pool, log)
    with _phase(timings, "seed_seconds"):
        log("seeding the history conversation and the S-1 shapes (commit-path rows)")
        history_seed = seed_history(run)
        shapes = seed_shapes(run)
    flushed: bool | str = False
    if params.flush:
        with _phase(timings, "flush_seconds"):
            log("flushing memtables")
            flushed = _flush(config, conn, keyspace)
    client_gc.settle(gc_mode)
    with _phase(timings, "history_seconds"):
        log("latest history page vs bare SELECT")
        comparisons["history_latest_page"] = bench_history(run, *history_seed)
    client_gc.settle(gc_mode)
    with _phase(timings, "history_cpu_seconds"):
        log(f"latest history page, client CPU: store vs its blocking and driver floors ({params.send_concurrency} "
            "in flight)")
        comparisons["history_latest_page_cpu"] = bench_history_cpu(run, *history_seed)
    for shape, (tenant, entries) in shapes.items():
        with _phase(timings, f"grouped_{shape}_seconds"):
            log(f"grouped vs naive point reads: {shape}")
            comparisons[f"grouped_vs_naive_{shape}"] = bench_grouped(run, shape, tenant, entries)
    return comparisons, flushed, store.alerts.snapshot()


def _driver_loops(config: ClusterConfig, params: BenchParams, log: Log, timings: dict[str, float],
                  gc_mode: str) -> dict[str, Any]:
    client_gc.settle(gc_mode)
    with _phase(timings, "driver_loops_seconds"):
        log("driver loops: callbacks or coroutines, on libev and on the driver's asyncio reactor")
        return probe_driver_loops(config, requests=params.loop_probe_requests, rounds=params.loop_probe_rounds,
                                  in_flight=params.send_concurrency)


def run_bench(config: ClusterConfig, params: BenchParams, *, results: Path = RESULTS_DIR,
              run_dir: Path | None = None, log: Log | None = None, chart: bool = True,
              gc_mode: str = client_gc.DEFAULT_CLIENT_GC) -> BenchResult:
    """Run every comparison on a fresh keyspace (dropped at the end) and write
    ``<run_dir>/bench/store.json`` (+ ``store.csv``, ``store.png``). ``gc_mode``: this process's
    ``client_gc`` (lab.measure.client_gc), applied after each set-up and recorded."""
    log = log or (lambda _msg: None)
    run_dir = run_dir or new_run_dir(Path(results))
    out_dir = run_dir / BENCH_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    wall = Stopwatch()
    started_at = utc_now_iso()
    timings: dict[str, float] = {}
    with client_gc.restored(), connect(config) as conn:  # the caller's GC as it was, after
        # the benchmark's store opens with the default services (the local outbox)
        env = environment(config, conn, client=CLIENT_NOTE, outbox=ServicesConfig().describe(),
                          client_gc=gc_mode).to_json()
        drop = Stopwatch()
        with scratch_keyspace(conn, KEYSPACE_PREFIX, create=False) as keyspace, \
                tempfile.TemporaryDirectory(prefix="lab-bench-state-") as state_dir, \
                ThreadPoolExecutor(params.send_concurrency, thread_name_prefix="bench-send") as pool, \
                MessageStore.open(config.replace(keyspace=keyspace), state_dir=state_dir, connection=conn) as store:
            comparisons, flushed, alerts = _measure(store, config, conn, keyspace, params, pool, log, timings,
                                                      gc_mode)
            drop.restart()
        timings["drop_seconds"] = round(drop.seconds(), 2)  # closing the store and dropping the keyspace
        loops = _driver_loops(config, params, log, timings, gc_mode)
        env["loadavg_at_end"] = loadavg()
    report = StoreBenchReport(run_id=run_dir.name, started_at=started_at, finished_at=utc_now_iso(),
                              wall_seconds=round(wall.seconds(), 2), keyspace=keyspace, keyspace_dropped=True,
                              environment=env, params=params, flushed_before_reads=flushed, timings_seconds=timings,
                              store_alerts=alerts, comparisons=comparisons, driver_loops=loops)
    json_path, csv_path, png_path = out_dir / JSON_FILE, out_dir / CSV_FILE, out_dir / PNG_FILE
    write_json(json_path, report)
    write_csv(csv_path, comparisons)
    if chart:
        write_chart(png_path, report)
    return BenchResult(run_dir=run_dir, json_path=json_path, csv_path=csv_path,
                       png_path=png_path if chart else None, report=report)
