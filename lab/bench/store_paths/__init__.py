"""The store benchmark (``lab bench store``): each MessageStore path against its bare CQL floor, on
the same node in the same run. A benchmark, not a test: it measures and writes, it asserts no speed.

    params            BenchParams and the CLI's quick / full presets
    recording         one side of a comparison (Method -> MethodResult), alternating calls, the run's context
    seeded_rows       rows for the read comparisons, as the commit path writes them
    floors            send_floor and history_floor: each path's own statements, issued raw
    callback_floors   the driver's floors: the same statements (and the outbox append) chained by callbacks
    asyncio_floors    the send's driver floor as coroutines on an asyncio loop (the loop hand-off's price)
    driver_loops      the driver's I/O loops per request: callbacks or coroutines, libev or its asyncio reactor
    send_throughput   send_throughput
    history_page      history_latest_page
    history_cpu       history_latest_page_cpu: the page's client CPU against its blocking and driver floors
    grouped_vs_naive  grouped_vs_naive_<shape> and the naive baseline (naive_point_reads)
    bench_report      Comparison, StoreBenchReport (store.json) and the closing note
    paired_lines      the closing note's per-round lines: each paired ratio, its interval, the goal's verdict
    output            store.csv and store.png
    full_run          run_bench: the phases in order, on a scratch keyspace
    outboxes          ``--outboxes``: store.send with each outbox (local, Kafka), the hot window's cost per send
    outbox_primitives each commit-path step alone (outbox append, hot-window put) and the bare Redis round trip
    redis_cost        the hot window's cost per put (Redis INFO diffed, this process's CPU), one caller vs the callers
    profiling         ``--profile``: the store's hot paths under py-spy (flame graphs, top-frame tables)
    flamegraph        the flame graph (SVG) of py-spy's raw stacks, drawn by the lab

What each comparison measures and how: docs/bench-internals.md.
"""
from lab.bench.store_paths.grouped_vs_naive import naive_point_reads
from lab.bench.store_paths.params import BenchParams
from lab.bench.store_paths.bench_report import Comparison, StoreBenchReport
from lab.bench.store_paths.full_run import BenchResult, run_bench

__all__ = ["BenchParams", "BenchResult", "Comparison", "StoreBenchReport", "naive_point_reads", "run_bench"]
