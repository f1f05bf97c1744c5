"""The store benchmark: each MessageStore path against its bare CQL floor, on the same
node in the same run. A benchmark, not a test: it measures and writes, it asserts no speed.

Comparisons (``results/<run-id>/bench/store.json``, ``store.csv``, ``store.png``):

``send_throughput``
    ``send`` = ``store.send`` (§5.1: allocate, seal, dedup LWT, message_record +
    message_index, outbox append (SQLite, fsync), COMMITTED, ack, conversation_head update) vs
    ``send_floor`` = the same statements issued raw (lab.bench.store_paths.floors: dedup LWT, record +
    index together, COMMITTED, head write; values built before the run) vs ``bare_lwt_insert`` =
    the write path's own ``INSERT INTO client_dedup ... IF NOT EXISTS`` and nothing else.
    Concurrency: a thread pool of ``send_concurrency`` closed-loop callers (``store.send`` is
    synchronous; the raw sides use the same pool and the synchronous ``Connection.execute`` so
    all pay the same client overhead). The methods run in interleaved blocks, the order reversed
    every round (A B C, C B A, ...), after one discarded warm-up block each; the send over each
    floor is also reported per round (the median of the rounds' ratios, their range and interval:
    ``paired_rounds``), the figure to quote. A write-path block
    ends after ``store.drain()``: its throughput includes the asynchronous head updates it caused
    (sustainable, not ack-only; ack-only is reported too).

``history_latest_page``
    ``history`` = ``store.history(tenant, conversation)`` (latest page, ``history_limit``
    messages: conversation_head read + one bucket read + decrypt/decode) vs ``history_floor`` =
    those two statements issued raw together, rows fetched, nothing decoded, vs ``bare_select`` =
    one single-partition ``SELECT <same columns> ... ORDER BY conversation_seq DESC LIMIT n``
    on the same partition, rows fetched, nothing decoded. One caller (no queueing), the three
    in turn call by call (order reversed every round), warm-up rounds discarded; the page's p50 over
    each other side's is also reported per round of ``history_round_calls`` calls per side (the
    median of the rounds' ratios, their range and interval: ``paired_rounds``), the figure to quote.

``grouped_vs_naive_<shape>`` for the two S-1 shapes (1 group x 500, 20 DMs x 5)
    ``grouped`` = ``store.batch_read`` with the body LRU cleared before each call (one request
    per (conversation, bucket) group and table, reaction summaries included) vs
    ``naive_point_reads`` = THE BASELINE THE DESIGN FORBIDS (§4.3): one point read of
    message_record per message_id. It exists only in this package, as :func:`naive_point_reads`.
    Both use the driver's async execution with the batch reader's concurrency
    (``lab.store.read.batch.DEFAULT_BATCH_CONCURRENCY`` requests in flight). The naive side reads no
    reaction summaries, so the comparison favours it. Alternating per call, warm-up discarded.

The read comparisons run on rows seeded as the commit path writes them (the store's seeding
API: sequence allocator, record encoder and message_record/message_index statements; head set
last), then flushed to SSTables (``flush``), so seeding does not cost a second send benchmark.

Latencies are per call, in µs, from HdrHistograms (:mod:`lab.measure.hdr`). Request counts come from
the connection's request accounting (:mod:`lab.cluster.accounting`) over the measured calls only.
Every run creates its own keyspace (``bench_<hex>``, :mod:`lab.results.scratch`) and drops it at the end.

    params            BenchParams and the CLI's quick / full presets
    recording         one side of a comparison (Method -> MethodResult), alternating calls, the run's context
    seeded_rows       rows for the read comparisons, as the commit path writes them
    floors            send_floor and history_floor: each path's own statements, issued raw
    send_throughput   send_throughput
    history_page      history_latest_page
    grouped_vs_naive  grouped_vs_naive_<shape> and the naive baseline (naive_point_reads)
    bench_report      Comparison, StoreBenchReport (store.json) and the closing note
    output            store.csv and store.png
    full_run          run_bench: the phases in order, on a scratch keyspace
    outboxes          ``--outboxes``: store.send with each outbox (local, Kafka), the hot window's cost per send
    outbox_primitives each commit-path step alone (outbox append, hot-window put) and the bare Redis round trip
    redis_cost        the hot window's cost per put (Redis INFO diffed, this process's CPU), one caller vs the callers
    profiling         ``--profile``: the store's hot paths under py-spy (flame graphs, top-frame tables)
    flamegraph        the flame graph (SVG) of py-spy's raw stacks, drawn by the lab
"""
from lab.bench.store_paths.grouped_vs_naive import naive_point_reads
from lab.bench.store_paths.params import BenchParams
from lab.bench.store_paths.bench_report import Comparison, StoreBenchReport
from lab.bench.store_paths.full_run import BenchResult, run_bench

__all__ = ["BenchParams", "BenchResult", "Comparison", "StoreBenchReport", "naive_point_reads", "run_bench"]
