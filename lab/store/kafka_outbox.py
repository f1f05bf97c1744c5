"""The outbox over the Kafka protocol (Redpanda in production, Apache Kafka here), §5.1 step 4.

One topic, partitioned by conversation: every record of (tenant_id, conversation_id) goes to
partition ``crc32(tenant/conversation) % partitions``, chosen here rather than by the client's
partitioner so that every process (and any other client) agrees where a conversation lives.
The record key is ``tenant/conversation/conversation_seq``, a ``kind`` header says message /
recall / edit, the value is the record as JSON (the index reads key and header only, and
decodes the value of CONTROL records alone).

How each semantic of :mod:`lab.store.outbox` is kept:

- durable append, acked only after the broker acknowledged it: an idempotent producer
  (``enable.idempotence``, ``acks=all``) and :meth:`KafkaOutbox.append` returns only once the
  delivery report for *its* record came back without error. A broker that is down, or that
  does not acknowledge within ``kafka_delivery_timeout_ms``, makes the append raise
  :class:`~lab.errors.OutboxError` (the send fails, nothing is acked). The idempotent producer
  removes duplicates of its own internal retries;
- key-level idempotency, first write wins: a replayed append (a resumed send) may produce a
  second record with the same key. The first record of a key *in log order* is the entry;
  ``append`` waits until its own offset is indexed (below) and returns the first one, with
  ``duplicate=True`` when that is not its own. Readers and consumers skip the later copies;
- ``get`` and ``controls_for``: served from an index this process builds by tailing every
  partition from its start (a consumer with no group, in a thread): key -> first (partition,
  offset), and every CONTROL entry by target. Before answering, the index catches up to the
  partition's high watermark (one ListOffsets request), so an append acknowledged anywhere
  before the call is seen: read-your-writes across writers and processes. Message bodies are
  not kept in memory: ``get`` fetches the one record from the log (rare: retries only);
- offsets are Kafka's, per partition; ``read`` fetches the records from the log;
- consumer groups: the archiver's and the recovery's positions are Kafka consumer-group
  offsets (``lab.<group>`` in ``__consumer_offsets``), committed only after a batch was
  processed and never moved backwards by this process (it commits ``max(committed, new)``
  under a lock). The group reads by manual assignment of every partition (one archiver per
  group, as with the local outbox): no rebalance protocol, so a writer that died mid-batch does
  not hold partitions until its session times out. Scaling out archivers over partitions is
  the subscribe protocol's job in production; two archivers of one group here would both
  archive everything (idempotent upserts, wasted work), not lose anything.

The index makes a process read its topic once from the start: fine for the lab's topics; a
production deployment serves these lookups from a compacted topic or the hot window (§2.1).
"""
from __future__ import annotations

import dataclasses
import json
import threading
import time
import uuid
import zlib
from collections import OrderedDict
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from lab.cluster.services import ServicesConfig
from lab.errors import OutboxError, ValidationError
from lab.store.ids import check_conversation_seq
from lab.store.outbox import (CONTROL_KINDS, DEFAULT_READ_LIMIT, Outbox, OutboxBatch, OutboxEntry, OutboxRecord)

__all__ = ["GROUP_PREFIX", "KafkaOutbox", "partition_of"]

GROUP_PREFIX = "lab."
_POLL_SECONDS = 0.05
_FETCH_BATCH = 500
_RECENT_ENTRIES = 4096  # entries this process appended or fetched, kept to spare a fetch on retries
_Key = tuple[str, str, int]


def partition_of(tenant_id: uuid.UUID, conversation_id: uuid.UUID, partitions: int) -> int:
    """The partition of a conversation: stable across processes, clients and restarts."""
    return zlib.crc32(f"{tenant_id}/{conversation_id}".encode()) % partitions


def _key(record: OutboxRecord) -> _Key:
    return str(record.tenant_id), str(record.conversation_id), record.conversation_seq


def _encode(record: OutboxRecord, appended_at_ms: int) -> bytes:
    try:
        return json.dumps({"tenant_id": str(record.tenant_id), "conversation_id": str(record.conversation_id),
                           "conversation_seq": record.conversation_seq, "kind": record.kind,
                           "target_seq": record.target_seq, "payload": dict(record.payload),
                           "appended_at_ms": appended_at_ms}, separators=(",", ":"), sort_keys=True).encode()
    except (TypeError, ValueError) as exc:
        raise OutboxError(f"outbox payload is not JSON-ready: {exc}") from exc


