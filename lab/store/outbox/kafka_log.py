"""The outbox over the Kafka protocol (Redpanda in production, Apache Kafka here), §5.1 step 4.

More: docs/store-internals.md.
"""
from __future__ import annotations

import dataclasses
import functools
import threading
import time
import uuid
from collections import OrderedDict
from concurrent.futures import Future
from pathlib import Path
from typing import NamedTuple

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from lab.cluster.services import ServicesConfig
from lab.errors import OutboxError, ValidationError
from lab.store.rows.ids import check_conversation_seq
from lab.store.outbox.kafka_errors import ConsumerErrors, kafka_error, timed_out
from lab.store.outbox.kafka_index import (FETCH_BATCH, GROUP_PREFIX, PartitionIndex, decode_entry, encode_value,
                                          next_messages, parse_key, partition_of, record_key)
from lab.store.outbox.kafka_producer import Append, OutboxProducer
from lab.store.outbox import DEFAULT_READ_LIMIT, Outbox, OutboxBatch, OutboxEntry, OutboxRecord
from lab.store.plumbing.steps import BlockingPool

__all__ = ["KafkaOutbox", "partition_of"]

RECENT_ENTRIES = 4096  # entries this process appended or fetched, kept to spare a fetch on retries


class _Reader(NamedTuple):
    """One consumer of the outbox (the reader, or a group's), the lock its fetches hold (one
    assignment at a time) and what it heard, for a fetch that times out to name."""
    consumer: Consumer
    lock: threading.Lock
    errors: ConsumerErrors


