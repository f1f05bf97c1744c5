"""Recording one side of a comparison, and driving the two sides fairly.

More: docs/bench-internals.md.
"""
from __future__ import annotations

import dataclasses
import random
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from lab.bench.store_paths.params import BenchParams
from lab.measure import LatencySummary, Timing, a_over_b, summarize_histogram, timed
from lab.measure.timing import MS_PER_SECOND, NS_PER_SECOND
from lab.measure.hdr import OpStats, encode, latencies_us
from lab.store import MessageStore, MessageType, SendRequest

Log = Callable[[str], None]
Requests = Mapping[str, Mapping[str, int]]  # table -> request kind -> count
PROGRESS_LINES = 4  # progress lines per alternating comparison


@dataclass(frozen=True, kw_only=True)
class MethodResult:
    """One side of a comparison, measured. The optional fields belong to some comparisons only."""

    name: str
    count: int
    ok: int
    errors_by_type: Mapping[str, int]
    warmup_discarded: int
    elapsed_seconds: float
    throughput_ops_per_s: float | None
    latency_us: LatencySummary
    requests: Requests
    requests_total: int
    requests_per_op: float | None
    histogram: str                               # the encoded HdrHistogram of the measured calls
    ack_only_throughput_ops_per_s: float | None = None   # send: before the head drain
    rows_per_op: int | None = None                        # history
    entries_per_op: int | None = None                     # grouped vs naive
    messages_per_s: float | None = None
    message_record_requests_per_op: float | None = None
    message_record_point_reads_per_op: float | None = None
    message_index_requests: int | None = None
    groups_per_op: int | None = None

    @property
    def errors(self) -> int:
        return self.count - self.ok

    def to_json(self) -> dict[str, Any]:
        optional = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                    if f.default is None and getattr(self, f.name) is not None}
        return {"count": self.count, "ok": self.ok, "errors": self.errors,
                "errors_by_type": dict(self.errors_by_type), "warmup_discarded": self.warmup_discarded,
                "elapsed_seconds": self.elapsed_seconds, "throughput_ops_per_s": self.throughput_ops_per_s,
                "latency_us": self.latency_us.to_json(), "requests": {t: dict(k) for t, k in self.requests.items()},
                "requests_total": self.requests_total, "requests_per_op": self.requests_per_op, **optional,
                "histogram": self.histogram}


def request_delta(before: Requests, after: Requests) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for table in set(before) | set(after):
        for kind in set(before.get(table, {})) | set(after.get(table, {})):
            n = after.get(table, {}).get(kind, 0) - before.get(table, {}).get(kind, 0)
            if n:
                out.setdefault(table, {})[kind] = n
    return out


