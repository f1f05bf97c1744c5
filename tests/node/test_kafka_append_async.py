"""KafkaOutbox.append_async (lab.store.outbox.kafka_log) on the embedded broker: hundreds of appends in
flight from one thread without a thread per append, each entry the one append returns; duplicates
resolved and errors raised as append has them; the index's waiters (kafka_index.when_reached)."""
from __future__ import annotations

import dataclasses
import queue
import threading
import uuid
from concurrent.futures import wait

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from lab.errors import OutboxError, ValidationError
from lab.store import open_outbox
from lab.store.outbox.kafka_index import PartitionIndex
from lab.store.outbox.kafka_log import partition_of
from outbox_records import edit, message, tag

pytestmark = pytest.mark.node

IN_FLIGHT = 300
CONVERSATIONS = 10
WAIT_SECONDS = 120
# threads the process may gain meanwhile that are not the outbox's: the driver's executor of the
# session's connection, made on its first event (300 appends would need 300 threads, or a pool)
THREAD_ALLOWANCE = 4
# the gated outbox sends nothing before flush(): a batch waits linger.ms unless full (300 small
# records fill none) or flushed
GATE_LINGER_MS = 300_000
BROKER_MAX_BYTES = 2048  # the small topic's max.message.bytes: a 10 kB record is the broker's to refuse


@pytest.fixture
def boxes(kafka_services, topic):
    opened = []

    def _open(services=kafka_services, name=topic):
        box = open_outbox("kafka", services=services, topic=name)
        opened.append(box)
        return box

    yield _open
    for box in opened:
        box.close()


def test_appends_in_flight_from_one_thread_are_what_append_returns(kafka_services, boxes, topic):
    gated = boxes(kafka_services.replace(kafka_linger_ms=GATE_LINGER_MS, kafka_delivery_timeout_ms=2 * GATE_LINGER_MS))
    tenant = uuid.uuid4()
    conversations = [uuid.uuid4() for _ in range(CONVERSATIONS)]
    records = [message(tenant, conversations[i % CONVERSATIONS], i // CONVERSATIONS + 1) for i in range(IN_FLIGHT)]
    threads_before = threading.active_count()
    completed_on: set[str] = set()

    def seen(_future) -> None:  # on the thread that completed it
        completed_on.add(threading.current_thread().name)

    futures = [gated.append_async(r) for r in records]
    for future in futures:
        future.add_done_callback(seen)
    assert sum(not f.done() for f in futures) == IN_FLIGHT, "an append completed before the gate opened"
    threads_in_flight = threading.active_count()
    assert gated.flush(WAIT_SECONDS) == 0
    _, not_done = wait(futures, timeout=WAIT_SECONDS)
    assert not not_done, f"{len(not_done)} appends never completed"
    entries = [f.result() for f in futures]
    assert threads_in_flight - threads_before <= THREAD_ALLOWANCE, "a thread per append in flight"
    assert threading.active_count() - threads_before <= THREAD_ALLOWANCE
    # completed by the outbox's own threads (or flush's caller serving the reports), by no pool
    assert completed_on <= {f"outbox-index-{topic}", f"outbox-producer-{topic}", threading.current_thread().name}
    for record, entry in zip(records, entries):
        assert entry.record is record and not entry.duplicate
        assert entry.partition == partition_of(tenant, record.conversation_id, gated.partitions)
    for conversation in conversations:  # one thread's appends keep their order in the partition
        offsets = [e.offset for e in entries if e.record.conversation_id == conversation]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    # the log holds exactly these entries, and append (another writer's retry) names each one
    stored = {(e.record.conversation_id, e.record.conversation_seq): e for e in boxes().scan()}
    assert stored == {(e.record.conversation_id, e.record.conversation_seq): e for e in entries}
    retrying = boxes()
    for record, entry in list(zip(records, entries))[::CONVERSATIONS]:
        assert retrying.append(record) == dataclasses.replace(entry, duplicate=True)


def test_duplicates_resolve_as_append_resolves_them(boxes):
    writer, box = boxes(), boxes()
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    # one key in flight many times from one thread: the first produced is the first in the log
    futures = [box.append_async(message(tenant, conversation, 1, f"copy-{i}")) for i in range(20)]
    entries = [f.result(timeout=WAIT_SECONDS) for f in futures]
    assert len({(e.partition, e.offset) for e in entries}) == 1
    assert [e.duplicate for e in entries] == [False] + [True] * 19
    assert {tag(e) for e in entries} == {"copy-0"}
    assert boxes().append(message(tenant, conversation, 1, "late")) == entries[1]  # what append returns
    # the first entry is another writer's, not in this instance's recent entries: fetched from the log
    first = writer.append(message(tenant, conversation, 2, "writer"))
    mine = box.append_async(message(tenant, conversation, 2, "mine")).result(timeout=WAIT_SECONDS)
    assert mine.duplicate and (mine.partition, mine.offset, tag(mine)) == (first.partition, first.offset, "writer")
    assert mine == dataclasses.replace(first, duplicate=True) == boxes().append(message(tenant, conversation, 2))


def test_errors_reach_the_future_as_append_raises_them(kafka_services, boxes, topic):
    admin = AdminClient(kafka_services.kafka_client_config())
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1,
                                  config={"max.message.bytes": str(BROKER_MAX_BYTES)})])[topic].result()
    box = boxes()
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    with pytest.raises(ValidationError):  # the caller's mistake, at once (as append raises it)
        box.append_async({"not": "a record"})
    seq = 1
    for size, what in ((10_000, "the broker did not acknowledge the outbox append"),  # its delivery report
                       (2_000_000, "the outbox could not queue the append")):  # over the producer's own limit
        failed = box.append_async(edit(tenant, conversation, seq, size)).exception(timeout=WAIT_SECONDS)
        with pytest.raises(OutboxError) as raised:
            box.append(edit(tenant, conversation, seq + 1, size))
        seq += 2
        assert type(failed) is OutboxError and str(failed).startswith(what)
        assert (failed.code, failed.retriable) == ("MSG_SIZE_TOO_LARGE", False)
        assert (str(failed), failed.code, failed.retriable) == (str(raised.value), raised.value.code,
                                                                raised.value.retriable)
    assert not box.append_async(edit(tenant, conversation, seq, 10)).result(timeout=WAIT_SECONDS).duplicate
    box.close()  # an outbox closed: refused at once, nothing left waiting
    assert type(box.append_async(edit(tenant, conversation, seq + 1, 10)).exception(timeout=WAIT_SECONDS)) \
        is OutboxError
    with pytest.raises(OutboxError, match="closed"):
        box.append(edit(tenant, conversation, seq + 1, 10))


