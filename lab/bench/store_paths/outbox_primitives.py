"""The outbox comparison's primitives (``lab bench store --outboxes``): each step of the commit
path alone, on instances of its own, beside the sends of :mod:`lab.bench.store_paths.outboxes`.
Measures, asserts nothing.

More: docs/bench-internals.md.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from lab.bench.store_paths.recording import Method, MethodResult
from lab.bench.store_paths.redis_cost import PING_COMMANDS, PUT_COMMANDS, PhaseCost, costed
from lab.cluster.services import ServicesConfig
from lab.measure import now_ns, timed
from lab.store import EncodedRecord, HotWindow, MessagePayload, MessageType, OutboxRecord, open_outbox, wall_clock_ms

__all__ = ["outbox_primitives"]

PRIMITIVE_HOT_WINDOW_DAYS = 7


def _primitive(name: str, n: int, fn: Callable[[int], Any]) -> MethodResult:
    method = Method(name)
    for i in range(n):
        _, t = timed(lambda: fn(i))
        method.elapsed_ns += t.elapsed_ns
        method.record(t)
    return method.result()


def _concurrent_primitive(name: str, n: int, callers: int, fn: Callable[[int], Any]) -> MethodResult:
    """``n`` calls of ``fn`` from ``callers`` threads at once (closed loop): each call's latency, and
    the throughput over the whole stretch."""
    method = Method(name)
    t0 = now_ns()
    with ThreadPoolExecutor(callers, thread_name_prefix="bench-primitive") as pool:
        timings = list(pool.map(lambda i: timed(lambda: fn(i))[1], range(n)))
    method.elapsed_ns = now_ns() - t0
    for t in timings:
        method.record(t)
    return method.result()


def outbox_primitives(services: ServicesConfig, kafka: ServicesConfig, keyspace: str, state_dir: Path, *,
                      ops: int, concurrency: int, body_bytes: int,
                      with_hot: bool) -> tuple[dict[str, MethodResult], dict[str, PhaseCost]]:
    """The outbox append and the hot-window write alone, and the bare Redis round trip (the
    control), on instances of their own; the hot window's keys of ``keyspace`` are deleted after.
    Returns each primitive's latencies, and each Redis phase's cost (by the primitive's name)."""

    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    # what the commit path logs and writes to the hot window: a whole record with a body of body_bytes
    record = EncodedRecord(
        tenant_id=tenant, conversation_id=conversation, seq_bucket=0, conversation_seq=1, message_id=bytes(16),
        last_activity_id=bytes(16), sender_id=tenant, sender_device_id=tenant, client_message_id="primitive",
        message_type=int(MessageType.TEXT), schema_version=1, state=0, payload_or_ciphertext=b"x" * body_bytes,
        dek_id=("conversation", "primitive", 1), retention_class=0, created_at=wall_clock_ms())

    def at(i: int) -> EncodedRecord:
        return record.replace(conversation_seq=i + 1, message_id=(i + 1).to_bytes(16, "big"))

    out: dict[str, MethodResult] = {}
    for name, options in (("local", {"path": state_dir / "primitive-outbox.sqlite"}),
                          ("kafka", {"services": kafka, "topic": f"{kafka.kafka_topic}.primitive"})):
        with open_outbox(name, **options) as box:
            out[f"{name}_append"] = _primitive(f"{name}_append", ops, lambda i: box.append(
                OutboxRecord(tenant_id=tenant, conversation_id=conversation, conversation_seq=i + 1,
                             payload=MessagePayload(record=at(i)))))
    costs: dict[str, PhaseCost] = {}
    if with_hot:
        hot = HotWindow.open(services, namespace=keyspace, window_days=PRIMITIVE_HOT_WINDOW_DAYS)

        def phase(name: str, commands: tuple[str, tuple[str, ...]], run: Callable[[], MethodResult],
                  puts: bool) -> None:
            out[name], costs[name] = costed(hot.client, commands, run, ops=ops,
                                            rounds=(lambda: hot.put_rounds) if puts else None)

        try:
            phase("hot_window_put", PUT_COMMANDS, lambda: _primitive("hot_window_put", ops, lambda i: hot.put(at(i))),
                  puts=True)
            # the same puts from `concurrency` callers at once, each caller its own conversation (as senders)
            convs = [uuid.uuid4() for _ in range(concurrency)]
            phase("hot_window_put_concurrent", PUT_COMMANDS, lambda: _concurrent_primitive(
                "hot_window_put_concurrent", ops, concurrency,
                lambda i: hot.put(at(i).replace(conversation_id=convs[i % len(convs)]))), puts=True)
            # the control: the same Redis, a bare round trip (redis-py's pool: a connection per caller)
            phase("redis_ping", PING_COMMANDS, lambda: _primitive("redis_ping", ops, lambda _i: hot.client.ping()),
                  puts=False)
            phase("redis_ping_concurrent", PING_COMMANDS, lambda: _concurrent_primitive(
                "redis_ping_concurrent", ops, concurrency, lambda _i: hot.client.ping()), puts=False)
            for key in hot.client.scan_iter(f"{keyspace}:*"):
                hot.client.delete(key)
        finally:
            hot.close()
    return out, costs