def _parse_key(raw: bytes) -> _Key:
    tenant, conversation, seq = raw.decode().split("/")
    return tenant, conversation, int(seq)


def _decode(value: bytes, *, partition: int, offset: int, duplicate: bool = False) -> OutboxEntry:
    data = json.loads(value)
    return OutboxEntry(offset=offset, partition=partition, appended_at_ms=data["appended_at_ms"], duplicate=duplicate,
                       record=OutboxRecord(tenant_id=uuid.UUID(data["tenant_id"]),
                                           conversation_id=uuid.UUID(data["conversation_id"]),
                                           conversation_seq=data["conversation_seq"], kind=data["kind"],
                                           target_seq=data["target_seq"], payload=data["payload"]))


def _next_messages(consumer: Consumer, limit: int) -> list[Any]:
    """What the consumer has, as soon as it has anything (``consume(n, t)`` would wait for
    all n or the whole timeout: 100 ms on every append)."""
    first = consumer.poll(_POLL_SECONDS * 2)
    if first is None:
        return []
    return [first, *consumer.consume(limit - 1, 0)] if limit > 1 else [first]


def _kafka_error(what: str, err: KafkaError | KafkaException | BaseException, **facts: Any) -> OutboxError:
    kerr = err.args[0] if isinstance(err, KafkaException) and err.args else err
    if isinstance(kerr, KafkaError):
        return OutboxError(f"{what}: {kerr.str()}", code=kerr.name(), retriable=kerr.retriable(), **facts)
    return OutboxError(f"{what}: {err}", **facts)


