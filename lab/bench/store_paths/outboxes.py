"""The outbox comparison: ``store.send`` with each outbox, and the hot window's price per send,
on the same node in the same run (``lab bench store --outboxes``). Measures, asserts nothing.

More: docs/bench-internals.md.
"""
from __future__ import annotations

import dataclasses
import tempfile
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.bench.store_paths.bench_report import RATIO_DIGITS
from lab.bench.store_paths.outbox_primitives import outbox_primitives
from lab.bench.store_paths.recording import Log, Method, MethodResult
from lab.bench.store_paths.redis_cost import HotWindowCost, PhaseCost
from lab.cluster.config import ClusterConfig
from lab.cluster.connection import connect
from lab.cluster.services import ServicesConfig
from lab.measure import Stopwatch, a_over_b, client_gc, now_ns, timed
from lab.project import RESULTS_DIR
from lab.results import units
from lab.results.environment import environment, loadavg
from lab.results.jsonio import write_json
from lab.results.run_folders import new_run_dir
from lab.results.scratch import scratch_keyspace
from lab.store import HotWindow, MessageStore, SendRequest

__all__ = ["OutboxBenchParams", "OutboxBenchReport", "OutboxBenchResult", "run_outbox_bench"]

BENCH_DIR = "bench"
JSON_FILE = "outbox.json"
KEYSPACE_PREFIX = "bench_outbox"
HOT_WINDOW_SCALING_GOAL = 2.0  # the hot window's cost per send under concurrency over one caller's, at most


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
class OutboxMethodResult:
    """One outbox: sends under ``concurrency`` callers, and by one caller alternating."""

    sends: MethodResult
    serial: MethodResult

    def to_json(self) -> dict[str, Any]:
        s, one = self.sends, self.serial
        return {"count": s.count, "ok": s.ok, "errors": dict(s.errors_by_type), "elapsed_seconds": s.elapsed_seconds,
                "throughput_ops_per_s": s.throughput_ops_per_s, "ack_latency_us": s.latency_us.to_json(),
                "histogram": s.histogram, "serial_ack_latency_us": one.latency_us.to_json(),
                "serial_errors": dict(one.errors_by_type), "serial_histogram": one.histogram}


