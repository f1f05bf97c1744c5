"""What a Kafka outbox consumer heard, and what a timed-out wait names (lab.store.outbox.kafka_errors):
lasting errors until progress, transient ones only while waiting, per partition; a repeat logged at
DEBUG; and the consumers' use of Kafka that keeps fatal consumer errors away from them."""
from __future__ import annotations

import logging
import time
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException

import lab.store.outbox as outbox
from lab.errors import OutboxError
from lab.store.outbox.kafka_errors import LASTING, ConsumerErrors, timed_out

TOPIC = "outbox.t"


def err(code: int, text: str = "") -> KafkaError:
    return KafkaError(code, text or f"{TOPIC} [0]: reason")


def test_the_lasting_errors_are_the_ones_that_wait_for_an_operator():
    assert {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC,
            KafkaError.TOPIC_AUTHORIZATION_FAILED} <= LASTING
    assert not {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._PARTITION_EOF,
                KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE} & LASTING


def test_the_partition_comes_from_librdkafkas_prefix_of_this_topic():
    errors = ConsumerErrors(TOPIC)
    # another topic's prefix names no partition of this one: it counts for every partition
    errors.error_cb(err(KafkaError._UNKNOWN_PARTITION, f"{TOPIC}.other [2]: desired partition is not available"))
    errors.error_cb(err(KafkaError._UNKNOWN_PARTITION, f"{TOPIC} [3]: desired partition is not available (x)"))
    assert errors.cause([3], since=0).str().startswith(f"{TOPIC} [3]:")  # the later of partition 3's and the unnamed
    assert errors.cause([2], since=0).str().startswith(f"{TOPIC}.other [2]:")
    assert errors.cause([1], since=0).str().startswith(f"{TOPIC}.other [2]:")


def test_a_lasting_error_stays_until_its_partition_progresses():
    errors = ConsumerErrors(TOPIC)
    errors.heard(err(KafkaError.TOPIC_AUTHORIZATION_FAILED), 0)
    later = time.monotonic() + 3600
    assert errors.cause([0], since=later).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert errors.cause([1], since=0) is None
    errors.progressed(1)  # another partition's progress says nothing of partition 0
    assert errors.cause([0], since=later) is not None
    errors.progressed(0)
    assert errors.cause([0], since=0) is None


def test_a_transient_error_is_named_only_when_heard_while_waiting():
    errors = ConsumerErrors(TOPIC)
    errors.heard(err(KafkaError._TRANSPORT, "127.0.0.1:9092/1: Connection refused"), None)
    assert errors.cause([0, 1], since=0).code() == KafkaError._TRANSPORT
    assert errors.cause([0], since=time.monotonic() + 1) is None
    errors.progressed(0)  # any partition's progress clears what named none
    assert errors.cause([0], since=0) is None


def test_a_partitions_end_and_a_poll_error_of_no_partition():
    errors = ConsumerErrors(TOPIC)
    errors.heard(err(KafkaError._PARTITION_EOF), 0)
    assert errors.cause([0], since=0) is None
    errors.heard(err(KafkaError._UNKNOWN_TOPIC), -1)
    assert errors.cause([5], since=0).code() == KafkaError._UNKNOWN_TOPIC


def test_the_latest_of_the_partitions_and_the_unnamed_is_named():
    errors = ConsumerErrors(TOPIC)
    errors.heard(err(KafkaError._UNKNOWN_PARTITION), 0)
    errors.heard(err(KafkaError.UNKNOWN_TOPIC_OR_PART), None)
    assert errors.cause([0], since=0).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_a_timeout_names_its_cause_in_message_facts_and_cause():
    plain = timed_out("reading t did not reach its end offsets within 10s", None, topic=TOPIC)
    assert str(plain) == "reading t did not reach its end offsets within 10s" and plain.__cause__ is None
    assert not hasattr(plain, "code")
    cause = err(KafkaError.UNKNOWN_TOPIC_OR_PART, f"{TOPIC} [0]: topic does not exist (Broker: Unknown topic)")
    error = timed_out("reading t did not reach its end offsets within 10s", cause, topic=TOPIC, partition=0)
    assert isinstance(error, OutboxError)
    assert str(error) == ("reading t did not reach its end offsets within 10s; the consumer's last error: "
                          f"UNKNOWN_TOPIC_OR_PART ({TOPIC} [0]: topic does not exist (Broker: Unknown topic))")
    assert (error.code, error.lasting, error.retriable, error.topic, error.partition) == (
        "UNKNOWN_TOPIC_OR_PART", True, False, TOPIC, 0)
    assert isinstance(error.__cause__, KafkaException) and error.__cause__.args[0] is cause


def test_an_error_warns_when_its_code_changes_and_a_repeat_logs_at_debug(caplog):
    caplog.set_level(logging.DEBUG, logger="lab.store.outbox.kafka_errors")
    errors = ConsumerErrors(TOPIC)
    down = err(KafkaError._TRANSPORT, "127.0.0.1:9092/1: Connection refused")
    for heard in [(down, None), (down, None), (err(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"), None),
                  (down, None), (down, 0), (down, 0), (err(KafkaError._PARTITION_EOF), 0), (down, 0)]:
        errors.heard(*heard)
    errors.progressed(0)  # progress forgets partition 0's and the unnamed error: the next one is news
    errors.heard(down, 0)
    errors.error_cb(err(KafkaError.TOPIC_AUTHORIZATION_FAILED))  # librdkafka's "outbox.t [0]: ..."
    errors.error_cb(err(KafkaError.TOPIC_AUTHORIZATION_FAILED))
    assert [(r.levelno, r.getMessage().split(": ", 1)[1].split(" ", 1)[0]) for r in caplog.records] == [
        (logging.WARNING, "_TRANSPORT"), (logging.DEBUG, "_TRANSPORT"), (logging.WARNING, "_ALL_BROKERS_DOWN"),
        (logging.WARNING, "_TRANSPORT"), (logging.WARNING, "_TRANSPORT"), (logging.DEBUG, "_TRANSPORT"),
        (logging.DEBUG, "_TRANSPORT"), (logging.WARNING, "_TRANSPORT"),
        (logging.WARNING, "TOPIC_AUTHORIZATION_FAILED"), (logging.DEBUG, "TOPIC_AUTHORIZATION_FAILED")]
    assert all(r.getMessage().startswith(f"a consumer of the outbox {TOPIC}: ") for r in caplog.records)


def test_the_kafka_consumers_never_join_a_group_so_no_fatal_error_reaches_them():
    """The Kafka outbox's consumers only assign() and name no group.instance.id: librdkafka raises a
    fatal consumer error only for a fenced static member (or a KIP-848 / share-group heartbeat), so
    the consumers handle no fatal error. Whoever adds subscribe() or a static member id must add the
    check (a message whose error code is _FATAL; its fatal() is always false) with it."""
    sources = {p.name: p.read_text() for p in Path(outbox.__file__).parent.glob("kafka_*.py")}
    assert {"kafka_log.py", "kafka_index.py", "kafka_producer.py"} <= set(sources)
    for name, text in sources.items():
        assert ".subscribe(" not in text and "group.instance.id" not in text and "group.protocol" not in text, name
