"""The store benchmark of issue 3: each MessageStore path against its bare CQL floor, on the same
node in the same run. A benchmark, not a test: it measures and writes, it asserts no speed.

Comparisons (``results/<run-id>/bench/store.json``, ``store.csv``, ``store.png``):

``send_throughput``
    ``full_write_path`` = ``store.send`` (§5.1: allocate, seal, dedup LWT, message_record +
    message_index, outbox append (SQLite, fsync), COMMITTED, ack, conversation_head update) vs
    ``bare_lwt_insert`` = the write path's own ``INSERT INTO client_dedup ... IF NOT EXISTS``
    and nothing else. Concurrency: a thread pool of ``send_concurrency`` closed-loop callers
    (``store.send`` is synchronous; the bare insert uses the same pool and the synchronous
    ``Connection.execute`` so both sides pay the same client overhead). The two methods run in
    interleaved blocks in ABBA order (A B, B A, A B ...) after one discarded warm-up block
    each. A write-path block ends after ``store.drain()``: its throughput includes the
    asynchronous head updates it caused (sustainable, not ack-only; ack-only is reported too).

``history_latest_page``
    ``history`` = ``store.history(tenant, conversation)`` (latest page, ``history_limit``
    messages: conversation_head read + one bucket read + decrypt/decode) vs ``bare_select`` =
    one single-partition ``SELECT <same columns> ... ORDER BY conversation_seq DESC LIMIT n``
    on the same partition, rows fetched, nothing decoded. One caller (no queueing), the two
    alternating call by call (order flipped every pair), warm-up pairs discarded.

``grouped_vs_naive_<shape>`` for the two S-1 shapes (1 group x 500, 20 DMs x 5)
    ``grouped`` = ``store.batch_read`` with the body LRU cleared before each call (one request
    per (conversation, bucket) group and table, reaction summaries included) vs
    ``naive_point_reads`` = THE BASELINE THE DESIGN FORBIDS (§4.3): one point read of
    message_record per message_id. It exists only in this module, as :func:`naive_point_reads`.
    Both use the driver's async execution with the batch reader's concurrency
    (``lab.store.batch_read.DEFAULT_BATCH_CONCURRENCY`` requests in flight). The naive side reads no
    reaction summaries, so the comparison favours it. Alternating per call, warm-up discarded.

The read comparisons run on rows seeded as the commit path writes them (the store's sequence
allocator, record encoder and message_record/message_index statements; head set by the head
writer), then flushed to SSTables (``flush``), so seeding does not cost a second send benchmark.

Latencies are per call, in µs, from HdrHistograms (:mod:`lab.measure.hdr`). Request counts come from
the connection's request accounting (:mod:`lab.cluster.accounting`) over the measured calls only.
Every run creates its own keyspace (``bench_<hex>``) and drops it at the end.
"""
from __future__ import annotations

import csv
import dataclasses
import datetime as _dt
import json
import os
import random
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.store.batch_read import DEFAULT_BATCH_CONCURRENCY, BatchEntry
from lab.cluster.config import ClusterConfig
from lab.cluster.services import ServicesConfig
from lab.cluster.connection import Connection, connect
from lab.measure.hdr import OpStats, encode, latencies_us, percentiles_us
from lab.store.ids import seq_bucket, u128_to_blob
from lab.store.head import HeadUpdate
from lab.store.model import DedupState, MessageType, RetentionClass
from lab.store.records import MESSAGE_RECORD_COLUMNS, MESSAGE_RECORD_KEY, Message
from lab.results.runs import RESULTS_DIR, git_commit, git_dirty, machine, new_run_dir
from lab.store import MessageStore, SendAck, SendRequest

__all__ = ["BenchParams", "BenchResult", "naive_point_reads", "run_bench"]

BENCH_DIR = "bench"
JSON_FILE = "store.json"
CSV_FILE = "store.csv"
PNG_FILE = "store.png"
KEYSPACE_PREFIX = "bench"
SEED_CONCURRENCY = 64  # plain upserts in flight while seeding the read comparisons