@dataclass(frozen=True, kw_only=True)
class OutboxBenchReport:
    run_id: str
    keyspace: str
    topic: str
    wall_seconds: float
    params: OutboxBenchParams
    environment: Mapping[str, Any]
    methods: Mapping[str, OutboxMethodResult]
    primitives: Mapping[str, MethodResult]
    hot_window_in_send_us: Mapping[str, float] | None = None  # mean µs in HotWindow.put per send of kafka_hot
    redis_costs: Mapping[str, PhaseCost] | None = None  # each Redis primitive's cost (lab.bench.store_paths.redis_cost)
    loadavg_after_primitives: list[float] | None = None

    @property
    def ratios(self) -> dict[str, float | None]:
        k, loc = self.methods["kafka"], self.methods["local"]
        return {
            "kafka_over_local_throughput": a_over_b(k.sends.throughput_ops_per_s, loc.sends.throughput_ops_per_s,
                                                    digits=RATIO_DIGITS),
            "local_over_kafka_throughput": a_over_b(loc.sends.throughput_ops_per_s, k.sends.throughput_ops_per_s,
                                                    digits=RATIO_DIGITS),
            "kafka_over_local_p50": a_over_b(k.sends.latency_us.p50, loc.sends.latency_us.p50, digits=RATIO_DIGITS),
            "kafka_over_local_p99": a_over_b(k.sends.latency_us.p99, loc.sends.latency_us.p99, digits=RATIO_DIGITS),
            "kafka_over_local_serial_p50": a_over_b(k.serial.latency_us.p50, loc.serial.latency_us.p50,
                                                    digits=RATIO_DIGITS)}

    @property
    def hot_window_per_send_us(self) -> dict[str, float] | None:
        """``kafka_hot - kafka_archiver`` at p50 / p99 / mean, under load and by one caller."""
        if "kafka_hot" not in self.methods:
            return None
        hot, base = self.methods["kafka_hot"], self.methods["kafka_archiver"]
        return {"serial_p50": hot.serial.latency_us.p50 - base.serial.latency_us.p50,
                "serial_mean": round(hot.serial.latency_us.mean - base.serial.latency_us.mean, 1),
                "p50": hot.sends.latency_us.p50 - base.sends.latency_us.p50,
                "p99": hot.sends.latency_us.p99 - base.sends.latency_us.p99,
                "mean": round(hot.sends.latency_us.mean - base.sends.latency_us.mean, 1)}

    @property
    def hot_window_scaling(self) -> dict[str, float | None] | None:
        """What the hot window costs per send under ``concurrency`` callers over what it costs one
        caller (the goal: within 2x), at the send (p50 and mean of ``kafka_hot -
        kafka_archiver``) and for ``HotWindow.put`` alone (p50 with ``concurrency`` concurrent
        putters over one putter). A per-send ratio is None when either difference is not positive:
        the two methods' latencies differ by less than this run's noise, and a ratio of a negative
        difference means nothing."""
        h = self.hot_window_per_send_us
        if h is None:
            return None
        one, many = self.primitives.get("hot_window_put"), self.primitives.get("hot_window_put_concurrent")
        inside = self.hot_window_in_send_us or {}
        hot, base = self.methods["kafka_hot"], self.methods["kafka_archiver"]
        rest = {k: hot_mean - inside.get(k, 0) for k, hot_mean in (("callers", hot.sends.latency_us.mean),
                                                                   ("one_caller", hot.serial.latency_us.mean))}
        return {"per_send_p50": _cost_ratio(h["p50"], h["serial_p50"]),
                "per_send_mean": _cost_ratio(h["mean"], h["serial_mean"]),
                "in_send_mean": _cost_ratio(inside.get("callers", 0), inside.get("one_caller", 0)),
                "put_p50": _p50_ratio(many, one),
                # the control: a bare Redis round trip (PING) under the callers over one caller's
                "ping_p50": _p50_ratio(self.primitives.get("redis_ping_concurrent"), self.primitives.get("redis_ping")),
                # the same ratio for what the kafka_hot send does besides the put (its mean latency less
                # its mean time in the put), and for kafka_archiver's whole send: how much this machine
                # inflates every step under the callers (GIL, CPU), beside the put's own in_send_mean
                "rest_of_send_mean": _cost_ratio(rest["callers"], rest["one_caller"]),
                "archiver_send_mean": _cost_ratio(base.sends.latency_us.mean, base.serial.latency_us.mean)}

    @property
    def hot_window_cost(self) -> HotWindowCost | None:
        """The put's cost per put, callers over one caller, beside the PING control's and the latency ratios."""
        c, scaling = self.redis_costs or {}, self.hot_window_scaling or {}
        names = ("hot_window_put", "hot_window_put_concurrent", "redis_ping", "redis_ping_concurrent")
        if not all(n in c for n in names):
            return None
        return HotWindowCost(concurrency=self.params.concurrency, limit=HOT_WINDOW_SCALING_GOAL, put_one=c[names[0]],
                             put_callers=c[names[1]], ping_one=c[names[2]], ping_callers=c[names[3]],
                             put_p50_ratio=scaling.get("put_p50"), ping_p50_ratio=scaling.get("ping_p50"),
                             loadavg=self.loadavg_after_primitives)

    @property
    def closing_note(self) -> str:
        p = self.params
        lines = [f"send with each outbox (same node, same run, {p.concurrency} callers, {p.ops} sends each):"]
        for name, r in self.methods.items():
            lat, serial = r.sends.latency_us, r.serial.latency_us
            lines.append(f"  {name:<15} {r.sends.throughput_ops_per_s} sends/s  ack p50 {lat.p50} µs  p99 "
                         f"{units.percentile_ms(lat, 'p99', 'µs')}  errors {r.sends.errors};  one caller: p50 "
                         f"{serial.p50} µs  p99 {units.percentile_ms(serial, 'p99', 'µs')}")
        ratios = self.ratios
        lines.append(f"  kafka / local throughput: {ratios['kafka_over_local_throughput']}  "
                     f"p50 ack latency: {ratios['kafka_over_local_p50']} (one caller: "
                     f"{ratios['kafka_over_local_serial_p50']})")
        h = self.hot_window_per_send_us
        if h is not None:
            scaling = self.hot_window_scaling or {}
            many = self.primitives.get("hot_window_put_concurrent")
            lines.append(f"  hot window per send (kafka_hot - kafka_archiver, one caller): {h['serial_p50']:+} µs at "
                         f"p50, {h['serial_mean']:+} µs mean; under {p.concurrency} callers {h['p50']:+} µs at p50, "
                         f"{h['mean']:+} µs mean -> {_times(scaling.get('per_send_p50'))} at p50 / "
                         f"{_times(scaling.get('per_send_mean'))} mean the one-caller cost (the difference of two "
                         f"methods' send latencies, each inflated by the callers: the put's own time is the next line)")
            inside = self.hot_window_in_send_us or {}
            lines.append(f"  time in HotWindow.put per send (kafka_hot, timed around the put): {inside.get('one_caller')} "
                         f"µs mean one caller, {inside.get('callers')} µs under {p.concurrency} callers -> "
                         f"{_times(scaling.get('in_send_mean'))} (goal <= {HOT_WINDOW_SCALING_GOAL}); the rest of "
                         f"the kafka_hot send (its mean less the put) {_times(scaling.get('rest_of_send_mean'))}, "
                         f"kafka_archiver's send {_times(scaling.get('archiver_send_mean'))}: every step's "
                         f"{p.concurrency}-vs-1 inflation on this machine, beside the put's"
                         + (f"; {inside['puts_per_round']} puts per round, up to {inside['rounds_in_flight_max']:.0f}"
                            " rounds in flight" if "puts_per_round" in inside else ""))
            lines.append(f"  HotWindow.put alone: p50 {self.primitives['hot_window_put'].latency_us.p50} µs one caller"
                         + (f", {many.latency_us.p50} µs with {p.concurrency} concurrent callers "
                            f"({scaling.get('put_p50')}x; {many.throughput_ops_per_s} puts/s)" if many else ""))
            ping, pings = self.primitives.get("redis_ping"), self.primitives.get("redis_ping_concurrent")
            if ping is not None and pings is not None:
                lines.append(f"  control, a bare round trip to the same Redis (PING): p50 {ping.latency_us.p50} µs one "
                             f"caller ({ping.throughput_ops_per_s}/s), {pings.latency_us.p50} µs with {p.concurrency} "
                             f"callers ({scaling.get('ping_p50')}x; {pings.throughput_ops_per_s}/s): what this process "
                             f"and machine do to any round trip under {p.concurrency} callers")
            if self.hot_window_cost is not None:
                lines += self.hot_window_cost.lines()
        lines.append(f"  append alone, one caller: local p50 {self.primitives['local_append'].latency_us.p50} µs, "
                     f"kafka p50 {self.primitives['kafka_append'].latency_us.p50} µs")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        out = {"kind": "outbox-bench", "run_id": self.run_id, "keyspace": self.keyspace, "topic": self.topic,
               "wall_seconds": self.wall_seconds, "parameters": dataclasses.asdict(self.params),
               "environment": dict(self.environment), "methods": {n: m.to_json() for n, m in self.methods.items()},
               "primitives": {n: {"count": m.count, "latency_us": m.latency_us.to_json(), "histogram": m.histogram}
                              for n, m in self.primitives.items()},
               "ratios": self.ratios}
        if self.hot_window_per_send_us is not None:
            out["hot_window_per_send_us"] = self.hot_window_per_send_us
            out["hot_window_in_send_us"] = dict(self.hot_window_in_send_us or {})
            out["hot_window_scaling"] = self.hot_window_scaling
            if self.hot_window_cost is not None:
                out["hot_window_cost"] = self.hot_window_cost.to_json()
        return {**out, "closing_note": self.closing_note}


