"""The Kafka outbox's client errors (lab.store.outbox.kafka_log): a client's error as an OutboxError,
and what a consumer heard, so that a read or index wait that times out names its cause.

More: docs/store-internals.md.
"""
from __future__ import annotations

import itertools
import logging
import re
import threading
import time
from collections.abc import Iterable
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from lab.errors import OutboxError

__all__ = ["ConsumerErrors", "LASTING", "kafka_error", "timed_out"]

# errors that stay until someone acts (creates the topic or partition, grants the ACL, fixes the
# credentials); librdkafka reports each once, not on every retry. Every other error is transient.
LASTING = frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError._UNKNOWN_PARTITION,
                     KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                     KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED})
_log = logging.getLogger(__name__)


def kafka_error(what: str, err: KafkaError | KafkaException | BaseException, **facts: Any) -> OutboxError:
    kerr = err.args[0] if isinstance(err, KafkaException) and err.args else err
    if isinstance(kerr, KafkaError):
        return OutboxError(f"{what}: {kerr.str()}", code=kerr.name(), retriable=kerr.retriable(), **facts)
    return OutboxError(f"{what}: {err}", **facts)


def timed_out(what: str, cause: KafkaError | None, **facts: Any) -> OutboxError:
    """The OutboxError of a wait that timed out: ``what``, and the consumer error that explains it
    (if any) in the message, as facts (code, retriable, lasting) and as ``__cause__``."""
    if cause is None:
        return OutboxError(what, **facts)
    error = OutboxError(f"{what}; the consumer's last error: {cause.name()} ({cause.str()})", code=cause.name(),
                        retriable=cause.retriable(), lasting=cause.code() in LASTING, **facts)
    error.__cause__ = KafkaException(cause)
    return error


class ConsumerErrors:
    """The last error one consumer of ``topic`` heard, per partition (None: the error named none).

    Fed by the consumer's ``error_cb`` (:meth:`error_cb`: a topic or partition that does not
    exist, transport and authentication errors) and by the errors its poll returns (:meth:`heard`:
    fetch errors such as an authorization refusal); a record or a partition's end on a partition
    (:meth:`progressed`) clears that partition's error and the unnamed one. :meth:`cause` is what a
    timed-out wait names."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self._named = re.compile(rf"{re.escape(topic)} \[(\d+)\]: ")  # librdkafka's "topic [p]: reason (error)"
        self._lock = threading.Lock()
        self._last: dict[int | None, tuple[int, float, KafkaError]] = {}  # (order heard, time heard, error)
        self._order = itertools.count()

    def error_cb(self, err: KafkaError) -> None:
        """The consumer's ``error_cb`` (on the thread that polls it): never blocks, never raises."""
        named = self._named.match(err.str())
        self.heard(err, int(named.group(1)) if named else None)

    def heard(self, err: KafkaError, partition: int | None) -> None:
        """Keep ``err`` as ``partition``'s last error; log it, as a warning only when its code is
        not that partition's last one (librdkafka repeats a transient error on every retry)."""
        if err.code() == KafkaError._PARTITION_EOF:
            return  # a partition's end: no error
        if partition is not None and partition < 0:
            partition = None  # a poll's error of no partition (RD_KAFKA_PARTITION_UA)
        with self._lock:
            before = self._last.get(partition)
            self._last[partition] = (next(self._order), time.monotonic(), err)
        repeated = before is not None and before[2].code() == err.code()
        _log.log(logging.DEBUG if repeated else logging.WARNING, "a consumer of the outbox %s: %s (%s)", self.topic,
                 err.name(), err.str())

    def progressed(self, partition: int) -> None:
        """``partition`` gave a record or its end: the consumer fetches it, whatever it heard before."""
        if self._last:  # the common case takes no lock
            with self._lock:
                self._last.pop(partition, None)
                self._last.pop(None, None)

    def cause(self, partitions: Iterable[int], since: float) -> KafkaError | None:
        """The latest error heard for ``partitions`` (or naming none): a lasting one until progress
        clears it, a transient one only when heard at or after ``since`` (time.monotonic)."""
        with self._lock:
            found = [self._last[p] for p in (*partitions, None) if p in self._last]
        found = [heard for heard in found if heard[2].code() in LASTING or heard[1] >= since]
        return max(found)[2] if found else None
