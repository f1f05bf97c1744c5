"""Seeding (``store.seeding``): messages written the way the store's own paths write them,
without going through ``send``. For benchmarks, experiments, migrations and the read-side
tests, which need thousands of rows, or shapes (holes, old created_at, chosen seqs) that the
send path cannot make quickly.

More: docs/store-internals.md.
"""
from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

from lab.cluster.connection import Stmt
from lab.errors import ValidationError
from lab.store.plumbing.context import StoreContext
from lab.store.rows.ids import IdLike, parse_uuid, seq_bucket
from lab.store.rows.model import DedupState, MessageType, RetentionClass
from lab.store.rows.records import MESSAGE_RECORD_COLUMNS, EncodedRecord, Message, encode_record
from lab.store.write.head import HeadUpdate
from lab.store.write.head_writer import HeadWriter
from lab.store.outbox import Outbox, OutboxEntry, OutboxRecord
from lab.store.write.send import COMMIT_CQL, RESERVE_CQL, SendAck, message_log_record, record_statements
from lab.store.write.sequence import Allocation, SequenceAllocator

__all__ = ["DEDUP_COMMIT_CQL", "DEDUP_RESERVE_CQL", "FULL_TTL", "SEED_CONCURRENCY", "STAMP_NOW", "Seeder"]

SEED_CONCURRENCY = 64  # plain upserts in flight while seeding
# ttl_seconds="full": the class's whole period from now, whatever the row's created_at (bulk loads
# of workload rows whose created_at lie in the past, which the remaining period would expire)
FULL_TTL = "full"
TtlChoice = int | Literal["full"] | None
# timestamp_us="now": each message's upserts stamped (USING TIMESTAMP) with the microsecond its
# statements are built, one write time per row as the commit path's single upsert has
STAMP_NOW = "now"
StampChoice = int | Literal["now"] | None
# client_dedup as the send path leaves it: step 1's reservation (row liveness and cells at the
# message's write time, the table's default TTL) overwritten by step 5's COMMITTED update, whose
# cells carry a later write time of their own. The send path's very texts, the reservation
# without IF NOT EXISTS (no Paxos round: seeding writes no duplicates) and both with a pinned
# write time so the commit is the later write whatever order they land in. On disk each of the
# row's four regular cells then stores its own timestamp (in one INSERT they share the row's):
# more bytes a row on the node (docs/measurements.md; tests/node/test_model_check.py).
DEDUP_RESERVE_CQL = RESERVE_CQL.replace(" IF NOT EXISTS", " USING TIMESTAMP ?")
DEDUP_COMMIT_CQL = COMMIT_CQL.replace("USING TTL ?", "USING TTL ? AND TIMESTAMP ?")
# the commit's write time after the reservation's: any later microsecond stores the same bytes
# (a cell's timestamp is encoded as its distance from the SSTable's oldest, not from its row's)
DEDUP_COMMIT_AFTER_US = 1


