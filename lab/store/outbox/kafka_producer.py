"""The Kafka outbox's producer (lab.store.outbox.kafka_log): its appends until the broker acked them,
their delivery reports served on one poll thread, and a producer replaced after a fatal error.

More: docs/store-internals.md.
"""
from __future__ import annotations

import functools
import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from lab.errors import OutboxError
from lab.store.outbox import OutboxEntry, OutboxRecord
from lab.store.outbox.kafka_errors import kafka_error
from lab.store.outbox.kafka_index import POLL_SECONDS

__all__ = ["Acked", "Append", "OutboxProducer"]


class Append:
    """One append in flight: its record, where it goes, and the future it completes."""

    __slots__ = ("record", "partition", "appended_at_ms", "deadline", "future")

    def __init__(self, record: OutboxRecord, partition: int, appended_at_ms: int) -> None:
        self.record, self.partition, self.appended_at_ms = record, partition, appended_at_ms
        self.deadline = 0.0  # its delivery report's, set as it is produced
        self.future: Future[OutboxEntry] = Future()
        self.future.set_running_or_notify_cancel()  # it completes once, with the append

    def facts(self) -> dict[str, Any]:
        return {"partition": self.partition, "conversation_seq": self.record.conversation_seq}


Acked = Callable[[Append, int], None]  # what goes on once the broker acked an append at an offset


class OutboxProducer:
    """The outbox's producer to one topic and the thread that polls it. ``new_producer`` makes a
    producer (again after a fatal error); ``acked(append, offset)`` continues an append on the poll
    thread once the broker acked it (it must not block; what it raises fails the append); an append
    with no delivery report within ``report_seconds`` fails on that thread's loop."""

    def __init__(self, topic: str, new_producer: Callable[[], Producer], acked: Acked, *,
                 report_seconds: float) -> None:
        self.topic = topic
        self._new_producer, self._acked, self._report_seconds = new_producer, acked, report_seconds
        self._closed = False
        self._lock = threading.Lock()  # the producer (replaced after a fatal error) and the appends awaiting reports
        self._generation = 0  # which producer: a fatal error replaces the one that failed, once
        self._retired: list[tuple[Producer, int]] = []  # replaced producers, served until their last report
        self._delivering: OrderedDict[int, Append] = OrderedDict()  # by produce order = deadline order
        self._sequence = itertools.count()
        self._producer = new_producer()
        self.thread = threading.Thread(target=self._serve_delivery_reports, name=f"outbox-producer-{topic}",
                                       daemon=True)

    def start(self) -> None:
        self.thread.start()

    @property
    def closed(self) -> bool:
        return self._closed

    def produce(self, append: Append, *, key: bytes, value: bytes, headers: list[tuple[str, bytes]]) -> None:
        """Queue ``append``'s record to its partition; its future fails here when the producer is
        closed or refuses it, else on the poll thread (the report's error, or none by its deadline)."""
        # the delivery report comes within message.timeout.ms; report_seconds' margin covers a slow poll
        append.deadline = time.monotonic() + self._report_seconds
        with self._lock:
            if self._closed:
                append.future.set_exception(OutboxError(f"the outbox {self.topic} is closed", topic=self.topic,
                                                        **append.facts()))
                return
            seq = next(self._sequence)
            self._delivering[seq] = append
            producer, generation = self._producer, self._generation
        try:
            producer.produce(self.topic, key=key, value=value, partition=append.partition, headers=headers,
                             on_delivery=functools.partial(self._delivered, seq, generation))
        except (BufferError, KafkaException) as exc:
            with self._lock:
                mine = self._delivering.pop(seq, None) is not None
            self._after_failure(exc.args[0] if isinstance(exc, KafkaException) and exc.args else None, generation)
            if mine:
                error = kafka_error("the outbox could not queue the append", exc, topic=self.topic, **append.facts())
                error.__cause__ = exc
                append.future.set_exception(error)

    def _delivered(self, seq: int, generation: int, err: KafkaError | None, msg: Any) -> None:
        """The delivery report's callback (the poll thread): never blocks, never raises."""
        with self._lock:
            append = self._delivering.pop(seq, None)
        if append is None:
            return  # overdue already: failed by _overdue
        try:
            if err is not None:
                self._after_failure(err, generation)
                raise kafka_error("the broker did not acknowledge the outbox append", err, topic=self.topic,
                                  **append.facts())
            self._acked(append, msg.offset())
        except Exception as exc:
            append.future.set_exception(exc)

    def _after_failure(self, err: KafkaError | None, generation: int) -> None:
        """An idempotent producer that hit a fatal error refuses every later append: replace it,
        once, and retire it (the failed append itself is reported; a retry resumes through get / the
        index). The error is fatal as poll and flush raise it, or as produce refuses after it."""
        if isinstance(err, KafkaError) and (err.fatal() or err.code() == KafkaError._FATAL):
            with self._lock:
                if generation == self._generation:
                    self._retired.append((self._producer, generation))
                    self._producer, self._generation = self._new_producer(), generation + 1

    def _serve(self, producer: Producer, generation: int, timeout: float, *, flush: bool = False) -> int:
        """Poll (or flush) one producer: its delivery reports' callbacks run here. A fatal error is
        raised by the call that meets it, once (not passed to error_cb): the producer is replaced,
        and the call goes on for the reports left (the failed append's, those purged from its queue)."""
        try:
            return producer.flush(timeout) if flush else producer.poll(timeout)
        except KafkaException as exc:
            if not (exc.args and isinstance(exc.args[0], KafkaError) and exc.args[0].fatal()):
                raise
            self._after_failure(exc.args[0], generation)
            return producer.flush(timeout) if flush else producer.poll(0)

    def _serve_delivery_reports(self) -> None:
        """The poll thread: delivery reports (their callbacks run here), a retired producer's last
        ones, and the appends whose report is overdue."""
        while not self._closed:
            with self._lock:
                producer, generation, retired = self._producer, self._generation, list(self._retired)
            self._serve(producer, generation, POLL_SECONDS * 2)
            for old, old_generation in retired:
                self._serve(old, old_generation, 0)
                if len(old) == 0:  # nothing queued, in flight or left to report: dropped
                    with self._lock:
                        self._retired.remove((old, old_generation))
            self._overdue(time.monotonic())

    def _overdue(self, now: float | None) -> None:
        """Fail the appends with no delivery report by ``now`` (None: every one left, at close)."""
        late = []
        with self._lock:
            while self._delivering:
                seq, append = next(iter(self._delivering.items()))
                if now is not None and append.deadline > now:
                    break
                del self._delivering[seq]
                late.append(append)
        for append in late:
            append.future.set_exception(OutboxError("no delivery report for the outbox append", topic=self.topic,
                                                     **append.facts()))

    def flush(self, timeout: float) -> int:
        """Wait for queued appends (a retired producer's too); returns how many are still undelivered."""
        with self._lock:
            producers = [*self._retired, (self._producer, self._generation)]
        return sum(self._serve(producer, generation, timeout, flush=True) for producer, generation in producers)

    def close(self, timeout: float) -> None:
        """Flush, then stop the poll thread; an append still in flight fails (OutboxError), a later
        one at once."""
        self.flush(timeout)
        with self._lock:
            self._closed = True
        self.thread.join(timeout=10)
        self._overdue(None)