class KafkaOutbox(Outbox):
    """The commit log on a Kafka-protocol broker; see the module docstring for the semantics.

    ``path`` is accepted (and ignored) so that the store opens every outbox the same way.
    The topic is created when missing, with ``services.kafka_partitions`` partitions; an
    existing topic keeps its own partition count.
    """

    def __init__(self, path: Path | str | None = None, *, services: ServicesConfig, topic: str) -> None:
        self.services = services
        self.topic = topic
        self._timeout = services.request_timeout_seconds
        self._client = services.kafka_client_config()
        self._fetches = BlockingPool(1, f"outbox-fetch-{topic}")  # a duplicate's first entry, when not cached
        try:
            self._partitions = self._ensure_topic()
            # a report comes within message.timeout.ms; the request timeout's margin covers a slow poll
            self._producer = OutboxProducer(topic, self._new_producer, self._acked,
                                            report_seconds=services.kafka_delivery_timeout_ms / 1000 + self._timeout)
            self._index = PartitionIndex(self._client, topic, self._partitions)
            try:
                self._reader = self._open_reader("reader")
            except BaseException:
                self._index.close()
                raise
        except KafkaException as exc:
            raise kafka_error(f"cannot open the outbox topic {topic} on {services.kafka_bootstrap_servers}", exc,
                               topic=topic) from exc
        self._groups: dict[str, _Reader] = {}  # only readers whose set-up succeeded
        self._groups_lock = threading.Lock()
        self._recent: OrderedDict[tuple[int, int], OutboxEntry] = OrderedDict()
        self._recent_lock = threading.Lock()
        self._producer.start()

    def __repr__(self) -> str:
        return f"KafkaOutbox({self.topic!r} on {self.services.kafka_bootstrap_servers}, {self._partitions} partitions)"

    # ---- setup ----------------------------------------------------------------------------
    def _ensure_topic(self) -> int:
        admin = AdminClient(self._client)
        deadline = time.monotonic() + self._timeout * 3
        created = False
        while True:
            meta = admin.list_topics(topic=self.topic, timeout=self._timeout).topics.get(self.topic)
            if meta is not None and meta.error is None and meta.partitions and all(
                    p.leader >= 0 for p in meta.partitions.values()):
                return len(meta.partitions)
            if not created:
                new = NewTopic(self.topic, num_partitions=self.services.kafka_partitions,
                               replication_factor=self.services.kafka_replication_factor,
                               config={"min.insync.replicas": str(min(2, self.services.kafka_replication_factor))})
                try:
                    admin.create_topics([new], operation_timeout=self._timeout)[self.topic].result()
                except KafkaException as exc:
                    if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                        raise
                created = True
            if time.monotonic() > deadline:
                raise OutboxError(f"topic {self.topic} has no leader for every partition yet", topic=self.topic)
            time.sleep(0.1)

    def _new_producer(self) -> Producer:
        """One producer of the outbox's (again after a fatal error): idempotent, acks from every in-sync replica."""
        s = self.services
        return Producer({**self._client, "enable.idempotence": True, "acks": "all", "linger.ms": s.kafka_linger_ms,
                         "message.timeout.ms": s.kafka_delivery_timeout_ms,
                         "request.timeout.ms": min(s.kafka_delivery_timeout_ms, 30_000)})

    def _open_reader(self, group: str) -> _Reader:
        """A consumer of the outbox that assigns its partitions (``group`` names its offsets), with
        the topic's metadata fetched first (else the first fetch after a committed() waits for it).
        A set-up that fails (KafkaException) closes the consumer it made."""
        errors = ConsumerErrors(self.topic)
        consumer = Consumer({**self._client, "group.id": GROUP_PREFIX + group, "enable.auto.commit": False,
                             "enable.auto.offset.store": False, "fetch.wait.max.ms": 10, "error_cb": errors.error_cb})
        try:
            consumer.list_topics(self.topic, timeout=self._timeout)
        except BaseException:
            consumer.close()
            raise
        return _Reader(consumer, threading.Lock(), errors)

    @property
    def partitions(self) -> int:
        return self._partitions

    def _check_partition(self, partition: int) -> int:
        if not isinstance(partition, int) or isinstance(partition, bool) or not 0 <= partition < self._partitions:
            raise ValidationError(f"partition must be in 0..{self._partitions - 1}, got {partition!r}",
                                  partition=partition)
        return partition

    def _remember(self, entry: OutboxEntry) -> None:
        with self._recent_lock:
            self._recent[(entry.partition, entry.offset)] = entry
            while len(self._recent) > RECENT_ENTRIES:
                self._recent.popitem(last=False)

    # ---- append ---------------------------------------------------------------------------
    def append(self, record: OutboxRecord) -> OutboxEntry:
        if threading.current_thread() in (self._producer.thread, self._index.thread):
            # a callback of an append's future: the thread that would complete this append is waiting for it
            raise OutboxError("a blocking append on the outbox's own thread would wait for itself (use append_async)",
                              topic=self.topic)
        return self.append_async(record).result()

    def append_async(self, record: OutboxRecord) -> Future[OutboxEntry]:
        """The append as a future: produced now, continued by the delivery report's callback (on the
        producer's poll thread), then by the index once it reached the record (on the index's thread);
        no thread waits for it. The future's callbacks run on those threads and must not block. A
        record that is no OutboxRecord raises here; every other error is the future's."""
        if not isinstance(record, OutboxRecord):
            raise ValidationError("append takes an OutboxRecord", field="record")
        partition = partition_of(record.tenant_id, record.conversation_id, self._partitions)
        appended_at_ms = time.time_ns() // 1_000_000
        append = Append(record, partition, appended_at_ms)
        self._producer.produce(append, key="/".join(map(str, record_key(record))).encode(),
                               value=encode_value(record, appended_at_ms), headers=[("kind", record.kind.encode())])
        return append.future

    def _acked(self, append: Append, offset: int) -> None:
        """The broker acked ``append`` at ``offset`` (the producer's poll thread): the index completes it."""
        self._index.when_reached(append.partition, offset + 1, self._timeout,
                                 functools.partial(self._indexed, append, offset))

    def _indexed(self, append: Append, offset: int, error: OutboxError | None) -> None:
        """The index holds the record (or ``error`` says why not): the first entry of its key, with
        ``duplicate=True`` when that is not ours. On the index's thread: never blocks, never raises."""
        try:
            if error is not None:
                raise error
            first = self._index.first[record_key(append.record)]
            # the record as stored: a typed record round-trips its wire form, ids are parsed already
            own = OutboxEntry(offset=offset, partition=append.partition, appended_at_ms=append.appended_at_ms,
                              record=append.record)
            self._remember(own)
            if first == (append.partition, offset):
                append.future.set_result(own)
                return
            with self._recent_lock:
                cached = self._recent.get(first)
            if cached is None:  # a fetch from the log (rare: another writer's first entry)
                self._fetches().submit(self._resolve_duplicate, append, first)
                return
            append.future.set_result(dataclasses.replace(cached, duplicate=True))
        except Exception as exc:
            append.future.set_exception(exc)

    def _resolve_duplicate(self, append: Append, first: tuple[int, int]) -> None:
        try:
            append.future.set_result(dataclasses.replace(self._entry_at(*first), duplicate=True))
        except Exception as exc:
            append.future.set_exception(exc)

    # ---- lookups (index) ------------------------------------------------------------------
    def _caught_up(self, partition: int) -> None:
        self._index.wait(partition, self.end_offset(partition=partition), self._timeout)

    def get(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID, conversation_seq: int) -> OutboxEntry | None:
        key = (str(tenant_id), str(conversation_id), check_conversation_seq(conversation_seq))
        partition = partition_of(uuid.UUID(key[0]), uuid.UUID(key[1]), self._partitions)
        self._caught_up(partition)
        first = self._index.first.get(key)
        return None if first is None else self._entry_at(*first)

    def controls_for(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID, target_seq: int,
                     kind: str) -> list[OutboxEntry]:
        partition = partition_of(tenant_id, conversation_id, self._partitions)
        self._caught_up(partition)
        return list(self._index.controls.get((str(tenant_id), str(conversation_id), int(target_seq), kind), ()))

    def _entry_at(self, partition: int, offset: int) -> OutboxEntry:
        with self._recent_lock:
            cached = self._recent.get((partition, offset))
        if cached is not None:
            return cached
        found, _ = self._fetch(self._reader, {partition: offset}, {partition: offset + 1}, limit=1,
                               skip_duplicates=False)
        if not found or found[0].offset != offset:
            raise OutboxError(f"the outbox record {self.topic}[{partition}]@{offset} is gone (retention?)",
                              topic=self.topic, partition=partition, offset=offset)
        self._remember(found[0])
        return found[0]

    # ---- reading the log ------------------------------------------------------------------
    def _watermarks(self, partition: int) -> tuple[int, int]:
        try:
            return self._reader.consumer.get_watermark_offsets(TopicPartition(self.topic, partition),
                                                               timeout=self._timeout, cached=False)
        except KafkaException as exc:
            raise kafka_error("cannot read the outbox's end offsets", exc, topic=self.topic,
                               partition=partition) from exc

    def end_offset(self, *, partition: int = 0) -> int:
        return self._watermarks(self._check_partition(partition))[1]

    def _fetch(self, reader: _Reader, start: dict[int, int], end: dict[int, int], *, limit: int,
               skip_duplicates: bool = True) -> tuple[list[OutboxEntry], dict[int, int]]:
        """Entries of [start[p], end[p]) per partition, at most ``limit``, through ``reader``; returns
        them and the offset after the last record looked at per partition (skipped duplicates
        included). Past the request timeout it raises, naming the consumer error that explains it."""
        consumer, lock, errors = reader
        wanted = {p: o for p, o in start.items() if o < end[p]}
        entries: list[OutboxEntry] = []
        reached: dict[int, int] = {}
        if not wanted or limit <= 0:
            return entries, reached
        began = time.monotonic()
        deadline = began + self._timeout
        with lock:
            consumer.assign([TopicPartition(self.topic, p, o) for p, o in wanted.items()])
            try:
                while wanted and len(entries) < limit:
                    if time.monotonic() > deadline:
                        raise timed_out(f"reading {self.topic} did not reach its end offsets within "
                                        f"{self._timeout:.0f}s", errors.cause(wanted, since=began), topic=self.topic,
                                        remaining=dict(wanted))
                    for msg in next_messages(consumer, min(FETCH_BATCH, limit - len(entries))):
                        if msg.error() is not None:  # none is fatal here (as for the index): librdkafka retries
                            errors.heard(msg.error(), msg.partition())  # and the deadline names it
                            continue
                        p, o = msg.partition(), msg.offset()
                        errors.progressed(p)
                        if p not in wanted or o < wanted[p]:
                            continue  # a late record of an earlier assignment
                        wanted[p] = reached[p] = o + 1
                        if wanted[p] >= end[p]:
                            del wanted[p]
                        if skip_duplicates:
                            self._index.wait(p, o + 1, self._timeout)
                            if self._index.first.get(parse_key(msg.key())) != (p, o):
                                continue
                        entry = decode_entry(msg.value(), partition=p, offset=o)
                        entries.append(entry)
                        if len(entries) >= limit:
                            break
            finally:
                consumer.unassign()
        return entries, reached

    def read(self, from_offset: int, limit: int = DEFAULT_READ_LIMIT, *, partition: int = 0) -> list[OutboxEntry]:
        partition = self._check_partition(partition)
        low, high = self._watermarks(partition)
        entries, _ = self._fetch(self._reader, {partition: max(int(from_offset), low)}, {partition: high},
                                 limit=int(limit))
        return entries

    # ---- consumer groups ------------------------------------------------------------------
    def _group(self, group: str) -> _Reader:
        """``group``'s reader, set up on first use; a set-up that fails leaves nothing behind, so
        that the next call tries again (and fails the same way while the broker is unreachable)."""
        with self._groups_lock:
            reader = self._groups.get(group)
            if reader is None:
                try:
                    reader = self._open_reader(group)
                except KafkaException as exc:
                    raise kafka_error(f"cannot open a consumer of group {group} on the outbox topic {self.topic}",
                                      exc, topic=self.topic) from exc
                self._groups[group] = reader
            return reader

    def _committed_all(self, group: str, consumer: Consumer) -> dict[int, int]:
        try:
            got = consumer.committed([TopicPartition(self.topic, p) for p in range(self._partitions)],
                                     timeout=self._timeout)
        except KafkaException as exc:
            raise kafka_error(f"cannot read the committed offsets of group {group}", exc, topic=self.topic) from exc
        return {tp.partition: max(tp.offset, 0) for tp in got}

    def committed(self, group: str, *, partition: int = 0) -> int:
        partition = self._check_partition(partition)
        return self._committed_all(group, self._group(group).consumer)[partition]

    def _commit(self, group: str, offsets: dict[int, int]) -> dict[int, int]:
        consumer, lock, _ = self._group(group)
        with lock:  # read-compare-commit: this process never moves a group backwards
            current = self._committed_all(group, consumer)
            forward = {p: o for p, o in offsets.items() if o > current[p]}
            if forward:
                try:
                    consumer.commit(offsets=[TopicPartition(self.topic, p, o) for p, o in forward.items()],
                                    asynchronous=False)
                except KafkaException as exc:
                    raise kafka_error(f"cannot commit the offsets of group {group}", exc, topic=self.topic) from exc
            return {p: max(current[p], offsets[p]) for p in offsets}

    def commit(self, group: str, offset: int, *, partition: int = 0) -> int:
        partition = self._check_partition(partition)
        return self._commit(group, {partition: int(offset)})[partition]

    def consume(self, group: str, limit: int = DEFAULT_READ_LIMIT) -> OutboxBatch:
        reader = self._group(group)
        start = self._committed_all(group, reader.consumer)
        marks = {p: self._watermarks(p) for p in range(self._partitions)}
        entries, reached = self._fetch(reader, {p: max(start[p], marks[p][0]) for p in start},
                                       {p: marks[p][1] for p in marks}, limit=limit)
        return OutboxBatch(entries=tuple(entries), next_offsets=reached)

    def commit_batch(self, group: str, batch: OutboxBatch) -> None:
        if batch.next_offsets:
            self._commit(group, dict(batch.next_offsets))

    def lag(self, group: str) -> int:
        committed = self._committed_all(group, self._group(group).consumer)
        total = 0
        for p in range(self._partitions):
            low, high = self._watermarks(p)
            total += high - max(committed[p], low)
        return total

    # ---- lifecycle ------------------------------------------------------------------------
    def flush(self, timeout_seconds: float | None = None) -> int:
        """Wait for queued appends (a retired producer's too); returns how many are still undelivered."""
        return self._producer.flush(self._timeout if timeout_seconds is None else timeout_seconds)

    def close(self) -> None:
        """Flush, then stop; an append still in flight fails (OutboxError), none is left waiting."""
        if self._producer.closed:
            return
        self._producer.close(self._timeout)
        self._index.close()  # its waiters hear that it is closed
        self._fetches.close()  # the duplicates' fetches queued, before the reader they use
        for reader in [self._reader, *self._groups.values()]:
            reader.consumer.close()