class Seeder:
    """Writes pre-built :class:`~lab.store.rows.records.Message` rows into one store's tables."""

    record_columns = MESSAGE_RECORD_COLUMNS  # the order of :meth:`record_values`

    def __init__(self, ctx: StoreContext, sequences: SequenceAllocator, head: HeadWriter,
                 log: Outbox | None = None) -> None:
        self._ctx = ctx
        self._sequences = sequences
        self._head = head
        self._log = log

    def allocate(self, tenant_id: IdLike, conversation_id: IdLike) -> Allocation:
        """The next conversation_seq of this writer with fresh message_id / last_activity_id,
        exactly as ``send`` would allocate them (§5.1 step 2)."""
        return self._sequences.allocate(parse_uuid(tenant_id), parse_uuid(conversation_id))

    def record_values(self, message: Message) -> tuple[Any, ...]:
        """The message sealed as the store seals it, as bind values in :attr:`record_columns`
        order: for an experiment writing message_record rows into tables of its own."""
        return self._encode(message).values()

    def _encode(self, message: Message) -> EncodedRecord:
        if not isinstance(message, Message):
            raise ValidationError(f"seeding takes lab.store.Message rows, got {type(message).__name__}",
                                  field="message")
        ctx = self._ctx
        return encode_record(message, ctx.encryptor, bucket_width=ctx.bucket_width,
                             thumbnail_max_bytes=ctx.constants.media_thumbnail_max_bytes)

    def statements(self, message: Message, *, ttl_seconds: TtlChoice = None, timestamp_us: StampChoice = None,
                   index: bool = True, dedup: bool = False) -> list[tuple[Stmt, tuple]]:
        """The upserts of one message, for callers that batch their own concurrency.

        ``ttl_seconds``: None = the remaining period of the message's class from its
        created_at (an expired message yields no statement); ``"full"`` (:data:`FULL_TTL`) = the
        class's whole period from now; an int = that TTL (0 = none).
        ``timestamp_us`` pins the write time (``USING TIMESTAMP``; ``"now"``, :data:`STAMP_NOW`:
        the current microsecond, per message); ``index`` writes
        message_index too; ``dedup`` adds the client_dedup row as the send path leaves it: the
        reservation at the write time (``timestamp_us``, or now when None) and the COMMITTED update
        :data:`DEDUP_COMMIT_AFTER_US` later with the full dedup TTL (the send path's commit TTL for
        a message committed within a second of its reservation).
        """
        ctx = self._ctx
        if not isinstance(message, Message):
            raise ValidationError(f"seeding takes lab.store.Message rows, got {type(message).__name__}",
                                  field="message")
        if ttl_seconds is None:
            ttl_seconds = ctx.retention.remaining_ttl_seconds(message.retention_class, message.tenant_id,
                                                              created_at_ms=message.created_at_ms,
                                                              now_ms=ctx.clock_ms())
            if ttl_seconds is None:
                return []
        elif ttl_seconds == FULL_TTL:
            ttl_seconds = ctx.retention.ttl_seconds(message.retention_class, message.tenant_id)
        if timestamp_us == STAMP_NOW:
            timestamp_us = time.time_ns() // 1000
        record = self._encode(message)
        items = record_statements(ctx, record, ttl_seconds, timestamp_us=timestamp_us, index=index)
        if dedup:
            items += self._dedup_statements(record, time.time_ns() // 1000 if timestamp_us is None else timestamp_us)
        return items

    def _dedup_statements(self, record: EncodedRecord, reserved_at_us: int) -> list[tuple[Stmt, tuple]]:
        ctx = self._ctx
        key = (record.tenant_id, record.sender_id, record.client_message_id)
        reserve = (ctx.prepare(DEDUP_RESERVE_CQL), key + (record.message_id, record.conversation_seq,
                                                          int(DedupState.RESERVED), record.created_at, reserved_at_us))
        commit = (ctx.prepare(DEDUP_COMMIT_CQL), (ctx.constants.client_dedup_ttl_seconds,
                                                  reserved_at_us + DEDUP_COMMIT_AFTER_US, int(DedupState.COMMITTED),
                                                  record.message_id, record.conversation_seq, record.created_at) + key)
        return [reserve, commit]

    def log_append(self, message: Message) -> Callable[[], OutboxEntry]:
        """The message's outbox append exactly as the commit path's step 4 makes it
        (:meth:`log_record`), sealed and serialised now; calling the result appends it to this
        store's log, durably, through the log's group commit. For the benchmark's send floor,
        which pays the log's own cost and no encoding."""
        if self._log is None:
            raise ValidationError("this seeder has no log to append to", field="log")
        return self._log.prepare(self.log_record(message))

    def log_record(self, message: Message) -> OutboxRecord:
        """The log record the commit path's step 4 appends for the message
        (``lab.store.write.send.message_log_record``), sealed now, for a caller's own log: the
        benchmark's event-driven send floor appends it through ``Outbox.append_async``."""
        return message_log_record(self._encode(message))

    def write(self, messages: Iterable[Message], *, ttl_seconds: TtlChoice = None,
              timestamp_us: StampChoice = None, index: bool = True, dedup: bool = False,
              concurrency: int = SEED_CONCURRENCY) -> int:
        """Write every message (see :meth:`statements`), ``concurrency`` upserts in flight;
        returns how many were written (expired ones are not)."""
        written = 0
        chunk: list[tuple[Stmt, tuple]] = []
        for message in messages:
            items = self.statements(message, ttl_seconds=ttl_seconds, timestamp_us=timestamp_us, index=index,
                                    dedup=dedup)
            written += bool(items)
            chunk += items
            if len(chunk) >= 4 * concurrency:
                self._execute(chunk, concurrency)
                chunk = []
        if chunk:
            self._execute(chunk, concurrency)
        return written

    def conversation(self, tenant_id: IdLike, conversation_id: IdLike, bodies: Sequence[bytes], *,
                     sender_id: IdLike | None = None, client_message_ids: Sequence[str] | None = None,
                     retention_class: RetentionClass = RetentionClass.DEFAULT,
                     concurrency: int = SEED_CONCURRENCY) -> list[SendAck]:
        """New TEXT messages at the end of one conversation, one per body, as if sent now by one
        sender: ids from the store's allocator, rows written as :meth:`write` writes them (the
        class's remaining TTL), and the conversation head set to the last one. Returns an ack per
        message, in order, so callers can address them (batch entries, anchors)."""
        tenant_id, conversation_id = parse_uuid(tenant_id), parse_uuid(conversation_id)
        sender_id = parse_uuid(sender_id) if sender_id is not None else uuid.uuid4()
        if client_message_ids is None:
            client_message_ids = [str(uuid.uuid4()) for _ in bodies]
        if len(client_message_ids) != len(bodies):
            raise ValidationError("one client_message_id per body", field="client_message_ids")
        if not bodies:
            return []
        now_ms = self._ctx.clock_ms()
        messages, acks = [], []
        for i, (body, client_id) in enumerate(zip(bodies, client_message_ids)):
            alloc = self.allocate(tenant_id, conversation_id)
            messages.append(Message(
                tenant_id=tenant_id, conversation_id=conversation_id,
                seq_bucket=seq_bucket(alloc.conversation_seq, self._ctx.bucket_width),
                conversation_seq=alloc.conversation_seq, message_id=alloc.message_id,
                last_activity_id=alloc.last_activity_id, sender_id=sender_id, sender_device_id=sender_id,
                client_message_id=client_id, message_type=MessageType.TEXT, body=body, created_at_ms=now_ms + i,
                retention_class=retention_class))
            acks.append(SendAck(message_id=alloc.message_id, conversation_seq=alloc.conversation_seq,
                                last_activity_id=alloc.last_activity_id, created_at_ms=now_ms + i))
        self.write(messages, concurrency=concurrency)
        last = messages[-1]
        self._head.apply(HeadUpdate(tenant_id=tenant_id, conversation_id=conversation_id,
                                    conversation_seq=last.conversation_seq, message_id=last.message_id,
                                    last_activity_id=last.last_activity_id, sender_id=sender_id, preview=last.body))
        return acks

    def _execute(self, statements: list[tuple[Stmt, tuple]], concurrency: int) -> Any:
        return self._ctx.connection.execute_concurrent(statements, concurrency=concurrency)