class _Index:
    """key -> first (partition, offset), CONTROL entries by target, and how far each partition
    is indexed; filled by one tailing consumer thread."""

    def __init__(self, client: dict[str, Any], topic: str, partitions: int) -> None:
        self.topic, self.partitions = topic, partitions
        self.first: dict[_Key, tuple[int, int]] = {}
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
                messages = _next_messages(self._consumer, _FETCH_BATCH)
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
                        self.error = _kafka_error("the outbox index consumer failed", err, topic=self.topic)
                    continue  # transport errors: librdkafka reconnects by itself
                offset = msg.offset()
                key = _parse_key(msg.key())
                first = self.first.setdefault(key, (partition, offset))
                if first == (partition, offset) and dict(msg.headers() or ()).get("kind") != b"message":
                    entry = _decode(msg.value(), partition=partition, offset=offset)
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
        self._closed = False
        try:
            self._partitions = self._ensure_topic()
            self._producer = Producer({
                **self._client, "enable.idempotence": True, "acks": "all", "linger.ms": services.kafka_linger_ms,
                "message.timeout.ms": services.kafka_delivery_timeout_ms,
                "request.timeout.ms": min(services.kafka_delivery_timeout_ms, 30_000)})
            self._index = _Index(self._client, topic, self._partitions)
            self._reader = Consumer({**self._client, "group.id": f"{GROUP_PREFIX}reader", "enable.auto.commit": False,
                                     "fetch.wait.max.ms": 10})
            self._reader.list_topics(topic, timeout=self._timeout)
        except KafkaException as exc:
            raise _kafka_error(f"cannot open the outbox topic {topic} on {services.kafka_bootstrap_servers}", exc,
                               topic=topic) from exc
        self._reader_lock = threading.Lock()
        self._groups: dict[str, Consumer] = {}
        self._group_locks: dict[str, threading.Lock] = {}
        self._groups_lock = threading.Lock()
        self._recent: OrderedDict[tuple[int, int], OutboxEntry] = OrderedDict()
        self._recent_lock = threading.Lock()
        self._poller = threading.Thread(target=self._serve_delivery_reports, name=f"outbox-producer-{topic}",
                                        daemon=True)
        self._poller.start()

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

    def _serve_delivery_reports(self) -> None:
        while not self._closed:
            self._producer.poll(_POLL_SECONDS * 2)

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
            while len(self._recent) > _RECENT_ENTRIES:
                self._recent.popitem(last=False)

    # ---- append ---------------------------------------------------------------------------
    def append(self, record: OutboxRecord) -> OutboxEntry:
        if not isinstance(record, OutboxRecord):
            raise ValidationError("append takes an OutboxRecord", field="record")
        partition = partition_of(record.tenant_id, record.conversation_id, self._partitions)
        appended_at_ms = time.time_ns() // 1_000_000
        value = _encode(record, appended_at_ms)
        done = threading.Event()
        report: dict[str, Any] = {}

        def delivered(err: KafkaError | None, msg: Any) -> None:
            report.update(err=err, offset=msg.offset())
            done.set()

        facts = dict(topic=self.topic, partition=partition, conversation_seq=record.conversation_seq)
        try:
            self._producer.produce(self.topic, key="/".join(map(str, _key(record))).encode(), value=value,
                                   partition=partition, headers=[("kind", record.kind.encode())],
                                   on_delivery=delivered)
        except (BufferError, KafkaException) as exc:
            raise _kafka_error("the outbox could not queue the append", exc, **facts) from exc
        # the delivery report comes within message.timeout.ms; the margin covers a slow poll
        if not done.wait(self.services.kafka_delivery_timeout_ms / 1000 + self._timeout):
            raise OutboxError("no delivery report for the outbox append", **facts)
        if report["err"] is not None:
            raise _kafka_error("the broker did not acknowledge the outbox append", report["err"], **facts)
        offset = report["offset"]
        self._index.wait(partition, offset + 1, self._timeout)
        first = self._index.first[_key(record)]
        # the record as stored: the payload was JSON-checked by _encode, ids are parsed already
        own = OutboxEntry(offset=offset, partition=partition, appended_at_ms=appended_at_ms, record=record)
        self._remember(own)
        if first == (partition, offset):
            return own
        return dataclasses.replace(self._entry_at(*first), duplicate=True)

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
        found, _ = self._fetch(self._reader, self._reader_lock, {partition: offset}, {partition: offset + 1}, limit=1,
                               skip_duplicates=False)
        if not found or found[0].offset != offset:
            raise OutboxError(f"the outbox record {self.topic}[{partition}]@{offset} is gone (retention?)",
                              topic=self.topic, partition=partition, offset=offset)
        self._remember(found[0])
        return found[0]

    # ---- reading the log ------------------------------------------------------------------
    def _watermarks(self, partition: int) -> tuple[int, int]:
        try:
            return self._reader.get_watermark_offsets(TopicPartition(self.topic, partition), timeout=self._timeout,
                                                      cached=False)
        except KafkaException as exc:
            raise _kafka_error("cannot read the outbox's end offsets", exc, topic=self.topic,
                               partition=partition) from exc

    def end_offset(self, *, partition: int = 0) -> int:
        return self._watermarks(self._check_partition(partition))[1]

    def _fetch(self, consumer: Consumer, lock: threading.Lock, start: dict[int, int], end: dict[int, int], *,
               limit: int, skip_duplicates: bool = True) -> tuple[list[OutboxEntry], dict[int, int]]:
        """Entries of [start[p], end[p]) per partition, at most ``limit``; returns them and the
        offset after the last record looked at per partition (skipped duplicates included)."""
        wanted = {p: o for p, o in start.items() if o < end[p]}
        entries: list[OutboxEntry] = []
        reached: dict[int, int] = {}
        if not wanted or limit <= 0:
            return entries, reached
        deadline = time.monotonic() + self._timeout
        with lock:
            consumer.assign([TopicPartition(self.topic, p, o) for p, o in wanted.items()])
            try:
                while wanted and len(entries) < limit:
                    if time.monotonic() > deadline:
                        raise OutboxError(f"reading {self.topic} did not reach its end offsets within "
                                          f"{self._timeout:.0f}s", topic=self.topic, remaining=dict(wanted))
                    for msg in _next_messages(consumer, min(_FETCH_BATCH, limit - len(entries))):
                        err = msg.error()
                        if err is not None:
                            if err.fatal():
                                raise _kafka_error("reading the outbox failed", err, topic=self.topic)
                            continue
                        p, o = msg.partition(), msg.offset()
                        if p not in wanted or o < wanted[p]:
                            continue  # a late record of an earlier assignment
                        wanted[p] = reached[p] = o + 1
                        if wanted[p] >= end[p]:
                            del wanted[p]
                        if skip_duplicates:
                            self._index.wait(p, o + 1, self._timeout)
                            if self._index.first.get(_parse_key(msg.key())) != (p, o):
                                continue
                        entry = _decode(msg.value(), partition=p, offset=o)
                        entries.append(entry)
                        if len(entries) >= limit:
                            break
            finally:
                consumer.unassign()
        return entries, reached

    def read(self, from_offset: int, limit: int = DEFAULT_READ_LIMIT, *, partition: int = 0) -> list[OutboxEntry]:
        partition = self._check_partition(partition)
        low, high = self._watermarks(partition)
        entries, _ = self._fetch(self._reader, self._reader_lock, {partition: max(int(from_offset), low)},
                                 {partition: high}, limit=int(limit))
        return entries

    # ---- consumer groups ------------------------------------------------------------------
    def _group(self, group: str) -> tuple[Consumer, threading.Lock]:
        with self._groups_lock:
            consumer = self._groups.get(group)
            if consumer is None:
                consumer = self._groups[group] = Consumer({
                    **self._client, "group.id": GROUP_PREFIX + group, "enable.auto.commit": False,
                    "enable.auto.offset.store": False, "fetch.wait.max.ms": 10})
                # metadata first: after a committed() the first fetch of an unwarmed consumer waits ~1 s
                consumer.list_topics(self.topic, timeout=self._timeout)
                self._group_locks[group] = threading.Lock()
            return consumer, self._group_locks[group]

    def _committed_all(self, group: str, consumer: Consumer) -> dict[int, int]:
        try:
            got = consumer.committed([TopicPartition(self.topic, p) for p in range(self._partitions)],
                                     timeout=self._timeout)
        except KafkaException as exc:
            raise _kafka_error(f"cannot read the committed offsets of group {group}", exc, topic=self.topic) from exc
        return {tp.partition: max(tp.offset, 0) for tp in got}

    def committed(self, group: str, *, partition: int = 0) -> int:
        partition = self._check_partition(partition)
        return self._committed_all(group, self._group(group)[0])[partition]

    def _commit(self, group: str, offsets: dict[int, int]) -> dict[int, int]:
        consumer, lock = self._group(group)
        with lock:  # read-compare-commit: this process never moves a group backwards
            current = self._committed_all(group, consumer)
            forward = {p: o for p, o in offsets.items() if o > current[p]}
            if forward:
                try:
                    consumer.commit(offsets=[TopicPartition(self.topic, p, o) for p, o in forward.items()],
                                    asynchronous=False)
                except KafkaException as exc:
                    raise _kafka_error(f"cannot commit the offsets of group {group}", exc, topic=self.topic) from exc
            return {p: max(current[p], offsets[p]) for p in offsets}

    def commit(self, group: str, offset: int, *, partition: int = 0) -> int:
        partition = self._check_partition(partition)
        return self._commit(group, {partition: int(offset)})[partition]

    def consume(self, group: str, limit: int = DEFAULT_READ_LIMIT) -> OutboxBatch:
        consumer, lock = self._group(group)
        start = self._committed_all(group, consumer)
        marks = {p: self._watermarks(p) for p in range(self._partitions)}
        entries, reached = self._fetch(consumer, lock, {p: max(start[p], marks[p][0]) for p in start},
                                       {p: marks[p][1] for p in marks}, limit=limit)
        return OutboxBatch(entries=tuple(entries), next_offsets=reached)

    def commit_batch(self, group: str, batch: OutboxBatch) -> None:
        if batch.next_offsets:
            self._commit(group, dict(batch.next_offsets))

    def lag(self, group: str) -> int:
        committed = self._committed_all(group, self._group(group)[0])
        total = 0
        for p in range(self._partitions):
            low, high = self._watermarks(p)
            total += high - max(committed[p], low)
        return total

    # ---- lifecycle ------------------------------------------------------------------------
    def flush(self, timeout_seconds: float | None = None) -> int:
        """Wait for queued appends; returns how many are still undelivered."""
        return self._producer.flush(self._timeout if timeout_seconds is None else timeout_seconds)

    def close(self) -> None:
        if self._closed:
            return
        self._producer.flush(self._timeout)
        self._closed = True
        self._poller.join(timeout=10)
        self._index.close()
        for consumer in [self._reader, *self._groups.values()]:
            consumer.close()

