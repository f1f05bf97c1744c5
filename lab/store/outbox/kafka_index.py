"""The Kafka outbox's record codec and its index (lab.store.outbox.kafka_log).

More: docs/store-internals.md.
"""
from __future__ import annotations

import heapq
import itertools
import json
import logging
import threading
import time
import uuid
import zlib
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from lab.errors import OutboxError
from lab.store.outbox import CONTROL_KINDS, OutboxEntry, OutboxRecord
from lab.store.outbox.kafka_errors import ConsumerErrors, timed_out
from lab.store.rows.encoded import WIRE_JSON

__all__ = ["FETCH_BATCH", "GROUP_PREFIX", "POLL_SECONDS", "PartitionIndex", "RecordKey", "decode_entry",
           "encode_value", "next_messages", "parse_key", "partition_of", "record_key"]

GROUP_PREFIX = "lab."  # consumer groups of the lab: lab.<group>
POLL_SECONDS = 0.05
FETCH_BATCH = 500
RecordKey = tuple[str, str, int]
Reached = Callable[[OutboxError | None], None]  # when_reached's callback: None, or why the offset never came
_log = logging.getLogger(__name__)


def partition_of(tenant_id: uuid.UUID, conversation_id: uuid.UUID, partitions: int) -> int:
    """The partition of a conversation: stable across processes, clients and restarts."""
    return zlib.crc32(f"{tenant_id}/{conversation_id}".encode()) % partitions


def record_key(record: OutboxRecord) -> RecordKey:
    return str(record.tenant_id), str(record.conversation_id), record.conversation_seq


def encode_value(record: OutboxRecord, appended_at_ms: int) -> bytes:
    """The record's wire form (:meth:`OutboxRecord.to_wire`) and its append time, as JSON."""
    return WIRE_JSON({**record.to_wire(), "appended_at_ms": appended_at_ms}).encode()


def parse_key(raw: bytes) -> RecordKey:
    tenant, conversation, seq = raw.decode().split("/")
    return tenant, conversation, int(seq)


def decode_entry(value: bytes, *, partition: int, offset: int, duplicate: bool = False) -> OutboxEntry:
    data = json.loads(value)
    return OutboxEntry(offset=offset, partition=partition, appended_at_ms=data["appended_at_ms"], duplicate=duplicate,
                       record=OutboxRecord.from_wire(data))


def next_messages(consumer: Consumer, limit: int) -> list[Any]:
    """What the consumer has, as soon as it has anything (``consume(n, t)`` would wait for
    all n or the whole timeout: 100 ms on every append)."""
    first = consumer.poll(POLL_SECONDS * 2)
    if first is None:
        return []
    return [first, *consumer.consume(limit - 1, 0)] if limit > 1 else [first]


class _Waiter:
    """One :meth:`PartitionIndex.when_reached` call; ``done`` once its callback was taken."""

    __slots__ = ("partition", "end_offset", "timeout", "then", "done")

    def __init__(self, partition: int, end_offset: int, timeout: float, then: Reached) -> None:
        self.partition, self.end_offset, self.timeout, self.then, self.done = partition, end_offset, timeout, then, False


