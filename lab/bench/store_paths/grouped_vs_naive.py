"""``grouped_vs_naive_<shape>``: ``store.batch_read`` against THE BASELINE THE DESIGN FORBIDS, and
against its own statements fetched raw.

More: docs/bench-internals.md.
"""
from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from lab.bench.store_paths.recording import BenchRun, Method, MethodResult, alternate
from lab.bench.store_paths.bench_report import RATIO_DIGITS, Comparison
from lab.measure import a_over_b
from lab.measure.timing import NS_PER_SECOND
from lab.store import (BatchEntry, DEFAULT_BATCH_CONCURRENCY, MESSAGE_RECORD_COLUMNS, MESSAGE_RECORD_KEY, MessageStore,
                       seq_bucket)

READ_KINDS = ("point_read", "range_read", "in_read")


def naive_point_reads(store: MessageStore, tenant_id: uuid.UUID, entries: Sequence[BatchEntry], *,
                      concurrency: int = DEFAULT_BATCH_CONCURRENCY) -> dict[int, Any]:
    """BASELINE ONLY, forbidden in the store (§4.3): one point read of message_record per
    message_id, by its full primary key, ``concurrency`` in flight (driver async execution);
    each row decoded as the store would. Returns the decoded messages by message_id."""
    stmt = store.prepare_raw(f"SELECT {', '.join(MESSAGE_RECORD_COLUMNS)} FROM {{ks}}.message_record WHERE "
                             "tenant_id = ? AND conversation_id = ? AND seq_bucket = ? AND conversation_seq = ?",
                             key_columns=MESSAGE_RECORD_KEY)
    width = store.constants.message_seq_bucket_width
    items = [(stmt, (tenant_id, e.conversation_id, seq_bucket(e.conversation_seq, width), e.conversation_seq))
             for e in entries]
    out: dict[int, Any] = {}
    for entry, rows in zip(entries, store.connection.execute_concurrent(items, concurrency=concurrency)):
        row = rows.one()
        if row is not None:
            message = store.decode_record(row)
            if message.message_id == entry.message_id:
                out[entry.message_id] = message
    return out


def bench_grouped(run: BenchRun, shape: str, tenant: uuid.UUID, entries: list[BatchEntry]) -> Comparison:
    p, store = run.params, run.store
    spec = p.shapes[shape]
    width = store.constants.message_seq_bucket_width
    groups = len({(e.conversation_id, seq_bucket(e.conversation_seq, width)) for e in entries})
    grouped_m, naive_m, raw_m = Method("grouped"), Method("naive_point_reads"), Method("raw_fetch")
    batch_groups: list[int] = []
    raw_statements = store.baseline_statements().batch_read(tenant, entries)  # what batch_read issues, cold

    def grouped() -> int:
        store.body_cache.clear()  # cold LRU: every entry comes from the table
        result = store.batch_read(tenant, entries)
        batch_groups.append(result.groups)
        return len(result.messages)

    def naive() -> int:
        return len(naive_point_reads(store, tenant, entries, concurrency=p.batch_concurrency))

    def raw() -> int:
        """The grouped read's own statements, rows fetched, nothing decoded or joined."""
        results = store.connection.execute_concurrent(raw_statements, concurrency=p.batch_concurrency)
        fetched = [len(list(r)) for r in results]
        return sum(fetched[::2])  # records and summaries alternate: the records' rows

    alternate(run, {"grouped": (grouped_m, grouped, len(entries)), "naive_point_reads": (naive_m, naive, len(entries)),
                    "raw_fetch": (raw_m, raw, len(entries))},
              warmup=spec["warmup"], ops=spec["repeats"], progress=f"{shape} rounds")

    def result(m: Method, **extra: Any) -> MethodResult:
        return m.result(
            entries_per_op=len(entries),
            messages_per_s=round(m.stats.ok * len(entries) / (m.elapsed_ns / NS_PER_SECOND), 1) if m.elapsed_ns else None,
            message_record_requests_per_op=m.per_op(m.requests_of("message_record", READ_KINDS)),
            message_record_point_reads_per_op=m.per_op(m.requests_of("message_record", ("point_read",))),
            message_index_requests=m.requests_of("message_index"), **extra)

    g = result(grouped_m, groups_per_op=max(batch_groups) if batch_groups else None)
    nv = result(naive_m)
    rw = result(raw_m)
    return Comparison(
        description=f"S-1 shape {shape}: {len(entries)} entries in {groups} (conversation, bucket) groups; "
                    "store.batch_read (cold LRU, summaries included) vs the naive baseline: one point read of "
                    "message_record per message_id (forbidden by §4.3; no summaries), and vs raw_fetch: the grouped "
                    "read's own statements (records and summaries), rows fetched, not decoded or joined",
        shape=shape, entries=len(entries), groups=groups,
        concurrency=f"driver async execution, {p.batch_concurrency} requests in flight, for all three",
        order=f"in turn call by call, order reversed every round; {spec['warmup']} warm-up rounds discarded",
        methods={g.name: g, nv.name: nv, rw.name: rw},
        ratio={"naive_over_grouped_message_record_requests": a_over_b(
                   nv.message_record_requests_per_op, g.message_record_requests_per_op, digits=RATIO_DIGITS),
               "naive_over_grouped_total_requests": a_over_b(nv.requests_per_op, g.requests_per_op,
                                                             digits=RATIO_DIGITS),
               "naive_over_grouped_p50": a_over_b(nv.latency_us.p50, g.latency_us.p50, digits=RATIO_DIGITS),
               "naive_over_grouped_p99": a_over_b(nv.latency_us.p99, g.latency_us.p99, digits=RATIO_DIGITS),
               "grouped_over_raw_fetch_p50": a_over_b(g.latency_us.p50, rw.latency_us.p50, digits=RATIO_DIGITS),
               "grouped_over_raw_fetch_p99": a_over_b(g.latency_us.p99, rw.latency_us.p99, digits=RATIO_DIGITS)})