Log = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class BenchParams:
    """What one run measures. ``preset(quick=...)`` gives the CLI's two sizes."""

    mode: str = "custom"
    # send_throughput
    send_ops: int = 2000            # measured calls per method
    send_block: int = 200           # calls per interleaved block
    send_warmup: int = 100          # calls per method in the discarded warm-up block
    send_concurrency: int = 8       # thread-pool callers
    send_conversations: int = 64    # sends spread round-robin over this many conversations / senders
    body_bytes: int = 200
    # history_latest_page
    history_messages: int = 80      # messages sent into the history conversation first
    history_limit: int = 50         # page size (the store's default)
    history_ops: int = 1000         # measured calls per method
    history_warmup: int = 50        # discarded calls per method
    # grouped_vs_naive (S-1 shapes)
    group_backlog: int = 500
    dm_count: int = 20
    dm_backlog: int = 5
    group_repeats: int = 30         # measured calls per method, group shape (naive = group_backlog point reads)
    group_warmup: int = 2           # discarded calls per method, group shape
    dm_repeats: int = 60            # measured calls per method, DM shape
    dm_warmup: int = 3              # discarded calls per method, DM shape
    batch_concurrency: int = DEFAULT_BATCH_CONCURRENCY
    flush: bool = True              # flush memtables after seeding, so reads hit SSTables
    seed: int = 0

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.type == "int" and f.name != "seed" and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{f.name} must be an int >= 1, got {value!r}")
        if self.send_ops % self.send_block:
            raise ValueError("send_ops must be a multiple of send_block")
        if self.history_messages < self.history_limit:
            raise ValueError("history_messages must be >= history_limit (a full latest page)")

    @classmethod
    def preset(cls, *, quick: bool) -> BenchParams:
        if not quick:
            return cls(mode="full")
        # sized for a shared 2-core machine: under a minute unless the machine is very busy
        return cls(mode="quick", send_ops=200, send_block=50, send_warmup=25, history_messages=60,
                   history_ops=80, history_warmup=10, group_repeats=3, group_warmup=1, dm_repeats=6, dm_warmup=1)

    @property
    def shapes(self) -> dict[str, dict[str, int]]:
        """S-1 shapes: name -> conversations, messages each, measured and warm-up calls."""
        return {f"group_1x{self.group_backlog}": {"conversations": 1, "messages": self.group_backlog,
                                                   "repeats": self.group_repeats, "warmup": self.group_warmup},
                f"dm_{self.dm_count}x{self.dm_backlog}": {"conversations": self.dm_count, "messages": self.dm_backlog,
                                                          "repeats": self.dm_repeats, "warmup": self.dm_warmup}}


@dataclass(frozen=True, kw_only=True)
class BenchResult:
    run_dir: Path
    json_path: Path
    csv_path: Path
    png_path: Path | None
    report: dict[str, Any]

    @property
    def closing_note(self) -> str:
        return self.report["closing_note"]


# ---- recording -----------------------------------------------------------------------------
Sample = tuple[int, int, str | None]  # (started_ns, ended_ns, error type name or None)


def _timed(fn: Callable[[], Any]) -> tuple[Sample, Any]:
    t0 = time.perf_counter_ns()
    try:
        out = fn()
        err = None
    except Exception as exc:  # a failed call is a result: counted by type, latency recorded
        out, err = None, type(exc).__name__
    return (t0, time.perf_counter_ns(), err), out