def _cost_ratio(many: float, one: float) -> float | None:
    """A cost under concurrency over one caller's, when both costs are measurable (> 0)."""
    return a_over_b(many, one, digits=RATIO_DIGITS) if many > 0 and one > 0 else None


def _p50_ratio(many: MethodResult | None, one: MethodResult | None) -> float | None:
    return a_over_b(many.latency_us.p50, one.latency_us.p50, digits=RATIO_DIGITS) if many and one else None


def _times(ratio: float | None) -> str:
    return f"{ratio}x" if ratio is not None else "not measurable (a difference <= 0: within this run's noise)"


@dataclass(frozen=True, kw_only=True)
class OutboxBenchResult:
    json_path: Path
    report: OutboxBenchReport

    @property
    def closing_note(self) -> str:
        return self.report.closing_note


class _Outbox:
    """One method while it runs: its store, its sends under load and by one caller."""

    def __init__(self, name: str, store: MessageStore) -> None:
        self.name, self.store = name, store
        self.sends, self.serial = Method(name), Method(name)
        self.hot_in_send: dict[str, float] = {}  # mean µs in HotWindow.put per send: 'callers', 'one_caller'

    def hot_mark(self) -> tuple[int, int, int] | None:
        hot = self.store.hot_window
        return None if hot is None else (hot.put_ns, hot.puts_timed, hot.put_rounds)

    def hot_since(self, mark: tuple[int, int, int] | None, label: str) -> None:
        now = self.hot_mark()
        if mark is not None and now is not None and now[1] > mark[1]:
            self.hot_in_send[label] = round((now[0] - mark[0]) / (now[1] - mark[1]) / 1000, 1)
            if label == "callers" and now[2] > mark[2]:  # the grouping and overlap the callers' puts got
                self.hot_in_send["puts_per_round"] = round((now[1] - mark[1]) / (now[2] - mark[2]), 2)
                self.hot_in_send["rounds_in_flight_max"] = self.store.hot_window.put_rounds_in_flight_max

    def result(self) -> OutboxMethodResult:
        return OutboxMethodResult(sends=self.sends.result(), serial=self.serial.result())


