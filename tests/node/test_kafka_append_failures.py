"""KafkaOutbox.append's failure paths (lab.store.outbox.kafka_log) on the embedded broker, each
caused for real: a delivery report overdue, the index's timeout after the broker acked, a fatal
producer error. Each append fails once with the OutboxError append documents, the late answer is
ignored, a retry finds the record the broker kept, and no thread is left behind."""
from __future__ import annotations

import dataclasses
import logging
import queue
import threading
import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from lab.errors import OutboxError
from lab.store import open_outbox
from lab.store.outbox.kafka_log import KafkaOutbox, partition_of
from outbox_records import edit

pytestmark = pytest.mark.node

WAIT_SECONDS = 120
BROKER_MAX_BYTES = 2048  # the topic's max.message.bytes: a 10 kB record is the broker's to refuse
REFUSED_BYTES = 10_000
ATTEMPTS = 10  # refused appends until one's future completes in a poll (not before its callback was added)
DEADLINE_MARGIN_SECONDS = 1.0
# the failing outbox's own request timeout (its deadlines, its index's waits): shorter than the default,
# since these tests wait for it to pass; every wait for a success uses WAIT_SECONDS or a default outbox
FAILING_REQUEST_TIMEOUT_SECONDS = 2.0
TRANSACTION_TIMEOUT_MS = 600_000  # the open transaction outlives the test


@pytest.fixture
def boxes(kafka_services, topic):
    opened = []

    def _open(services=kafka_services, cls=None):
        box = open_outbox("kafka", services=services, topic=topic) if cls is None else cls(services=services,
                                                                                           topic=topic)
        opened.append(box)
        return box

    yield _open
    for box in opened:
        box.close()


@pytest.fixture
def errors_logged(caplog):
    """The outbox's logged errors: a waiter called twice would log one (its future is done)."""
    caplog.set_level(logging.ERROR, logger="lab.store.outbox")
    return lambda: [r for r in caplog.records if r.name.startswith("lab.store.outbox") and r.levelno >= logging.ERROR]


def refusing_topic(services, topic: str) -> None:
    """The topic, made before the outbox opens it, with a message size limit REFUSED_BYTES exceed."""
    admin = AdminClient(services.kafka_client_config())
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1,
                                  config={"max.message.bytes": str(BROKER_MAX_BYTES)})])[topic].result()


def threads_of(topic: str) -> list[str]:
    return [t.name for t in threading.enumerate() if topic in t.name]