class _Method:
    """One side of a comparison: an HdrHistogram (lab.hdr.OpStats), own elapsed time, requests."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.stats = OpStats()
        self.elapsed_ns = 0
        self.warmup = 0
        self.requests: dict[str, dict[str, int]] = {}
        self.extra: dict[str, Any] = {}

    def record(self, sample: Sample) -> None:
        started, ended, error = sample
        service, _ = latencies_us(started_ns=started, ended_ns=ended)
        self.stats.service.record_value(service)
        if error is None:
            self.stats.ok += 1
        else:
            self.stats.errors[error] = self.stats.errors.get(error, 0) + 1

    def add_requests(self, before: dict, after: dict) -> None:
        for table, kinds in _delta(before, after).items():
            for kind, n in kinds.items():
                self.requests.setdefault(table, {})[kind] = self.requests.get(table, {}).get(kind, 0) + n

    def requests_of(self, table: str | None = None, kinds: Iterable[str] | None = None) -> int:
        kinds = set(kinds) if kinds is not None else None
        return sum(n for t, ks in self.requests.items() if table is None or t == table
                   for k, n in ks.items() if kinds is None or k in kinds)

    def to_json(self) -> dict[str, Any]:
        count = self.stats.count
        elapsed = self.elapsed_ns / 1e9
        return {"count": count, "ok": self.stats.ok, "errors": count - self.stats.ok,
                "errors_by_type": dict(sorted(self.stats.errors.items())), "warmup_discarded": self.warmup,
                "elapsed_seconds": round(elapsed, 6),
                "throughput_ops_per_s": round(self.stats.ok / elapsed, 2) if elapsed > 0 else None,
                "latency_us": percentiles_us(self.stats.service),
                "requests": self.requests, "requests_total": self.requests_of(),
                "requests_per_op": round(self.requests_of() / count, 3) if count else None,
                **self.extra, "histogram": encode(self.stats.service)}


def _delta(before: dict, after: dict) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for table in set(before) | set(after):
        for kind in set(before.get(table, {})) | set(after.get(table, {})):
            n = after.get(table, {}).get(kind, 0) - before.get(table, {}).get(kind, 0)
            if n:
                out.setdefault(table, {})[kind] = n
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


# ---- the naive baseline ----------------------------------------------------------------------
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


# ---- the run ---------------------------------------------------------------------------------
class _Run:
    def __init__(self, store: MessageStore, params: BenchParams, pool: ThreadPoolExecutor | None,
                 log: Log) -> None:
        self.store, self.params, self.pool, self.log = store, params, pool, log
        self.conn: Connection = store.connection
        self.rng = random.Random(params.seed)
        self.run_tag = uuid.uuid4().hex[:8]
        self._client_ids = iter(range(1 << 62))

    def snapshot(self) -> dict:
        return self.conn.counter.snapshot()

    def client_id(self, prefix: str) -> str:
        return f"{prefix}-{self.run_tag}-{next(self._client_ids)}"

    def text_request(self, tenant: uuid.UUID, conversation: uuid.UUID, sender: uuid.UUID, body: bytes,
                     prefix: str) -> SendRequest:
        return SendRequest(tenant_id=tenant, conversation_id=conversation, sender_id=sender,
                           sender_device_id=sender, client_message_id=self.client_id(prefix), body=body,
                           message_type=MessageType.TEXT)


def _body(n: int, i: int) -> bytes:
    return (f"bench message {i} ".encode() * (n // 16 + 1))[:n]


def bench_send(run: _Run) -> dict[str, Any]:
    p, store = run.params, run.store
    tenant = uuid.uuid4()
    conversations = [uuid.uuid4() for _ in range(p.send_conversations)]
    senders = [uuid.uuid4() for _ in range(p.send_conversations)]
    lwt = store.prepare_raw(
        "INSERT INTO {ks}.client_dedup (tenant_id, sender_id, client_message_id, message_id, conversation_seq, "
        "state, created_at) VALUES (?, ?, ?, ?, ?, ?, ?) IF NOT EXISTS")

    def full(i: int) -> None:
        k = i % p.send_conversations
        store.send(run.text_request(tenant, conversations[k], senders[k], _body(p.body_bytes, i), prefix="send"))

    def bare(i: int) -> None:
        row = run.conn.execute(lwt, (tenant, senders[i % p.send_conversations], run.client_id("lwt"),
                                     u128_to_blob(uuid.uuid4().int), i + 1, int(DedupState.RESERVED),
                                     time.time_ns() // 1_000_000)).one()
        if not row[0]:
            raise RuntimeError("bare LWT not applied")

    methods = {"full_write_path": (_Method("full_write_path"), full),
               "bare_lwt_insert": (_Method("bare_lwt_insert"), bare)}
    ack_ns = {"full_write_path": 0}
    counter = iter(range(1 << 62))

    def block(name: str, n: int, measured: bool) -> None:
        method, fn = methods[name]
        before = run.snapshot()
        t0 = time.perf_counter_ns()
        samples = list(run.pool.map(lambda i: _timed(lambda: fn(i))[0], [next(counter) for _ in range(n)]))
        t_ack = time.perf_counter_ns()
        if name == "full_write_path":
            store.drain()  # the head updates this block caused belong to this block
        t1 = time.perf_counter_ns()
        if not measured:
            method.warmup += n
            return
        method.add_requests(before, run.snapshot())
        method.elapsed_ns += t1 - t0
        if name in ack_ns:
            ack_ns[name] += t_ack - t0
        for s in samples:
            method.record(s)

    names = list(methods)
    for name in names:
        block(name, p.send_warmup, measured=False)
    blocks = p.send_ops // p.send_block
    for r in range(blocks):
        for name in (names if r % 2 == 0 else names[::-1]):
            block(name, p.send_block, measured=True)
        run.log(f"  send block {r + 1}/{blocks}")
    full_m = methods["full_write_path"][0]
    full_m.extra["ack_only_throughput_ops_per_s"] = (round(full_m.stats.ok / (ack_ns["full_write_path"] / 1e9), 2)
                                                     if ack_ns["full_write_path"] else None)
    out = {m.name: m.to_json() for m, _ in methods.values()}
    f, b = out["full_write_path"], out["bare_lwt_insert"]
    return {
        "description": "send throughput: store.send (full §5.1 path) vs the bare client_dedup INSERT ... IF NOT "
                       "EXISTS alone",
        "concurrency": f"thread pool of {p.send_concurrency} closed-loop callers (synchronous calls) for both",
        "order": f"warm-up block of {p.send_warmup} per method discarded, then {blocks} interleaved blocks of "
                 f"{p.send_block} per method in ABBA order; write-path blocks include store.drain()",
        "methods": out,
        "ratio": {"full_over_bare_throughput": _ratio(f["throughput_ops_per_s"], b["throughput_ops_per_s"]),
                  "bare_over_full_throughput": _ratio(b["throughput_ops_per_s"], f["throughput_ops_per_s"]),
                  "full_over_bare_p50_latency": _ratio(f["latency_us"]["p50"], b["latency_us"]["p50"]),
                  "full_over_bare_p99_latency": _ratio(f["latency_us"]["p99"], b["latency_us"]["p99"])},
    }


def _alternate(run: _Run, calls: dict[str, tuple[_Method, Callable[[], int], int]], *, warmup: int,
               ops: int, progress: str) -> None:
    """Call the methods one after the other, order flipped every round; ``warmup`` rounds discarded.
    Each call returns how many items it produced; fewer than expected is an error
    (``IncompleteResult``). A method's elapsed time is the sum of its own calls (one caller)."""
    names = list(calls)
    for r in range(warmup + ops):
        for name in (names if r % 2 == 0 else names[::-1]):
            method, fn, expected = calls[name]
            before = run.snapshot()
            sample, produced = _timed(fn)
            if sample[2] is None and produced != expected:
                sample = (sample[0], sample[1], "IncompleteResult")
            if r < warmup:
                method.warmup += 1
                continue
            method.add_requests(before, run.snapshot())
            method.elapsed_ns += sample[1] - sample[0]
            method.record(sample)
        if (r + 1) % max(1, (warmup + ops) // 4) == 0:
            run.log(f"  {progress} {r + 1}/{warmup + ops}")


def seed_conversation(run: _Run, tenant: uuid.UUID, conversation: uuid.UUID, n: int) -> list[SendAck]:
    """``n`` messages of one conversation, written as the commit path writes them (step 3):
    ids from the store's sequence allocator, rows sealed by the store's record encoder and
    upserted with the write path's own message_record + message_index statements (both through
    the store's seeding API, ``store.seeding``) under the default class's TTL.
    The dedup LWT, outbox and head steps are skipped: no read compared here touches them, and
    they would make seeding cost as much as the send benchmark. Returns ack-like ids."""
    p, store = run.params, run.store
    c = store.constants
    sender = uuid.uuid4()
    now_ms = time.time_ns() // 1_000_000
    ttl = store.retention.remaining_ttl_seconds(RetentionClass.DEFAULT, tenant, created_at_ms=now_ms,
                                                now_ms=now_ms)
    statements, acks = [], []
    for i in range(n):
        alloc = store.seeding.allocate(tenant, conversation)
        message = Message(tenant_id=tenant, conversation_id=conversation,
                          seq_bucket=seq_bucket(alloc.conversation_seq, c.message_seq_bucket_width),
                          conversation_seq=alloc.conversation_seq, message_id=alloc.message_id,
                          last_activity_id=alloc.last_activity_id, sender_id=sender, sender_device_id=sender,
                          client_message_id=run.client_id("seed"), message_type=MessageType.TEXT,
                          body=_body(p.body_bytes, i), created_at_ms=now_ms + i,
                          retention_class=RetentionClass.DEFAULT)
        statements += store.seeding.statements(message, ttl_seconds=ttl)
        acks.append(SendAck(message_id=alloc.message_id, conversation_seq=alloc.conversation_seq,
                            last_activity_id=alloc.last_activity_id, created_at_ms=now_ms + i))
    store.connection.execute_concurrent(statements, concurrency=SEED_CONCURRENCY)
    last = acks[-1]
    store.apply_head(HeadUpdate(tenant_id=tenant, conversation_id=conversation,
                                conversation_seq=last.conversation_seq, message_id=last.message_id,
                                last_activity_id=last.last_activity_id, sender_id=sender,
                                preview=_body(p.body_bytes, n - 1)))
    return acks


def seed_history(run: _Run) -> tuple[uuid.UUID, uuid.UUID, list[SendAck]]:
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    return tenant, conversation, seed_conversation(run, tenant, conversation, run.params.history_messages)


def bench_history(run: _Run, tenant: uuid.UUID, conversation: uuid.UUID, acks: list[SendAck]) -> dict[str, Any]:
    p, store = run.params, run.store
    high = max(a.conversation_seq for a in acks)
    bucket = seq_bucket(high, store.constants.message_seq_bucket_width)
    bare_stmt = store.prepare_raw(
        f"SELECT {', '.join(MESSAGE_RECORD_COLUMNS)} FROM {{ks}}.message_record WHERE tenant_id = ? AND "
        "conversation_id = ? AND seq_bucket = ? ORDER BY conversation_seq DESC LIMIT ?")
    expected = min(p.history_limit, sum(1 for a in acks if seq_bucket(a.conversation_seq,
                                                                         store.constants.message_seq_bucket_width)
                                        == bucket))
    history_m, bare_m = _Method("history"), _Method("bare_select")
    calls = {
        "history": (history_m, lambda: len(store.history(tenant, conversation, limit=p.history_limit).messages),
                    p.history_limit),
        "bare_select": (bare_m, lambda: len(list(run.conn.execute(bare_stmt, (tenant, conversation, bucket,
                                                                              p.history_limit)))), expected),
    }
    _alternate(run, calls, warmup=p.history_warmup, ops=p.history_ops, progress="history pairs")
    history_m.extra["rows_per_op"] = p.history_limit
    bare_m.extra["rows_per_op"] = expected
    out = {m.name: m.to_json() for m in (history_m, bare_m)}
    h, b = out["history"], out["bare_select"]
    return {
        "description": f"latest history page (store.history, limit {p.history_limit}: head read + bucket read + "
                       "decrypt/decode) vs a bare single-partition SELECT of the same columns and LIMIT",
        "concurrency": "one caller, synchronous calls (no queueing); throughput = calls / own summed latency",
        "order": f"alternating call by call, order flipped every pair; {p.history_warmup} warm-up pairs discarded",
        "methods": out,
        "ratio": {"history_over_bare_p50": _ratio(h["latency_us"]["p50"], b["latency_us"]["p50"]),
                  "history_over_bare_p99": _ratio(h["latency_us"]["p99"], b["latency_us"]["p99"]),
                  "bare_over_history_throughput": _ratio(b["throughput_ops_per_s"], h["throughput_ops_per_s"])},
    }


def seed_shapes(run: _Run) -> dict[str, tuple[uuid.UUID, list[BatchEntry]]]:
    """The S-1 shapes (see :func:`seed_conversation`): per shape a tenant and its batch entries,
    shuffled (a mailbox batch is not in seq order)."""
    out = {}
    for shape, spec in run.params.shapes.items():
        tenant = uuid.uuid4()
        entries = []
        for _ in range(spec["conversations"]):
            conversation = uuid.uuid4()
            entries += [BatchEntry(conversation_id=conversation, conversation_seq=a.conversation_seq,
                                   message_id=a.message_id)
                        for a in seed_conversation(run, tenant, conversation, spec["messages"])]
        run.rng.shuffle(entries)
        out[shape] = (tenant, entries)
    return out


def bench_grouped(run: _Run, shape: str, tenant: uuid.UUID, entries: list[BatchEntry]) -> dict[str, Any]:
    p, store = run.params, run.store
    spec = p.shapes[shape]
    width = store.constants.message_seq_bucket_width
    groups = len({(e.conversation_id, seq_bucket(e.conversation_seq, width)) for e in entries})
    grouped_m, naive_m = _Method("grouped"), _Method("naive_point_reads")
    batch_groups: list[int] = []

    def grouped() -> int:
        store.body_cache.clear()  # cold LRU: every entry comes from the table
        result = store.batch_read(tenant, entries)
        batch_groups.append(result.groups)
        return len(result.messages)

    def naive() -> int:
        return len(naive_point_reads(store, tenant, entries, concurrency=p.batch_concurrency))

    _alternate(run, {"grouped": (grouped_m, grouped, len(entries)), "naive_point_reads": (naive_m, naive, len(entries))},
               warmup=spec["warmup"], ops=spec["repeats"], progress=f"{shape} pairs")
    reads = ("point_read", "range_read", "in_read")
    for m in (grouped_m, naive_m):
        n = m.stats.count
        record = m.requests_of("message_record", reads)
        m.extra.update({"entries_per_op": len(entries), "messages_per_s":
                        round(m.stats.ok * len(entries) / (m.elapsed_ns / 1e9), 1) if m.elapsed_ns else None,
                        "message_record_requests_per_op": record / n if n else None,
                        "message_record_point_reads_per_op": m.requests_of("message_record", ("point_read",)) / n
                        if n else None,
                        "message_index_requests": m.requests_of("message_index")})
    grouped_m.extra["groups_per_op"] = max(batch_groups) if batch_groups else None
    out = {m.name: m.to_json() for m in (grouped_m, naive_m)}
    g, nv = out["grouped"], out["naive_point_reads"]
    return {
        "description": f"S-1 shape {shape}: {len(entries)} entries in {groups} (conversation, bucket) groups; "
                       "store.batch_read (cold LRU, summaries included) vs the naive baseline: one point read of "
                       "message_record per message_id (forbidden by §4.3; no summaries)",
        "shape": shape, "entries": len(entries), "groups": groups,
        "concurrency": f"driver async execution, {p.batch_concurrency} requests in flight, for both",
        "order": f"alternating per call, order flipped every pair; {spec['warmup']} warm-up pairs discarded",
        "methods": out,
        "ratio": {
            "naive_over_grouped_message_record_requests": _ratio(nv["message_record_requests_per_op"],
                                                                 g["message_record_requests_per_op"]),
            "naive_over_grouped_total_requests": _ratio(nv["requests_per_op"], g["requests_per_op"]),
            "naive_over_grouped_p50": _ratio(nv["latency_us"]["p50"], g["latency_us"]["p50"]),
            "naive_over_grouped_p99": _ratio(nv["latency_us"]["p99"], g["latency_us"]["p99"]),
        },
    }


# ---- environment, output -----------------------------------------------------------------------
def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def environment(conn: Connection, config: ClusterConfig) -> dict[str, Any]:
    return {"server": conn.server_kind(), "server_version": conn.server_version(),
            "nodes": len(conn.hosts()), "replication_factor": config.replication_factor,
            "machine": machine(), "git_commit": git_commit(), "git_dirty": git_dirty(),
            "loadavg_at_start": _loadavg(), "cluster": config.redacted(),
            "outbox": ServicesConfig().describe(),  # run_bench's store opens with the default services
            "client": "Python driver on the same machine as the node (client CPU is part of every figure)"}


def _fmt(x: Any, unit: str = "") -> str:
    if x is None:
        return "n/a"
    return f"{x:,.0f}{unit}" if isinstance(x, (int, float)) and abs(x) >= 100 else f"{x}{unit}"


def _n(m: dict[str, Any]) -> str:
    n = m["count"]
    return f"n={n} calls per side" + (" (p99 = max at this n)" if n < 100 else "")


def closing_note(report: dict[str, Any]) -> str:
    env, c = report["environment"], report["comparisons"]
    s = c["send_throughput"]
    f, b = s["methods"]["full_write_path"], s["methods"]["bare_lwt_insert"]
    h = c["history_latest_page"]
    hh, hb = h["methods"]["history"], h["methods"]["bare_select"]
    lines = [
        f"Store benchmark {report['run_id']} ({report['parameters']['mode']}): {env['server']} "
        f"{env['server_version']}, {env['nodes']} node(s), {env['machine']['cpus']} CPUs (load average "
        f"{env['loadavg_at_start']} -> {env.get('loadavg_at_end')}), commit {str(env['git_commit'])[:10]}"
        f"{' + uncommitted changes' if env['git_dirty'] else ''}.",
        f"- Send: full write path {_fmt(f['throughput_ops_per_s'])} sends/s vs bare LWT inserts "
        f"{_fmt(b['throughput_ops_per_s'])}/s -> {s['ratio']['full_over_bare_throughput']}x "
        f"(the bare LWT is {s['ratio']['bare_over_full_throughput']}x faster); ack p50/p99 "
        f"{_fmt(f['latency_us']['p50'])}/{_fmt(f['latency_us']['p99'])} µs vs "
        f"{_fmt(b['latency_us']['p50'])}/{_fmt(b['latency_us']['p99'])} µs "
        f"({f['requests_per_op']} vs {b['requests_per_op']} CQL requests per send; ack-only "
        f"{_fmt(f['ack_only_throughput_ops_per_s'])} sends/s before the head drain; {_n(f)}).",
        f"- Latest history page ({report['parameters']['history_limit']} messages): p50 "
        f"{_fmt(hh['latency_us']['p50'])} µs / p99 {_fmt(hh['latency_us']['p99'])} µs vs bare SELECT "
        f"{_fmt(hb['latency_us']['p50'])} / {_fmt(hb['latency_us']['p99'])} µs -> "
        f"{h['ratio']['history_over_bare_p50']}x at p50, {h['ratio']['history_over_bare_p99']}x at p99 "
        f"({hh['requests_per_op']} vs {hb['requests_per_op']} requests; {_n(hh)}).",
    ]
    for key, comp in c.items():
        if not key.startswith("grouped_vs_naive_"):
            continue
        g, n, r = comp["methods"]["grouped"], comp["methods"]["naive_point_reads"], comp["ratio"]
        lines.append(
            f"- Grouped vs naive, {comp['shape']} ({comp['entries']} entries, {comp['groups']} groups): "
            f"message_record requests {g['message_record_requests_per_op']:g} vs "
            f"{n['message_record_requests_per_op']:g} ({r['naive_over_grouped_message_record_requests']}x; all CQL "
            f"{g['requests_per_op']:g} vs {n['requests_per_op']:g} with the grouped side's summaries); p50 "
            f"{_fmt(g['latency_us']['p50'])} vs {_fmt(n['latency_us']['p50'])} µs "
            f"({r['naive_over_grouped_p50']}x), p99 {_fmt(g['latency_us']['p99'])} vs "
            f"{_fmt(n['latency_us']['p99'])} µs ({r['naive_over_grouped_p99']}x); {_n(g)}.")
    return "\n".join(lines)


CSV_COLUMNS = ("comparison", "method", "count", "ok", "errors", "warmup_discarded", "elapsed_seconds",
               "throughput_ops_per_s", "p50_us", "p90_us", "p99_us", "p999_us", "max_us", "mean_us",
               "requests_per_op", "message_record_requests_per_op")


def write_csv(path: Path, comparisons: dict[str, Any]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_COLUMNS)
        for key, comp in comparisons.items():
            for name, m in comp["methods"].items():
                lat = m["latency_us"]
                w.writerow([key, name, m["count"], m["ok"], m["errors"], m["warmup_discarded"], m["elapsed_seconds"],
                            m["throughput_ops_per_s"], lat["p50"], lat["p90"], lat["p99"], lat["p999"], lat["max"],
                            lat["mean"], m["requests_per_op"], m.get("message_record_requests_per_op", "")])


def write_chart(path: Path, report: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    comps = report["comparisons"]
    latency_keys = [k for k in comps if k != "send_throughput"]
    fig, axes = plt.subplots(1, 1 + len(latency_keys), figsize=(4.2 * (1 + len(latency_keys)), 4.2))
    s = comps["send_throughput"]
    names = list(s["methods"])
    values = [s["methods"][n]["throughput_ops_per_s"] or 0 for n in names]
    ax = axes[0]
    bars = ax.bar(names, values, color=["tab:blue", "tab:gray"])
    ax.bar_label(bars, fmt="%.0f")
    ax.set_title(f"send throughput (ops/s)\nfull/bare = {s['ratio']['full_over_bare_throughput']}")
    ax.tick_params(axis="x", labelsize=8)
    for ax, key in zip(axes[1:], latency_keys):
        comp = comps[key]
        names = list(comp["methods"])
        width = 0.38
        for j, pct in enumerate(("p50", "p99")):
            vals = [(comp["methods"][n]["latency_us"][pct] or 0) / 1000 for n in names]
            xs = [i + (j - 0.5) * width for i in range(len(names))]
            bars = ax.bar(xs, vals, width, label=pct, color=["tab:blue", "tab:orange"][j])
            ax.bar_label(bars, fmt="%.1f", fontsize=7)
        ax.set_xticks(range(len(names)), names, fontsize=8)
        ax.set_ylabel("latency per call (ms)")
        r = comp["ratio"]
        sub = (f"p50 x{r['history_over_bare_p50']}  p99 x{r['history_over_bare_p99']}" if key == "history_latest_page"
               else f"naive/grouped p50 x{r['naive_over_grouped_p50']}, reads x"
                    f"{r['naive_over_grouped_message_record_requests']}")
        ax.set_title(f"{key}\n{sub}", fontsize=9)
        ax.legend(fontsize=8)
    fig.suptitle(f"store benchmark {report['run_id']} ({report['parameters']['mode']})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def run_bench(config: ClusterConfig, params: BenchParams, *, results: Path = RESULTS_DIR,
              run_dir: Path | None = None, log: Log | None = None, chart: bool = True) -> BenchResult:
    """Run every comparison on a fresh keyspace (dropped at the end) and write
    ``<run_dir>/bench/store.json`` (+ ``store.csv``, ``store.png``)."""
    log = log or (lambda _msg: None)
    run_dir = run_dir or new_run_dir(Path(results))
    out_dir = run_dir / BENCH_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    keyspace = f"{KEYSPACE_PREFIX}_{uuid.uuid4().hex[:10]}"
    t_start = time.monotonic()
    started_at = _now()
    conn = connect(config)
    timings: dict[str, float] = {}
    try:
        env = environment(conn, config)
        with tempfile.TemporaryDirectory(prefix="lab-bench-state-") as state_dir, \
                ThreadPoolExecutor(params.send_concurrency, thread_name_prefix="bench-send") as send_pool:
            store = MessageStore.open(config.replace(keyspace=keyspace), state_dir=state_dir, connection=conn)
            try:
                t = time.monotonic()
                log(f"keyspace {keyspace}: creating the schema")
                store.create_schema()
                timings["schema_seconds"] = time.monotonic() - t
                log(f"send throughput: full write path vs bare LWT ({params.send_concurrency} threads)")
                t = time.monotonic()
                comparisons = {"send_throughput": bench_send(_Run(store, params, send_pool, log))}
                timings["send_seconds"] = time.monotonic() - t
                log("seeding the history conversation and the S-1 shapes (commit-path rows)")
                run = _Run(store, params, None, log)
                t = time.monotonic()
                history_seed = seed_history(run)
                shapes = seed_shapes(run)
                timings["seed_seconds"] = time.monotonic() - t
                flushed: Any = False
                if params.flush:
                    log("flushing memtables")
                    t = time.monotonic()
                    flushed = _flush(config, conn, keyspace)
                    timings["flush_seconds"] = time.monotonic() - t
                log("latest history page vs bare SELECT")
                t = time.monotonic()
                comparisons["history_latest_page"] = bench_history(run, *history_seed)
                timings["history_seconds"] = time.monotonic() - t
                for shape, (tenant, entries) in shapes.items():
                    log(f"grouped vs naive point reads: {shape}")
                    t = time.monotonic()
                    comparisons[f"grouped_vs_naive_{shape}"] = bench_grouped(run, shape, tenant, entries)
                    timings[f"grouped_{shape}_seconds"] = time.monotonic() - t
                alerts = store.alerts.snapshot()
            finally:
                store.close()
                t = time.monotonic()
                conn.execute(f"DROP KEYSPACE IF EXISTS {keyspace}")
                timings["drop_seconds"] = time.monotonic() - t
        env["loadavg_at_end"] = _loadavg()
    finally:
        conn.close()
    report = {
        "kind": "store-bench", "run_id": run_dir.name, "started_at": started_at, "finished_at": _now(),
        "wall_seconds": round(time.monotonic() - t_start, 2), "keyspace": keyspace, "keyspace_dropped": True,
        "environment": env,
        "parameters": {**dataclasses.asdict(params), "shapes": params.shapes,
                       "flushed_before_reads": flushed},
        "timings_seconds": {k: round(v, 2) for k, v in timings.items()},
        "latency_unit": "µs (HdrHistogram, 3 significant digits; lab.hdr)",
        "store_alerts": alerts,
        "comparisons": comparisons,
    }
    report["closing_note"] = closing_note(report)
    json_path, csv_path, png_path = out_dir / JSON_FILE, out_dir / CSV_FILE, out_dir / PNG_FILE
    json_path.write_text(json.dumps(report, indent=2, default=str) + "\n")
    write_csv(csv_path, comparisons)
    if chart:
        write_chart(png_path, report)
    return BenchResult(run_dir=run_dir, json_path=json_path, csv_path=csv_path,
                       png_path=png_path if chart else None, report=report)


def _flush(config: ClusterConfig, conn: Connection, keyspace: str) -> Any:
    """Memtables to SSTables before the reads (through the admin adapter); a failure is recorded,
    not fatal: the reads then come partly from memtables, which the report says."""
    from lab.cluster.admin import admin_for
    from lab.errors import LabError

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