def test_the_index_calls_each_waiter_once_reached_timed_out_or_closed(kafka_services, boxes, topic):
    entry = boxes().append(message(uuid.uuid4(), uuid.uuid4(), 1))
    p, reached = entry.partition, entry.offset + 1
    index = PartitionIndex(kafka_services.kafka_client_config(), topic, boxes().partitions)
    heard: queue.Queue = queue.Queue()

    def waiter(name: str):
        return lambda error: heard.put((name, error, threading.current_thread().name))

    try:
        index.when_reached(p, reached, WAIT_SECONDS, waiter("reached"))  # a fresh index reads from the start
        name, error, on = heard.get(timeout=WAIT_SECONDS)  # on the caller's thread if it caught up first
        assert (name, error) == ("reached", None) and on in {f"outbox-index-{topic}", threading.current_thread().name}
        index.when_reached(p, reached, WAIT_SECONDS, waiter("there already"))  # at once, on the caller's thread
        assert heard.get_nowait() == ("there already", None, threading.current_thread().name)
        index.when_reached(p, 10**12, 1.0, waiter("never"))
        index.when_reached(p, 10**12, 10 * WAIT_SECONDS, waiter("pending at close"))
        name, late, on = heard.get(timeout=WAIT_SECONDS)
        with pytest.raises(OutboxError) as waited:
            index.wait(p, 10**12, 1.0)
        assert (name, on, type(late), str(late)) == ("never", f"outbox-index-{topic}", OutboxError,
                                                     str(waited.value))
    finally:
        index.close()
    name, closed, _ = heard.get(timeout=WAIT_SECONDS)
    assert (name, type(closed)) == ("pending at close", OutboxError) and "closed" in str(closed)
    index.when_reached(p, reached, 1.0, waiter("reached, after close"))
    index.when_reached(p, 10**12, 1.0, waiter("never, after close"))
    assert heard.get_nowait()[:2] == ("reached, after close", None)
    assert heard.get_nowait()[0] == "never, after close"
    assert heard.empty(), "a waiter was called twice"
