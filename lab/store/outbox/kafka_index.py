"""The Kafka outbox's record codec and its index (lab.store.outbox.kafka_log).

More: docs/store-internals.md.
"""
from __future__ import annotations

import json
import threading
import uuid
import zlib
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from lab.errors import OutboxError
from lab.store.outbox import CONTROL_KINDS, OutboxEntry, OutboxRecord

__all__ = ["FETCH_BATCH", "GROUP_PREFIX", "POLL_SECONDS", "PartitionIndex", "RecordKey", "decode_entry",
           "encode_value", "kafka_error", "next_messages", "parse_key", "partition_of", "record_key"]

GROUP_PREFIX = "lab."  # consumer groups of the lab: lab.<group>
POLL_SECONDS = 0.05
FETCH_BATCH = 500
RecordKey = tuple[str, str, int]


def partition_of(tenant_id: uuid.UUID, conversation_id: uuid.UUID, partitions: int) -> int:
    """The partition of a conversation: stable across processes, clients and restarts."""
    return zlib.crc32(f"{tenant_id}/{conversation_id}".encode()) % partitions


def record_key(record: OutboxRecord) -> RecordKey:
    return str(record.tenant_id), str(record.conversation_id), record.conversation_seq


def encode_value(record: OutboxRecord, appended_at_ms: int) -> bytes:
    """The record's wire form (:meth:`OutboxRecord.to_wire`) and its append time, as JSON."""
    return json.dumps({**record.to_wire(), "appended_at_ms": appended_at_ms}, separators=(",", ":"),
                      sort_keys=True).encode()


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


def kafka_error(what: str, err: KafkaError | KafkaException | BaseException, **facts: Any) -> OutboxError:
    kerr = err.args[0] if isinstance(err, KafkaException) and err.args else err
    if isinstance(kerr, KafkaError):
        return OutboxError(f"{what}: {kerr.str()}", code=kerr.name(), retriable=kerr.retriable(), **facts)
    return OutboxError(f"{what}: {err}", **facts)


class PartitionIndex:
    """key -> first (partition, offset), CONTROL entries by target, and how far each partition
    is indexed; filled by one tailing consumer thread."""

    def __init__(self, client: dict[str, Any], topic: str, partitions: int) -> None:
        self.topic, self.partitions = topic, partitions
        self.first: dict[RecordKey, tuple[int, int]] = {}
        self.controls: dict[tuple[str, str, int, str], list[OutboxEntry]] = {}
        self.position = [0] * partitions
        self.error: OutboxError | None = None
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._consumer = Consumer({**client, "group.id": f"{GROUP_PREFIX}index", "enable.auto.commit": False,
                                   "enable.partition.eof": True, "fetch.wait.max.ms": 10,
                                   "auto.offset.reset": "earliest"})
        self._consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        self._thread = threading.Thread(target=self._run, name=f"outbox-index-{topic}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                messages = next_messages(self._consumer, FETCH_BATCH)
                if messages:
                    self._take(messages)
        finally:
            self._consumer.close()

    def _take(self, messages: list[Any]) -> None:
        with self._cond:
            for msg in messages:
                err = msg.error()
                partition = msg.partition()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        self.position[partition] = max(self.position[partition], msg.offset())
                    elif err.fatal():
                        self.error = kafka_error("the outbox index consumer failed", err, topic=self.topic)
                    continue  # transport errors: librdkafka reconnects by itself
                offset = msg.offset()
                key = parse_key(msg.key())
                first = self.first.setdefault(key, (partition, offset))
                if first == (partition, offset) and dict(msg.headers() or ()).get("kind") != b"message":
                    entry = decode_entry(msg.value(), partition=partition, offset=offset)
                    if entry.record.kind in CONTROL_KINDS:
                        r = entry.record
                        self.controls.setdefault((key[0], key[1], r.target_seq, r.kind), []).append(entry)
                self.position[partition] = max(self.position[partition], offset + 1)
            self._cond.notify_all()

    def wait(self, partition: int, end_offset: int, timeout: float) -> None:
        """Block until every offset below ``end_offset`` of ``partition`` is indexed."""
        with self._cond:
            done = self._cond.wait_for(lambda: self.position[partition] >= end_offset or self.error is not None
                                       or self._stop.is_set(), timeout)
            if self.error is not None:
                raise self.error
            if not done:
                raise OutboxError(f"the outbox index of {self.topic}[{partition}] did not reach offset {end_offset} "
                                  f"within {timeout:.0f}s (at {self.position[partition]})", topic=self.topic,
                                  partition=partition, offset=end_offset)

    def close(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        self._thread.join(timeout=10)
