"""The outbox benchmark: ``store.send`` with each outbox, and the hot window's price per send,
on the same node in the same run (``lab bench store --outboxes``). Measures, asserts nothing.

Methods (each a MessageStore on one fresh keyspace, its own state folder):

``local``          the SQLite outbox (``synchronous=FULL``: an fsync per append)
``kafka``          the Kafka-protocol outbox on the broker of the services settings (the
                   embedded Kafka 4.x by default): idempotent producer, acks=all, ack after
                   the broker acknowledged, a topic of this run's own
``kafka_archiver`` archiver mode (no message_record write on the commit path), no hot window
``kafka_hot``      archiver mode with the Redis hot window: the commit path writes the message
                   to Redis instead; ``kafka_hot - kafka_archiver`` is what the hot window costs
                   per send (the last two run only when the services settings reach Redis)

Each method runs a discarded warm-up block, then interleaved blocks of ``block`` sends from a
pool of ``concurrency`` closed-loop callers, the method order rotated every round (so no
method always runs first on a warm cache). Throughput = acked sends / the method's own block
time; ack latency = per send, µs, HdrHistogram (:mod:`lab.measure.hdr`). Then one caller
alternates the methods send by send (``serial_ops`` each, order flipped every round): the
latency without queueing, where a difference between two methods is the price of what
differs (``kafka_hot - kafka_archiver``: the hot window's write per send). Beside the sends,
the two primitives alone: ``outbox.append`` of each outbox and ``HotWindow.put``, one caller.
"""
from __future__ import annotations

import dataclasses
import json
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.cluster.config import ClusterConfig
from lab.cluster.connection import connect
from lab.cluster.services import ServicesConfig
from lab.measure.hdr import OpStats, encode, latencies_us, percentiles_us
from lab.results.runs import RESULTS_DIR, new_run_dir
from lab.store import MessageStore, SendRequest

__all__ = ["OutboxBenchParams", "OutboxBenchResult", "run_outbox_bench"]

JSON_FILE = "outbox.json"
KEYSPACE_PREFIX = "bench_outbox"
Log = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class OutboxBenchParams:
    mode: str = "custom"
    ops: int = 2000          # measured sends per method
    block: int = 200         # sends per interleaved block
    warmup: int = 100        # discarded sends per method
    concurrency: int = 8     # closed-loop callers
    conversations: int = 64
    body_bytes: int = 200
    primitive_ops: int = 500  # outbox.append / HotWindow.put alone, one caller
    serial_ops: int = 500     # sends per method by one caller, alternating the methods send by send

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.type == "int" and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{f.name} must be an int >= 1, got {value!r}")
        if self.ops % self.block:
            raise ValueError("ops must be a multiple of block")

    @classmethod
    def preset(cls, *, quick: bool) -> OutboxBenchParams:
        if not quick:
            return cls(mode="full")
        return cls(mode="quick", ops=300, block=50, warmup=25, primitive_ops=200, serial_ops=100)


@dataclass(frozen=True, kw_only=True)
class OutboxBenchResult:
    json_path: Path
    report: dict[str, Any]

    @property
    def closing_note(self) -> str:
        return self.report["closing_note"]


class _Method:
    def __init__(self, name: str, store: MessageStore) -> None:
        self.name, self.store = name, store
        self.stats = OpStats()
        self.serial = OpStats()
        self.elapsed_ns = 0

    def record(self, started_ns: int, ended_ns: int, error: str | None) -> None:
        self.stats.service.record_value(latencies_us(started_ns=started_ns, ended_ns=ended_ns)[0])
        if error is None:
            self.stats.ok += 1
        else:
            self.stats.errors[error] = self.stats.errors.get(error, 0) + 1

    def to_json(self) -> dict[str, Any]:
        elapsed = self.elapsed_ns / 1e9
        return {"count": self.stats.count, "ok": self.stats.ok, "errors": dict(self.stats.errors),
                "elapsed_seconds": round(elapsed, 6),
                "throughput_ops_per_s": round(self.stats.ok / elapsed, 2) if elapsed > 0 else None,
                "ack_latency_us": percentiles_us(self.stats.service), "histogram": encode(self.stats.service),
                "serial_ack_latency_us": percentiles_us(self.serial.service),
                "serial_errors": dict(self.serial.errors), "serial_histogram": encode(self.serial.service)}


