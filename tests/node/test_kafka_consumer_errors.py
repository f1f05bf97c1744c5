"""A Kafka outbox consumer's lasting error named in the timeout it causes (lab.store.outbox.kafka_errors),
caused for real on the embedded broker: a partition that does not exist, a topic deleted under the
index and under a read; and a group's consumer that cannot reach a broker, which leaves nothing
behind. Every topic is the test's own."""
from __future__ import annotations

import gc
import socket
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from lab.errors import OutboxError
from lab.store import open_outbox
from lab.store.outbox.kafka_index import PartitionIndex
from outbox_records import message

pytestmark = pytest.mark.node

# for the broker's answer; librdkafka names a deleted topic only after its topic.metadata.propagation.max.ms,
# 30 s by default
WAIT_SECONDS = 120
SETUP_SECONDS = 5.0  # the request timeout of a box whose group set-ups cannot succeed
SHORT_SECONDS = 1.0  # one timed-out wait: the tests wait for many until one names the cause
MISSING_TOPIC = {"UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_PARTITION"}  # both come as the topic goes: the later one is kept


@pytest.fixture
def admin(kafka_services):
    return AdminClient(kafka_services.kafka_client_config())


def made(admin: AdminClient, topic: str, partitions: int) -> None:
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result()
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic=topic, timeout=10).topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) == partitions and all(
                p.leader >= 0 for p in meta.partitions.values()):
            return
        time.sleep(0.1)
    raise AssertionError(f"topic {topic} never got a leader for each partition")


def deleted(admin: AdminClient, topic: str) -> None:
    """Delete ``topic`` and wait until the broker's metadata no longer lists it."""
    admin.delete_topics([topic])[topic].result()
    deadline = time.monotonic() + WAIT_SECONDS
    while topic in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, f"topic {topic} still listed after its deletion"
        time.sleep(0.1)


def named(attempt, codes: set[str]) -> OutboxError:
    """The first OutboxError ``attempt()`` raises that names one of ``codes``: each timed-out wait
    before the consumer heard the error is a plain timeout."""
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        with pytest.raises(OutboxError) as raised:
            attempt()
        if getattr(raised.value, "code", None) in codes:
            return raised.value
    raise AssertionError(f"no timeout named {codes} within {WAIT_SECONDS}s; the last: {raised.value}")


def assert_names(error: OutboxError, code: str) -> None:
    assert error.code == code and error.lasting is True and error.retriable is False
    assert f"the consumer's last error: {code} (" in str(error)
    assert isinstance(error.__cause__, KafkaException) and error.__cause__.args[0].name() == code


def test_the_index_names_a_partition_that_does_not_exist(kafka_services, admin, topic):
    made(admin, topic, 1)
    index = PartitionIndex(kafka_services.kafka_client_config(), topic, 2)  # partition 1 is not in the topic
    try:
        late = named(lambda: index.wait(1, 1, SHORT_SECONDS), {"_UNKNOWN_PARTITION"})
        assert_names(late, "_UNKNOWN_PARTITION")
        assert (late.topic, late.partition, late.offset) == (topic, 1, 1)
        assert str(late).startswith(f"the outbox index of {topic}[1] did not reach offset 1 within ")
        assert f"{topic} [1]: desired partition is not available" in str(late)
        # partition 0 exists: its timeout does not borrow partition 1's error, nor does its progress clear it
        index.wait(0, 0, WAIT_SECONDS)
        with pytest.raises(OutboxError) as other:
            index.wait(0, 10**12, SHORT_SECONDS)
        assert getattr(other.value, "code", None) != "_UNKNOWN_PARTITION"
        with pytest.raises(OutboxError) as again:
            index.wait(1, 1, SHORT_SECONDS)
        assert again.value.code == "_UNKNOWN_PARTITION"
    finally:
        index.close()