def appended(box, record) -> tuple[threading.Thread, list]:
    """``box.append(record)`` on a thread of the test's (an append that never returns fails the test
    instead of hanging it); the list gets its result or its error."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append(box.append(record))
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, name="test-append", daemon=True)
    thread.start()
    return thread, outcome


def returned(thread: threading.Thread, outcome: list):
    """What the append on ``thread`` returned or raised, once it did."""
    thread.join(WAIT_SECONDS)
    assert not thread.is_alive(), "the append never returned"
    assert len(outcome) == 1
    return outcome[0]


def counted(future) -> tuple[list, threading.Event]:
    """The futures ``future``'s done-callbacks were called with, and an event set at the first call
    (a future's waiters may wake before its callbacks ran)."""
    calls: list = []
    called = threading.Event()

    def count(done) -> None:
        calls.append(done)
        called.set()

    future.add_done_callback(count)
    return calls, called


def logged(box, record, deadline: float):
    """The entry of ``record`` once ``box``'s lookup finds it in the log (the broker acked it)."""
    while time.monotonic() < deadline:
        entry = box.get(record.tenant_id, record.conversation_id, record.conversation_seq)
        if entry is not None:
            return entry
        time.sleep(0.05)
    raise AssertionError(f"record {record.conversation_seq} never reached the log")


def test_a_report_overdue_fails_the_append_once(kafka_services, boxes, topic, errors_logged):
    # a report is overdue when the producer's poll thread has not served it by the append's deadline:
    # here a done-callback holds that thread inside a poll (as a slow poll would). A poll of 100 ms
    # is one rd_kafka_poll, which serves the reports queued when it began (rd_kafka_q_serve): those
    # queued meanwhile wait for the next one, and the loop checks deadlines in between.
    refusing_topic(kafka_services, topic)
    box, other = boxes(kafka_services.replace(request_timeout_seconds=FAILING_REQUEST_TIMEOUT_SECONDS)), boxes()
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    producer_thread = f"outbox-producer-{topic}"
    ran: queue.Queue[bool] = queue.Queue()
    release = threading.Event()

    def hold(future) -> None:
        # the broker's refusal comes in a poll (an overdue one would come in the deadline check)
        held = (threading.current_thread().name == producer_thread
                and getattr(future.exception(), "code", None) == "MSG_SIZE_TOO_LARGE")
        ran.put(held)
        if held:
            release.wait(WAIT_SECONDS * 2)

    try:
        for seq in range(1, ATTEMPTS + 1):
            box.append_async(edit(tenant, conversation, seq, REFUSED_BYTES)).add_done_callback(hold)
            if ran.get(timeout=WAIT_SECONDS):
                break
        else:
            pytest.fail(f"no refused append completed in a poll of {producer_thread}")
        sync, in_thread = edit(tenant, conversation, 100, 10), edit(tenant, conversation, 101, 10)
        thread, outcome = appended(box, sync)
        calls, called = counted(box.append_async(in_thread))
        seen = {r.conversation_seq: logged(other, r, time.monotonic() + WAIT_SECONDS) for r in (sync, in_thread)}
        # both were appended before they were seen: their deadlines have passed by then
        time.sleep(kafka_services.kafka_delivery_timeout_ms / 1000 + FAILING_REQUEST_TIMEOUT_SECONDS
                   + DEADLINE_MARGIN_SECONDS)
    finally:
        release.set()
    raised = returned(thread, outcome)
    assert called.wait(WAIT_SECONDS)
    assert box.flush(WAIT_SECONDS) == 0  # the late reports were served (and ignored) too
    for error in (raised, calls[0].exception()):
        assert type(error) is OutboxError and str(error) == "no delivery report for the outbox append"
    assert raised.partition == partition_of(tenant, conversation, box.partitions)
    assert (raised.conversation_seq, calls[0].exception().conversation_seq) == (100, 101)
    assert len(calls) == 1 and errors_logged() == []
    # the broker kept both: a retry returns the first entry of each (the index has read them long since)
    for record in (sync, in_thread):
        retried = box.append_async(record).result(WAIT_SECONDS)
        assert retried == dataclasses.replace(seen[record.conversation_seq], duplicate=True)
    box.close()
    other.close()
    assert threads_of(topic) == []


def test_the_index_timing_out_fails_an_acked_append_once(kafka_services, boxes, topic, errors_logged):
    # a transaction left open on the partition holds its last stable offset: the index (a
    # read_committed consumer, librdkafka's default) cannot read past it, while the broker acks
    # the outbox's (non-transactional) appends after it
    box, reader = boxes(kafka_services.replace(request_timeout_seconds=FAILING_REQUEST_TIMEOUT_SECONDS)), boxes()
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    partition = partition_of(tenant, conversation, box.partitions)
    holder = Producer({**kafka_services.kafka_client_config(), "transactional.id": f"lab-test-{topic}",
                       "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS})
    holder.init_transactions(WAIT_SECONDS)
    holder.begin_transaction()
    try:
        holder.produce(topic, key=f"{tenant}/{conversation}/99".encode(), value=b"{}", partition=partition)
        assert holder.flush(WAIT_SECONDS) == 0
        in_thread, sync = edit(tenant, conversation, 2, 10), edit(tenant, conversation, 1, 10)
        future = box.append_async(in_thread)
        calls, called = counted(future)
        raised = returned(*appended(box, sync))
        late = future.exception(WAIT_SECONDS)
    finally:
        holder.abort_transaction(WAIT_SECONDS)
    # the index reads on once the abort's markers are written (after abort_transaction returns): what
    # the broker acked is there (read through an outbox of the default timeouts: the failing one's
    # index may take longer than its own short timeout to pass the markers), and the timed-out
    # waiters are not called again
    seen = {r.conversation_seq: logged(reader, r, time.monotonic() + WAIT_SECONDS) for r in (sync, in_thread)}
    assert called.wait(WAIT_SECONDS) and len(calls) == 1 and errors_logged() == []
    for error, seq in ((raised, 1), (late, 2)):
        assert type(error) is OutboxError
        assert str(error).startswith(f"the outbox index of {topic}[{partition}] did not reach offset")
        assert (error.partition, error.offset) == (partition, seen[seq].offset + 1)
    for record in (sync, in_thread):
        retried = reader.append_async(record).result(WAIT_SECONDS)
        assert retried == dataclasses.replace(seen[record.conversation_seq], duplicate=True)
    box.close()
    reader.close()
    assert threads_of(topic) == []


class GaplessOutbox(KafkaOutbox):
    """The outbox with producers that treat a batch the broker refuses as a fatal error
    (``enable.gapless.guarantee``, _GAPLESS_GUARANTEE): librdkafka's one fatal error of an
    idempotent producer that a test can cause on a sound broker."""

    def __init__(self, **kw) -> None:
        self.producers_made = 0
        super().__init__(**kw)

    def _new_producer(self) -> Producer:
        self.producers_made += 1
        s = self.services
        return Producer({**s.kafka_client_config(), "enable.idempotence": True, "enable.gapless.guarantee": True,
                         "acks": "all", "message.timeout.ms": s.kafka_delivery_timeout_ms})


def test_a_fatal_producer_error_replaces_the_producer_once(kafka_services, boxes, topic, errors_logged):
    refusing_topic(kafka_services, topic)
    box = boxes(cls=GaplessOutbox)
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    entries = [box.append(edit(tenant, conversation, 1, 10))]
    # the failed append itself is reported (its report comes from the retired producer), and the
    # next one goes to the producer that replaced it; once per producer
    raised = returned(*appended(box, edit(tenant, conversation, 2, REFUSED_BYTES)))
    entries.append(box.append_async(edit(tenant, conversation, 3, 10)).result(WAIT_SECONDS))
    assert box.producers_made == 2
    future = box.append_async(edit(tenant, conversation, 4, REFUSED_BYTES))
    calls, called = counted(future)
    late = future.exception(WAIT_SECONDS)
    entries.append(box.append_async(edit(tenant, conversation, 5, 10)).result(WAIT_SECONDS))
    assert box.producers_made == 3
    for error in (raised, late):
        assert type(error) is OutboxError and error.code == "MSG_SIZE_TOO_LARGE"
        assert str(error).startswith("the broker did not acknowledge the outbox append")
    assert [e.offset for e in entries] == sorted({e.offset for e in entries}) and not any(e.duplicate for e in entries)
    assert box.flush(WAIT_SECONDS) == 0  # the retired producers' last reports were served
    assert called.wait(WAIT_SECONDS) and len(calls) == 1 and errors_logged() == []
    box.close()
    assert threads_of(topic) == []