class PartitionIndex:
    """key -> first (partition, offset), CONTROL entries by target, and how far each partition
    is indexed; filled by one tailing consumer thread, which also calls the waiters of
    :meth:`when_reached` (and times them out: its poll returns at least every 2 * POLL_SECONDS)."""

    def __init__(self, client: dict[str, Any], topic: str, partitions: int) -> None:
        self.topic, self.partitions = topic, partitions
        self.first: dict[RecordKey, tuple[int, int]] = {}
        self.controls: dict[tuple[str, str, int, str], list[OutboxEntry]] = {}
        self.position = [0] * partitions
        self.error: OutboxError | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ended = False  # the thread is gone: nothing advances the index any more
        self._order = itertools.count()  # heap tie-breaker: waiters never compare
        self._waiting: list[list[tuple[int, int, _Waiter]]] = [[] for _ in range(partitions)]  # by end_offset
        self._deadlines: list[tuple[float, int, _Waiter]] = []
        self.errors = ConsumerErrors(topic)  # what its consumer heard: a timed-out waiter hears the cause
        self._consumer = Consumer({**client, "group.id": f"{GROUP_PREFIX}index", "enable.auto.commit": False,
                                   "enable.partition.eof": True, "fetch.wait.max.ms": 10,
                                   "auto.offset.reset": "earliest", "error_cb": self.errors.error_cb})
        self._consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        self.thread = threading.Thread(target=self._run, name=f"outbox-index-{topic}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                messages = next_messages(self._consumer, FETCH_BATCH)
                with self._lock:
                    if messages:
                        self._take(messages)
                    due = self._due(time.monotonic())
                _call(due)
        except Exception as exc:  # a record it cannot read: every waiter hears it, none waits for its timeout
            with self._lock:
                self.error = self.error or OutboxError(f"the outbox index of {self.topic} stopped: {exc!r}",
                                                       topic=self.topic)
        finally:
            with self._lock:
                self._ended = True  # every waiter left hears it now
                due = self._due(time.monotonic())
            _call(due)
            self._consumer.close()

    def _take(self, messages: list[Any]) -> None:
        """Index ``messages`` (under the lock)."""
        for msg in messages:
            err = msg.error()
            partition = msg.partition()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    self.position[partition] = max(self.position[partition], msg.offset())
                    self.errors.progressed(partition)
                else:  # none is fatal to a consumer that only assigns (docs): librdkafka retries the rest
                    self.errors.heard(err, partition)
                continue
            self.errors.progressed(partition)
            offset = msg.offset()
            key = parse_key(msg.key())
            first = self.first.setdefault(key, (partition, offset))
            if first == (partition, offset) and dict(msg.headers() or ()).get("kind") != b"message":
                entry = decode_entry(msg.value(), partition=partition, offset=offset)
                if entry.record.kind in CONTROL_KINDS:
                    r = entry.record
                    self.controls.setdefault((key[0], key[1], r.target_seq, r.kind), []).append(entry)
            self.position[partition] = max(self.position[partition], offset + 1)

    def _late(self, partition: int, end_offset: int, timeout: float, now: float) -> OutboxError:
        return timed_out(f"the outbox index of {self.topic}[{partition}] did not reach offset {end_offset} "
                         f"within {timeout:.0f}s (at {self.position[partition]})",
                         self.errors.cause([partition], since=now - timeout), topic=self.topic, partition=partition,
                         offset=end_offset)

    def wait(self, partition: int, end_offset: int, timeout: float) -> None:
        """Block until every offset below ``end_offset`` of ``partition`` is indexed: :meth:`when_reached`'s
        answer, its error raised."""
        answered = threading.Event()
        heard: list[OutboxError | None] = []

        def then(error: OutboxError | None) -> None:
            heard.append(error)
            answered.set()

        self.when_reached(partition, end_offset, timeout, then)
        if not answered.is_set() and threading.current_thread() is self.thread:
            # a waiter's callback: the thread that would answer is this one
            raise OutboxError(f"a blocking wait on the outbox index's own thread would wait for itself "
                              f"({self.topic}[{partition}] at {end_offset})", topic=self.topic, partition=partition,
                              offset=end_offset)
        answered.wait()  # the index answers by the timeout (its poll loop), or as it ends
        if heard[0] is not None:
            raise heard[0]

    def when_reached(self, partition: int, end_offset: int, timeout: float, then: Reached) -> None:
        """``then(None)`` once every offset below ``end_offset`` of ``partition`` is indexed, else
        ``then(error)``: the index's failure, or an OutboxError for its timeout (found on the index's
        poll loop) or once the index is closed. ``then`` runs once, on the index's thread, or on the
        caller's when the answer is known already; it must not block (the index waits for it)."""
        with self._lock:
            known = self._answer(partition, end_offset)
            if known is None:
                waiter = _Waiter(partition, end_offset, timeout, then)
                order = next(self._order)
                heapq.heappush(self._waiting[partition], (end_offset, order, waiter))
                heapq.heappush(self._deadlines, (time.monotonic() + timeout, order, waiter))
                return
        then(known[0])

    def _answer(self, partition: int, end_offset: int) -> tuple[OutboxError | None] | None:
        """What a waiter hears now (under the lock); None: nothing yet."""
        if self.error is not None:
            return (self.error,)
        if self.position[partition] >= end_offset:
            return (None,)
        if self._ended:
            return (OutboxError(f"the outbox index of {self.topic} is closed", topic=self.topic, partition=partition,
                                offset=end_offset),)
        return None

    def _due(self, now: float) -> list[tuple[Reached, OutboxError | None]]:
        """The waiters to call now (under the lock), each with its error or None."""
        due: list[tuple[Reached, OutboxError | None]] = []
        for partition, heap in enumerate(self._waiting):
            while heap and (known := self._answer(partition, heap[0][0])) is not None:
                waiter = heapq.heappop(heap)[2]
                if not waiter.done:
                    waiter.done = True
                    due.append((waiter.then, known[0]))
        while self._deadlines and self._deadlines[0][0] <= now:
            waiter = heapq.heappop(self._deadlines)[2]
            if not waiter.done:
                waiter.done = True
                due.append((waiter.then, self._late(waiter.partition, waiter.end_offset, waiter.timeout, now)))
        return due

    def close(self) -> None:
        self._stop.set()
        self.thread.join(timeout=10)


def _call(due: list[tuple[Reached, OutboxError | None]]) -> None:
    for then, error in due:
        try:
            then(error)
        except Exception:  # a callback's own bug must not stop the index (the outbox's never raise)
            _log.exception("an outbox index waiter failed")