class Method:
    """One side of a comparison while it runs. ``keep_samples``: each measured call's latency (µs) is
    also kept in call order (``samples_us``), for figures per round of calls (lab.measure.paired_ratio)."""

    def __init__(self, name: str, *, keep_samples: bool = False) -> None:
        self.name = name
        self.stats = OpStats()
        self.elapsed_ns = 0
        self.warmup = 0
        self.requests: dict[str, dict[str, int]] = {}
        self.samples_us: list[int] | None = [] if keep_samples else None

    def record(self, timing: Timing) -> None:
        """A failed call is a result: counted by its error type, its latency recorded."""
        service, _ = latencies_us(started_ns=timing.started_ns, ended_ns=timing.ended_ns)
        self.stats.record(service, error=timing.error)
        if self.samples_us is not None:
            self.samples_us.append(service)

    def add_requests(self, before: Requests, after: Requests) -> None:
        for table, kinds in request_delta(before, after).items():
            for kind, n in kinds.items():
                self.requests.setdefault(table, {})[kind] = self.requests.get(table, {}).get(kind, 0) + n

    def add_block(self, timings: list[Timing], *, before: Requests, after: Requests, elapsed_ns: int,
                  cpu_seconds: float) -> tuple[float | None, float | None]:
        """One measured block of calls: its requests, time and calls recorded; returns its throughput
        (calls/s that succeeded) and this process's CPU ms per call, the block's per-round figures."""
        self.add_requests(before, after)
        self.elapsed_ns += elapsed_ns
        for t in timings:
            self.record(t)
        return (a_over_b(sum(t.error is None for t in timings), elapsed_ns / NS_PER_SECOND),
                a_over_b(cpu_seconds * MS_PER_SECOND, len(timings)))

    def requests_of(self, table: str | None = None, kinds: Iterable[str] | None = None) -> int:
        kinds = set(kinds) if kinds is not None else None
        return sum(n for t, ks in self.requests.items() if table is None or t == table
                   for k, n in ks.items() if kinds is None or k in kinds)

    def per_op(self, n: int) -> float | None:
        return n / self.stats.count if self.stats.count else None

    def result(self, **extra: Any) -> MethodResult:
        count = self.stats.count
        elapsed = self.elapsed_ns / NS_PER_SECOND
        return MethodResult(
            name=self.name, count=count, ok=self.stats.ok, errors_by_type=dict(sorted(self.stats.errors.items())),
            warmup_discarded=self.warmup, elapsed_seconds=round(elapsed, 6),
            throughput_ops_per_s=round(self.stats.ok / elapsed, 2) if elapsed > 0 else None,
            latency_us=summarize_histogram(self.stats.service), requests=self.requests,
            requests_total=self.requests_of(),
            requests_per_op=round(self.requests_of() / count, 3) if count else None,
            histogram=encode(self.stats.service), **extra)


class BenchRun:
    """What the comparisons of one run share."""

    def __init__(self, store: MessageStore, params: BenchParams, pool: ThreadPoolExecutor | None, log: Log) -> None:
        self.store, self.params, self.pool, self.log = store, params, pool, log
        self.conn = store.connection
        self.rng = random.Random(params.seed)
        self.run_tag = uuid.uuid4().hex[:8]
        self._client_ids = iter(range(1 << 62))

    def snapshot(self) -> Requests:
        return self.conn.counter.snapshot()

    @property
    def create_timer(self) -> Callable[[float, Callable[[], None]], Any]:
        """The timer of the driver's event loop this run's connection runs on (its connection
        class's ``create_timer``, a callback_floors.CreateTimer): what a loop-paced floor starts
        its chains by."""
        return self.conn.cluster.connection_class.create_timer

    def client_id(self, prefix: str) -> str:
        return f"{prefix}-{self.run_tag}-{next(self._client_ids)}"

    def text_request(self, tenant: uuid.UUID, conversation: uuid.UUID, sender: uuid.UUID, body: bytes,
                     prefix: str) -> SendRequest:
        return SendRequest(tenant_id=tenant, conversation_id=conversation, sender_id=sender,
                           sender_device_id=sender, client_message_id=self.client_id(prefix), body=body,
                           message_type=MessageType.TEXT)


def body(n: int, i: int) -> bytes:
    """``n`` bytes of text body for message ``i``."""
    return (f"bench message {i} ".encode() * (n // 16 + 1))[:n]


def alternate(run: BenchRun, calls: Mapping[str, tuple[Method, Callable[[], int], int]], *, warmup: int,
              ops: int, progress: str) -> None:
    """Call the methods one after the other, order flipped every round; ``warmup`` rounds discarded.
    Each call returns how many items it produced; fewer than expected is an error
    (``IncompleteResult``). A method's elapsed time is the sum of its own calls (one caller)."""
    names = list(calls)
    for r in range(warmup + ops):
        for name in (names if r % 2 == 0 else names[::-1]):
            method, fn, expected = calls[name]
            before = run.snapshot()
            produced, timing = timed(fn, errors=True)
            if timing.error is None and produced != expected:
                timing = dataclasses.replace(timing, error="IncompleteResult")
            if r < warmup:
                method.warmup += 1
                continue
            method.add_requests(before, run.snapshot())
            method.elapsed_ns += timing.elapsed_ns
            method.record(timing)
        if (r + 1) % max(1, (warmup + ops) // PROGRESS_LINES) == 0:
            run.log(f"  {progress} {r + 1}/{warmup + ops}")
