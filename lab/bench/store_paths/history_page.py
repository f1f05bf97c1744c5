"""``history_latest_page``: ``store.history`` (latest page: conversation_head read + one bucket
read + decrypt/decode) against its own two statements issued raw together (``history_floor``,
lab.bench.store_paths.floors) and against one bare single-partition SELECT of the same columns and LIMIT.

One caller (no queueing); the three take turns call by call, the order reversed every round,
warm-up rounds discarded; throughput = calls / own summed latency.
"""
from __future__ import annotations

import uuid

from lab.bench.store_paths.floors import history_floor
from lab.bench.store_paths.recording import BenchRun, Method, alternate
from lab.bench.store_paths.bench_report import RATIO_DIGITS, Comparison
from lab.measure import a_over_b
from lab.store import PARTITION_ROW_COLUMNS, SendAck, seq_bucket


def bench_history(run: BenchRun, tenant: uuid.UUID, conversation: uuid.UUID, acks: list[SendAck]) -> Comparison:
    p, store = run.params, run.store
    width = store.constants.message_seq_bucket_width
    bucket = seq_bucket(max(a.conversation_seq for a in acks), width)
    bare_stmt = store.prepare_raw(
        f"SELECT {', '.join(PARTITION_ROW_COLUMNS)} FROM {{ks}}.message_record WHERE tenant_id = ? AND "
        "conversation_id = ? AND seq_bucket = ? ORDER BY conversation_seq DESC LIMIT ?")
    expected = min(p.history_limit, sum(1 for a in acks if seq_bucket(a.conversation_seq, width) == bucket))
    history_m, floor_m, bare_m = Method("history"), Method("history_floor"), Method("bare_select")
    calls = {
        "history": (history_m, lambda: len(store.history(tenant, conversation, limit=p.history_limit).messages),
                    p.history_limit),
        "history_floor": (floor_m, history_floor(run, tenant, conversation, bucket, p.history_limit), expected),
        "bare_select": (bare_m, lambda: len(list(run.conn.execute(bare_stmt, (tenant, conversation, bucket,
                                                                              p.history_limit)))), expected),
    }
    alternate(run, calls, warmup=p.history_warmup, ops=p.history_ops, progress="history rounds")
    h, fl = history_m.result(rows_per_op=p.history_limit), floor_m.result(rows_per_op=expected)
    b = bare_m.result(rows_per_op=expected)
    return Comparison(
        description=f"latest history page (store.history, limit {p.history_limit}: head read + bucket read + "
                    "decrypt/decode) vs its own two statements issued raw together (history_floor: rows fetched, "
                    "not decoded) vs a bare single-partition SELECT of the same columns and LIMIT",
        concurrency="one caller, synchronous calls (no queueing); throughput = calls / own summed latency",
        order=f"in turn call by call, the order reversed every round; {p.history_warmup} warm-up rounds discarded",
        methods={h.name: h, fl.name: fl, b.name: b},
        ratio={"history_over_floor_p50": a_over_b(h.latency_us.p50, fl.latency_us.p50, digits=RATIO_DIGITS),
               "history_over_floor_p99": a_over_b(h.latency_us.p99, fl.latency_us.p99, digits=RATIO_DIGITS),
               "history_over_bare_p50": a_over_b(h.latency_us.p50, b.latency_us.p50, digits=RATIO_DIGITS),
               "history_over_bare_p99": a_over_b(h.latency_us.p99, b.latency_us.p99, digits=RATIO_DIGITS),
               "bare_over_history_throughput": a_over_b(b.throughput_ops_per_s, h.throughput_ops_per_s,
                                                        digits=RATIO_DIGITS)})