def test_the_index_names_its_topic_deleted(kafka_services, admin, topic):
    made(admin, topic, 2)
    producer = Producer(kafka_services.kafka_client_config())
    for partition in (0, 1):
        producer.produce(topic, key=f"{uuid.uuid4()}/{uuid.uuid4()}/1".encode(), value=b"{}", partition=partition,
                         headers=[("kind", b"message")])
    assert producer.flush(WAIT_SECONDS) == 0
    index = PartitionIndex(kafka_services.kafka_client_config(), topic, 2)
    try:
        index.wait(0, 1, WAIT_SECONDS)  # it fetches both partitions: the topic goes under a running consumer
        index.wait(1, 1, WAIT_SECONDS)
        deleted(admin, topic)
        late = named(lambda: index.wait(0, 2, SHORT_SECONDS), MISSING_TOPIC)
        assert_names(late, late.code)
        assert (late.topic, late.partition, late.offset) == (topic, 0, 2)
    finally:
        index.close()


def test_the_outbox_names_its_topic_deleted_on_every_read(kafka_services, admin, topic):
    box = open_outbox("kafka", services=kafka_services, topic=topic)
    try:
        tenant, conversation = uuid.uuid4(), uuid.uuid4()
        entry = box.append(message(tenant, conversation, 1))
        deleted(admin, topic)
        # the end offsets come first, and the broker answers them at once
        for call in (lambda: box.read(0, 10, partition=entry.partition), lambda: box.get(tenant, conversation, 1),
                     lambda: box.consume("consumer-errors"), lambda: box.end_offset(partition=entry.partition)):
            with pytest.raises(OutboxError) as raised:
                call()
            assert raised.value.code == "UNKNOWN_TOPIC_OR_PART" and "Unknown topic or partition" in str(raised.value)
    finally:
        box.close()


def test_a_read_names_its_topic_deleted_under_the_fetch(kafka_services, admin, topic):
    # a read asks the end offsets first, which the broker refuses at once for a deleted topic (above):
    # only a topic deleted between those and the fetch (or an ACL that lets a client list offsets but
    # not fetch) leaves the fetch waiting. The outbox reader's fetch stands for that read, asked directly.
    box = open_outbox("kafka", services=kafka_services.replace(request_timeout_seconds=SHORT_SECONDS), topic=topic)
    try:
        entry = box.append(message(uuid.uuid4(), uuid.uuid4(), 1))
        p, o = entry.partition, entry.offset
        assert [e.offset for e in box.read(o, 10, partition=p)] == [o]  # the reader fetched the topic
        deleted(admin, topic)
        late = named(lambda: box._fetch(box._reader, {p: o}, {p: o + 1}, limit=1), MISSING_TOPIC)
        assert_names(late, late.code)
        assert str(late).startswith(f"reading {topic} did not reach its end offsets within ")
        assert late.remaining == {p: o}
    finally:
        box.close()


def test_a_group_whose_consumer_cannot_be_set_up_keeps_nothing_and_fails_alike_each_time(kafka_services, topic):
    # the outbox opens on the broker, then its groups' consumers are pointed at a port bound but never
    # listened on (each connection refused): every set-up fails, none may be kept half made or left open
    box = open_outbox("kafka", services=kafka_services.replace(request_timeout_seconds=SETUP_SECONDS), topic=topic)
    client = box._client
    try:
        with socket.socket() as nobody:
            nobody.bind(("127.0.0.1", 0))
            box._client = {**client, "bootstrap.servers": f"127.0.0.1:{nobody.getsockname()[1]}"}
            before = [c for c in gc.get_objects() if isinstance(c, Consumer)]
            failures = []
            for call in (box.consume, box.lag):
                with pytest.raises(OutboxError) as raised:
                    call("archiver")
                failures.append(raised.value)
            made = [c for c in gc.get_objects() if isinstance(c, Consumer) and not any(c is b for b in before)]
        for failure in failures:
            assert str(failure).startswith(f"cannot open a consumer of group archiver on the outbox topic {topic}: ")
            assert failure.topic == topic and isinstance(failure.__cause__, KafkaException)
        assert len({(f.code, str(f)) for f in failures}) == 1, [str(f) for f in failures]
        assert len(made) == len(failures)  # the failed set-ups' consumers, kept alive by the failures' tracebacks
        for consumer in made:
            with pytest.raises(RuntimeError, match="closed"):
                consumer.assignment()
        box._client = client  # the broker reachable again: the group's next call sets it up afresh
        assert box.consume("archiver").entries == ()
    finally:
        box.close()