def _timed_call(fn: Callable[[], Any]) -> tuple[int, int, str | None]:
    t0 = time.perf_counter_ns()
    try:
        fn()
        err = None
    except Exception as exc:  # a failed send is a result: counted by type
        err = type(exc).__name__
    return t0, time.perf_counter_ns(), err


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def _sends(methods: list[_Method], params: OutboxBenchParams, pool: ThreadPoolExecutor, log: Log) -> None:
    tenant = uuid.uuid4()
    conversations = [uuid.uuid4() for _ in range(params.conversations)]
    body = (b"outbox bench " * (params.body_bytes // 13 + 1))[:params.body_bytes]
    counter = iter(range(1 << 62))

    def send(store: MessageStore, i: int) -> None:
        k = i % params.conversations
        store.send(SendRequest(tenant_id=tenant, conversation_id=conversations[k], sender_id=conversations[k],
                               sender_device_id=conversations[k], client_message_id=f"ob-{i}", body=body))

    def block(method: _Method, n: int, measured: bool) -> None:
        t0 = time.perf_counter_ns()
        samples = list(pool.map(lambda i: _timed_call(lambda: send(method.store, i)), [next(counter) for _ in range(n)]))
        method.store.drain()
        if measured:
            method.elapsed_ns += time.perf_counter_ns() - t0
            for s in samples:
                method.record(*s)

    for m in methods:
        block(m, params.warmup, measured=False)
    rounds = params.ops // params.block
    for r in range(rounds):
        for m in methods[r % len(methods):] + methods[:r % len(methods)]:
            block(m, params.block, measured=True)
        log(f"  outbox send round {r + 1}/{rounds}")
    log(f"  one caller, methods alternating send by send ({params.serial_ops} each)")
    for r in range(params.serial_ops):
        for m in (methods if r % 2 == 0 else methods[::-1]):
            i = next(counter)
            t0, t1, err = _timed_call(lambda: send(m.store, i))
            m.serial.service.record_value(latencies_us(started_ns=t0, ended_ns=t1)[0])
            if err is None:
                m.serial.ok += 1
            else:
                m.serial.errors[err] = m.serial.errors.get(err, 0) + 1
    for m in methods:
        m.store.drain()


def _primitive(n: int, fn: Callable[[int], Any]) -> dict[str, Any]:
    stats = OpStats()
    for i in range(n):
        t0 = time.perf_counter_ns()
        fn(i)
        stats.service.record_value(latencies_us(started_ns=t0, ended_ns=time.perf_counter_ns())[0])
    return {"count": n, "latency_us": percentiles_us(stats.service), "histogram": encode(stats.service)}


def _primitives(services: ServicesConfig, kafka: ServicesConfig, keyspace: str, state_dir: Path,
                params: OutboxBenchParams, with_hot: bool) -> dict[str, Any]:
    """The outbox append and the hot-window write alone, one caller, on instances of their own."""
    from lab.store.hot_window import HotWindow
    from lab.store.outbox import OutboxRecord, open_outbox

    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    pad = {"columns": {"pad": "x" * params.body_bytes}}
    out: dict[str, Any] = {}
    for name, options in (("local", {"path": state_dir / "primitive-outbox.sqlite"}),
                          ("kafka", {"services": kafka, "topic": f"{kafka.kafka_topic}.primitive"})):
        with open_outbox(name, **options) as box:
            out[f"{name}_append"] = _primitive(params.primitive_ops, lambda i: box.append(OutboxRecord(
                tenant_id=tenant, conversation_id=conversation, conversation_seq=i + 1, kind="message", payload=pad)))
    if with_hot:
        hot = HotWindow.open(services, namespace=keyspace, window_days=7)
        now = time.time_ns() // 1_000_000
        try:
            out["hot_window_put"] = _primitive(params.primitive_ops, lambda i: hot.put({
                "tenant_id": tenant, "conversation_id": conversation, "conversation_seq": i + 1, "created_at": now,
                "payload_or_ciphertext": b"x" * params.body_bytes, "message_id": (i + 1).to_bytes(16, "big")}))
            for key in hot.client.scan_iter(f"{keyspace}:*"):
                hot.client.delete(key)
        finally:
            hot.close()
    return out


def closing_note(report: dict[str, Any]) -> str:
    m = report["methods"]
    lines = ["send with each outbox (same node, same run, "
             f"{report['parameters']['concurrency']} callers, {report['parameters']['ops']} sends each):"]
    for name, r in m.items():
        lat = r["ack_latency_us"]
        serial = r["serial_ack_latency_us"]
        lines.append(f"  {name:<15} {r['throughput_ops_per_s']} sends/s  ack p50 {lat['p50']} µs  p99 {lat['p99']} µs"
                     f"  errors {sum(r['errors'].values())};  one caller: p50 {serial['p50']} µs  p99 {serial['p99']} µs")
    ratios = report["ratios"]
    lines.append(f"  kafka / local throughput: {ratios['kafka_over_local_throughput']}  "
                 f"p50 ack latency: {ratios['kafka_over_local_p50']} (one caller: {ratios['kafka_over_local_serial_p50']})")
    if "hot_window_per_send_us" in report:
        h = report["hot_window_per_send_us"]
        lines.append(f"  hot window per send (kafka_hot - kafka_archiver, one caller): {h['serial_p50']:+} µs at p50, "
                     f"{h['serial_mean']:+} µs mean; under {report['parameters']['concurrency']} callers "
                     f"{h['p50']:+} µs at p50; HotWindow.put alone p50 "
                     f"{report['primitives']['hot_window_put']['latency_us']['p50']} µs")
    p = report["primitives"]
    lines.append(f"  append alone, one caller: local p50 {p['local_append']['latency_us']['p50']} µs, "
                 f"kafka p50 {p['kafka_append']['latency_us']['p50']} µs")
    return "\n".join(lines)


def run_outbox_bench(config: ClusterConfig, services: ServicesConfig, params: OutboxBenchParams, *,
                     results: Path = RESULTS_DIR, run_dir: Path | None = None,
                     log: Log | None = None) -> OutboxBenchResult:
    """Every method on a fresh keyspace and topic (the keyspace is dropped at the end);
    writes ``<run_dir>/bench/outbox.json``."""
    from lab.store.hot_window import HotWindow

    log = log or (lambda _msg: None)
    run_dir = run_dir or new_run_dir(Path(results))
    out_dir = run_dir / "bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    keyspace = f"{KEYSPACE_PREFIX}_{uuid.uuid4().hex[:10]}"
    kafka = services.replace(outbox="kafka", kafka_topic=f"bench.{keyspace}")
    try:
        HotWindow.open(services, namespace=keyspace, window_days=1).close()
        with_hot = True
    except Exception:  # no Redis reachable: the hot-window methods are left out, and the report says so
        with_hot = False
    started = time.monotonic()
    conn = connect(config)
    stores: list[MessageStore] = []
    try:
        with tempfile.TemporaryDirectory(prefix="lab-bench-outbox-") as tmp, \
                ThreadPoolExecutor(params.concurrency, thread_name_prefix="bench-outbox") as pool:
            cfg = config.replace(keyspace=keyspace)

            def store(name: str, **kw: Any) -> _Method:
                s = MessageStore.open(cfg, state_dir=Path(tmp) / name, connection=conn, **kw)
                stores.append(s)
                return _Method(name, s)

            methods = [store("local", services=services.replace(outbox="local"))]
            methods[0].store.create_schema()
            methods.append(store("kafka", services=kafka))
            if with_hot:
                methods.append(store("kafka_archiver", services=kafka, archiver_mode=True))
                methods.append(store("kafka_hot", services=kafka.replace(hot_window="redis"), archiver_mode=True))
            log(f"keyspace {keyspace}: {', '.join(m.name for m in methods)}; {params.concurrency} callers")
            _sends(methods, params, pool, log)
            by_name = {m.name: m for m in methods}
            primitives = _primitives(services, kafka, keyspace, Path(tmp), params, with_hot)
    finally:
        for s in stores:
            s.close()
        conn.execute(f"DROP KEYSPACE IF EXISTS {keyspace}")
        conn.close()
    report: dict[str, Any] = {
        "kind": "outbox-bench", "run_id": run_dir.name, "keyspace": keyspace, "topic": kafka.kafka_topic,
        "wall_seconds": round(time.monotonic() - started, 2), "parameters": dataclasses.asdict(params),
        "environment": {"cluster": config.redacted(), "services": {n: s.describe() for n, s in (
            ("local", services.replace(outbox="local")), ("kafka", kafka))}, "hot_window_measured": with_hot},
        "methods": {m.name: m.to_json() for m in methods}, "primitives": primitives,
    }
    m = report["methods"]
    report["ratios"] = {
        "kafka_over_local_throughput": _ratio(m["kafka"]["throughput_ops_per_s"], m["local"]["throughput_ops_per_s"]),
        "local_over_kafka_throughput": _ratio(m["local"]["throughput_ops_per_s"], m["kafka"]["throughput_ops_per_s"]),
        "kafka_over_local_p50": _ratio(m["kafka"]["ack_latency_us"]["p50"], m["local"]["ack_latency_us"]["p50"]),
        "kafka_over_local_p99": _ratio(m["kafka"]["ack_latency_us"]["p99"], m["local"]["ack_latency_us"]["p99"]),
        "kafka_over_local_serial_p50": _ratio(m["kafka"]["serial_ack_latency_us"]["p50"],
                                              m["local"]["serial_ack_latency_us"]["p50"]),
    }
    if with_hot:
        hot, base = by_name["kafka_hot"].stats.service, by_name["kafka_archiver"].stats.service
        shot, sbase = by_name["kafka_hot"].serial.service, by_name["kafka_archiver"].serial.service
        report["hot_window_per_send_us"] = {
            "serial_p50": shot.get_value_at_percentile(50) - sbase.get_value_at_percentile(50),
            "serial_mean": round(shot.get_mean_value() - sbase.get_mean_value(), 1),
            "p50": hot.get_value_at_percentile(50) - base.get_value_at_percentile(50),
            "p99": hot.get_value_at_percentile(99) - base.get_value_at_percentile(99),
            "mean": round(hot.get_mean_value() - base.get_mean_value(), 1)}
    report["closing_note"] = closing_note(report)
    path = out_dir / JSON_FILE
    path.write_text(json.dumps(report, indent=2, default=str) + "\n")
    return OutboxBenchResult(json_path=path, report=report)