def _sends(methods: list[_Outbox], params: OutboxBenchParams, pool: ThreadPoolExecutor, log: Log) -> None:
    tenant = uuid.uuid4()
    conversations = [uuid.uuid4() for _ in range(params.conversations)]
    body = (b"outbox bench " * (params.body_bytes // 13 + 1))[:params.body_bytes]
    counter = iter(range(1 << 62))

    def send(store: MessageStore, i: int) -> None:
        k = i % params.conversations
        store.send(SendRequest(tenant_id=tenant, conversation_id=conversations[k], sender_id=conversations[k],
                               sender_device_id=conversations[k], client_message_id=f"ob-{i}", body=body))

    def block(m: _Outbox, n: int, measured: bool) -> None:
        t0 = now_ns()
        timings = list(pool.map(lambda i: timed(lambda: send(m.store, i), errors=True)[1],
                                [next(counter) for _ in range(n)]))
        m.store.drain()
        if measured:
            m.sends.elapsed_ns += now_ns() - t0
            for t in timings:
                m.sends.record(t)

    for m in methods:
        block(m, params.warmup, measured=False)
    marks = [m.hot_mark() for m in methods]
    rounds = params.ops // params.block
    for r in range(rounds):
        for m in methods[r % len(methods):] + methods[:r % len(methods)]:
            block(m, params.block, measured=True)
        log(f"  outbox send round {r + 1}/{rounds}")
    for m, mark in zip(methods, marks):
        m.hot_since(mark, "callers")
    marks = [m.hot_mark() for m in methods]
    log(f"  one caller, methods alternating send by send ({params.serial_ops} each)")
    for r in range(params.serial_ops):
        for m in (methods if r % 2 == 0 else methods[::-1]):
            i = next(counter)
            _, t = timed(lambda: send(m.store, i), errors=True)
            m.serial.elapsed_ns += t.elapsed_ns
            m.serial.record(t)
    for m, mark in zip(methods, marks):
        m.hot_since(mark, "one_caller")
    for m in methods:
        m.store.drain()


def _hot_window_reachable(services: ServicesConfig, keyspace: str) -> bool:
    try:
        HotWindow.open(services, namespace=keyspace, window_days=1).close()
        return True
    except Exception:  # no Redis reachable: the hot-window methods are left out, and the report says so
        return False


def run_outbox_bench(config: ClusterConfig, services: ServicesConfig, params: OutboxBenchParams, *,
                     results: Path = RESULTS_DIR, run_dir: Path | None = None,
                     log: Log | None = None) -> OutboxBenchResult:
    """Every method on a scratch keyspace (dropped at the end) and a topic of its own;
    writes ``<run_dir>/bench/outbox.json``."""
    log = log or (lambda _msg: None)
    run_dir = run_dir or new_run_dir(Path(results))
    out_dir = run_dir / BENCH_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    wall = Stopwatch()
    with client_gc.restored(), connect(config) as conn, \
            scratch_keyspace(conn, KEYSPACE_PREFIX, create=False) as keyspace, \
            tempfile.TemporaryDirectory(prefix="lab-bench-outbox-") as tmp, \
            ThreadPoolExecutor(params.concurrency, thread_name_prefix="bench-outbox") as pool:
        kafka = services.replace(outbox="kafka", kafka_topic=f"bench.{keyspace}")
        with_hot = _hot_window_reachable(services, keyspace)
        env = environment(config, conn, hot_window_measured=with_hot, client_gc=services.client_gc, services={
            n: s.describe() for n, s in (("local", services.replace(outbox="local")), ("kafka", kafka))}).to_json()
        cfg = config.replace(keyspace=keyspace)
        stores: list[MessageStore] = []
        try:
            def method(name: str, **kw: Any) -> _Outbox:
                s = MessageStore.open(cfg, state_dir=Path(tmp) / name, connection=conn, **kw)
                stores.append(s)
                return _Outbox(name, s)

            methods = [method("local", services=services.replace(outbox="local"))]
            methods[0].store.create_schema()
            methods.append(method("kafka", services=kafka))
            if with_hot:
                methods.append(method("kafka_archiver", services=kafka, archiver_mode=True))
                methods.append(method("kafka_hot", services=kafka.replace(hot_window="redis"), archiver_mode=True))
            log(f"keyspace {keyspace}: {', '.join(m.name for m in methods)}; {params.concurrency} callers")
            client_gc.settle(services.client_gc)  # set-up done: every method measured under the same collector
            _sends(methods, params, pool, log)
            primitives, costs = outbox_primitives(services, kafka, keyspace, Path(tmp), ops=params.primitive_ops,
                                                  concurrency=params.concurrency, body_bytes=params.body_bytes,
                                                  with_hot=with_hot)
            after_primitives = loadavg()
        finally:
            for s in stores:
                s.close()
    report = OutboxBenchReport(run_id=run_dir.name, keyspace=keyspace, topic=kafka.kafka_topic,
                               wall_seconds=wall.seconds(2), params=params, environment=env,
                               methods={m.name: m.result() for m in methods}, primitives=primitives,
                               hot_window_in_send_us=next((m.hot_in_send for m in methods if m.name == "kafka_hot"),
                                                          None),
                               redis_costs=costs, loadavg_after_primitives=after_primitives)
    path = write_json(out_dir / JSON_FILE, report)
    return OutboxBenchResult(json_path=path, report=report)
