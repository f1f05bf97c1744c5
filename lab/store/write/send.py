"""The send path, design §5.1, with crash points between every step (lab.store.plumbing.faults).

    0  the request checked itself when built (SendRequest), the store's size limits here
    2  allocate conversation_seq / message_id / last_activity_id   (lab.store.write.sequence)
       seal the payload                                            (lab.store.rows.records)
    1  client_dedup reserve: INSERT ... IF NOT EXISTS, state=RESERVED, carrying the ids
    3  message_record + message_index, USING TTL of the retention class   (skipped in archiver mode)
    4  outbox append                                               (lab.store.outbox)
    5  client_dedup state=COMMITTED
    6  SEND_ACK
    7  conversation_head update on a background thread             (lab.store.write.head_writer)

The steps are one walk (lab.store.plumbing.steps): ``send`` drives it on the calling thread,
``send_async`` on the driver's event loop. Why 2 before 1, retries and resumes, write times,
retention: docs/store-internals.md.
"""
from __future__ import annotations

import functools
import uuid
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lab.cluster.connection import Stmt
from lab.store.plumbing.context import StoreContext
from lab.store.plumbing.steps import Blocking, BlockingPool, Cql, Walk, run, start_prepared
from lab.errors import InvalidId, NotFound, PayloadTooLarge, UnknownEnum, ValidationError
from lab.store.write.head import HeadUpdate
from lab.store.write.fencing import Fencing
from lab.store.write.head_writer import HeadWriter
from lab.store.rows.ids import blob_to_u128, check_conversation_seq, check_text_key, parse_uuid, seq_bucket, u128_to_blob
from lab.store.rows.media import MediaMetadata, MentionTargets
from lab.store.rows.model import DedupState, MessageType, RetentionClass, parse_enum
from lab.store.outbox import MessagePayload, Outbox, OutboxEntry, OutboxRecord
from lab.store.rows.records import MESSAGE_RECORD_COLUMNS, MESSAGE_RECORD_KEY, EncodedRecord, Message, encode_record
from lab.store.plumbing.wall_clock import US_PER_MS
from lab.store.rows.retention import parse_retention_class
from lab.store.write.sequence import SequenceAllocator

if TYPE_CHECKING:
    from lab.store.hot.redis_window import HotWindow

__all__ = ["CLIENT_MESSAGE_ID_MAX_CHARS", "COMMIT_CQL", "RECORD_CQL", "RESERVE_CQL", "SendAck", "SendPath", "SendRequest",
           "message_log_record", "record_statements"]

# The design gives no limit; 128 characters holds any UUID/ULID-style client id with room,
# and bounds the partition key of client_dedup.
CLIENT_MESSAGE_ID_MAX_CHARS = 128
CUSTOM_TYPE_MAX_CHARS = 128
BLOCKING_WORKERS = 4  # send_async's blocking steps (a new sequence window, a retry's resume, the hot window)
_DEDUP_KEY = ("tenant_id", "sender_id", "client_message_id")
_STORED_ROW_CQL = (f"SELECT {', '.join(MESSAGE_RECORD_COLUMNS)} FROM {{ks}}.message_record WHERE tenant_id = ? "
                   "AND conversation_id = ? AND seq_bucket = ? AND conversation_seq = ?")
# Step 1 and step 5 (module constants: the benchmark's send_floor issues these very texts)
RESERVE_CQL = ("INSERT INTO {ks}.client_dedup (tenant_id, sender_id, client_message_id, message_id, conversation_seq, "
               "state, created_at) VALUES (?, ?, ?, ?, ?, ?, ?) IF NOT EXISTS")
COMMIT_CQL = ("UPDATE {ks}.client_dedup USING TTL ? SET state = ?, message_id = ?, conversation_seq = ?, created_at = ? "
              "WHERE tenant_id = ? AND sender_id = ? AND client_message_id = ?")
# the commit path's / archiver's upserts by "with USING TIMESTAMP" (built once: the texts are the cache keys)
_USING = {False: "USING TTL ?", True: "USING TTL ? AND TIMESTAMP ?"}
_RECORD_INSERT = {timed: f"INSERT INTO {{ks}}.message_record ({', '.join(MESSAGE_RECORD_COLUMNS)}) "
                         f"VALUES ({', '.join('?' * len(MESSAGE_RECORD_COLUMNS))}) {using}"
                  for timed, using in _USING.items()}
_INDEX_INSERT = {timed: "INSERT INTO {ks}.message_index (tenant_id, message_id, conversation_id, conversation_seq, "
                        f"seq_bucket) VALUES (?, ?, ?, ?, ?) {using}" for timed, using in _USING.items()}
RECORD_CQL = (*_RECORD_INSERT.values(), *_INDEX_INSERT.values())  # every text record_statements issues


def _check_text(name: str, value: object, *, max_chars: int, error: type[ValidationError],
                key: bool = False) -> str:
    if not isinstance(value, str):
        raise error(f"{name} must be a str, got {type(value).__name__}", field=name, value=value)
    if not value or len(value) > max_chars:
        raise error(f"{name} must have 1..{max_chars} characters, got {len(value)}", field=name, value=value)
    if key:  # a key (client_message_id): UTF-8 and no control characters (lab.store.rows.ids.check_text_key)
        return check_text_key(value, field=name, error=error)
    try:
        value.encode("utf-8")  # CQL text is UTF-8; lone surrogates would fail at bind time
    except UnicodeEncodeError:
        raise error(f"{name} is not valid UTF-8", field=name, value=value) from None
    return value


@dataclass(frozen=True, kw_only=True)
class SendRequest:
    """What a client sends, checked and normalised when it is built: ids may be UUIDs or their
    strings, enums members, ints or names; anything else is a typed ValidationError (InvalidId,
    UnknownEnum, Bit63Violation, ...) before the store sees it, so a bad request never reaches
    a write. The size limits are the store's own (its constants): :meth:`check_limits`, which
    ``send`` calls first."""

    tenant_id: uuid.UUID
    conversation_id: uuid.UUID
    sender_id: uuid.UUID
    sender_device_id: uuid.UUID
    client_message_id: str
    body: bytes = field(default=b"", repr=False)
    message_type: MessageType = MessageType.TEXT
    media: MediaMetadata | None = None
    mentions: MentionTargets | None = None
    reply_to_conversation_seq: int | None = None
    retention_class: RetentionClass = RetentionClass.DEFAULT
    e2ee: bool = False
    custom_type: str | None = None

    def __post_init__(self) -> None:
        set_ = functools.partial(object.__setattr__, self)
        for name in ("tenant_id", "conversation_id", "sender_id", "sender_device_id"):
            set_(name, parse_uuid(getattr(self, name)))
        set_("client_message_id", _check_text("client_message_id", self.client_message_id,
                                              max_chars=CLIENT_MESSAGE_ID_MAX_CHARS, error=InvalidId, key=True))
        if not isinstance(self.body, (bytes, bytearray, memoryview)):
            raise ValidationError(f"body must be bytes, got {type(self.body).__name__}", field="body")
        set_("body", bytes(self.body))
        message_type = parse_enum(MessageType, self.message_type)
        if message_type is MessageType.CONTROL:  # CONTROL events are the store's own (recall/edit)
            raise UnknownEnum("message_type CONTROL is reserved for recall/edit events", enum="MessageType",
                              value=self.message_type)
        set_("message_type", message_type)
        if self.custom_type is not None:
            _check_text("custom_type", self.custom_type, max_chars=CUSTOM_TYPE_MAX_CHARS, error=ValidationError)
        if self.media is not None and not isinstance(self.media, MediaMetadata):
            raise ValidationError("media must be a lab.store.MediaMetadata", field="media")
        if self.mentions is not None and not isinstance(self.mentions, MentionTargets):
            raise ValidationError("mentions must be a lab.store.MentionTargets", field="mentions")
        if self.reply_to_conversation_seq is not None:
            set_("reply_to_conversation_seq",
                 check_conversation_seq(self.reply_to_conversation_seq, column="reply_to_conversation_seq"))
        if not isinstance(self.e2ee, bool):
            raise ValidationError(f"e2ee must be a bool, got {self.e2ee!r}", field="e2ee")
        set_("retention_class", parse_retention_class(self.retention_class))

    def check_limits(self, *, payload_max_bytes: int, thumbnail_max_bytes: int) -> None:
        """PayloadTooLarge when the body or the media thumbnail is over a store's limits."""
        if len(self.body) > payload_max_bytes:
            raise PayloadTooLarge(f"body is {len(self.body)} B, over the {payload_max_bytes} B limit",
                                  field="body", size=len(self.body), limit=payload_max_bytes)
        if self.media is not None:
            self.media.encode(thumbnail_max_bytes=thumbnail_max_bytes)  # raises PayloadTooLarge


@dataclass(frozen=True, kw_only=True)
class SendAck:
    """SEND_ACK: the message is COMMITTED (§11.2), not that anyone received it."""

    message_id: int
    conversation_seq: int
    last_activity_id: int
    created_at_ms: int
    replayed: bool = False


def record_statements(ctx: StoreContext, record: EncodedRecord, ttl_seconds: int, *,
                      timestamp_us: int | None = None, index: bool = True) -> list[tuple[Stmt, tuple]]:
    """The message_record + message_index upserts of one message (commit path, archiver,
    seeding; ``index=False`` leaves message_index out).

    ``timestamp_us`` (archiver) pins the write time to the message's creation, so a recall
    or edit that reached the row first (a later timestamp) wins over the late archive.
    """
    timed = timestamp_us is not None
    extra = (ttl_seconds, timestamp_us) if timed else (ttl_seconds,)
    statements = [(ctx.prepare(_RECORD_INSERT[timed]), record.values() + extra)]
    if index:
        statements.append((ctx.prepare(_INDEX_INSERT[timed]), record.index_values() + extra))
    return statements


def message_log_record(record: EncodedRecord) -> OutboxRecord:
    """Step 4's log record of one message: its encoded row (the archiver and the hot window rebuild
    the row from it). The send path and the seeder's ``log_append`` (the benchmark's send floor)
    append exactly this."""
    return OutboxRecord(tenant_id=record.tenant_id, conversation_id=record.conversation_id,
                        conversation_seq=record.conversation_seq, payload=MessagePayload(record=record))


class SendPath:
    def __init__(self, ctx: StoreContext, *, outbox: Outbox, sequences: SequenceAllocator, head: HeadWriter,
                 archiver_mode: bool = False, hot: HotWindow | None = None, fencing: Fencing | None = None) -> None:
        self.ctx = ctx
        self.outbox = outbox
        self.sequences = sequences
        self.head = head
        self.fencing = fencing if fencing is not None else head.fencing
        self.archiver_mode = archiver_mode
        self.hot = hot  # archiver mode's hot window (lab.store.hot.redis_window.HotWindow), or None
        self._pool = BlockingPool(BLOCKING_WORKERS, "send-blocking")  # send_async's blocking steps
        self._prepared = False  # send_async's statements prepared (on a caller's thread)

    # -- the path -----------------------------------------------------------------------------
    def send(self, req: SendRequest) -> SendAck:
        """The send on the calling thread."""
        return run(self.walk(req), self.ctx.connection)

    def send_async(self, req: SendRequest) -> Future[SendAck]:
        """The same steps chained on the driver's event loop; the future gets the ack or the error
        ``send`` raises. A retry's resume (rare, several reads) runs whole in the path's pool."""
        return start_prepared(self.walk(req), self.ctx.connection, self._pool, self._prepare)

    def _prepare(self) -> None:
        """Every statement of the walk (once: the context keeps them, the walk's prepares are lookups)."""
        if not self._prepared:
            for cql in (RESERVE_CQL, COMMIT_CQL, *RECORD_CQL):
                self.ctx.prepare(cql)
            self.fencing.prepare()
            self._prepared = True

    def close(self) -> None:
        """Stop the blocking steps' pool (after the steps queued in it)."""
        self._pool.close()

    def walk(self, req: SendRequest) -> Walk[SendAck]:
        """Steps 0-7 (module docstring) as a walk (lab.store.plumbing.steps)."""
        if not isinstance(req, SendRequest):
            raise ValidationError(f"send takes a SendRequest, got {type(req).__name__}", field="request")
        c = self.ctx.constants
        req.check_limits(payload_max_bytes=c.payload_max_bytes, thumbnail_max_bytes=c.media_thumbnail_max_bytes)
        yield from self.fencing.admit_steps(req.tenant_id, req.conversation_id)  # Fenced here, before any write
        alloc = self.sequences.allocate_now(req.tenant_id, req.conversation_id)  # Bit63Violation here, before writes
        if alloc is None:  # a new window: a durable reservation (a file write) first
            alloc = yield Blocking(functools.partial(self.sequences.allocate, req.tenant_id, req.conversation_id))
        if not self.ctx.encryptor.sealing_key_ready(req.tenant_id, req.conversation_id):  # a key store read
            yield Blocking(functools.partial(self.ctx.encryptor.load_sealing_key, req.tenant_id, req.conversation_id))
        created_at_ms = self.ctx.clock_ms()
        # Seal before reserving: a failure here (e.g. an erased conversation) leaves no reservation behind.
        record = self._encode(req, message_id=alloc.message_id, seq=alloc.conversation_seq,
                              last_activity_id=alloc.last_activity_id, created_at_ms=created_at_ms)
        self.ctx.faults.hit("after_allocate")
        (rows,) = yield Cql(((self.ctx.prepare(RESERVE_CQL),
                              (req.tenant_id, req.sender_id, req.client_message_id, u128_to_blob(alloc.message_id),
                               alloc.conversation_seq, int(DedupState.RESERVED), created_at_ms)),))
        reservation = rows[0]  # not applied: the row carries the existing reservation's columns
        if reservation[0]:
            self.ctx.faults.hit("after_reserve")
            return (yield from self._finish_steps(req, record, entry=None, replayed=False))
        return (yield Blocking(functools.partial(self._retry, req, reservation)))

    def _retry(self, req: SendRequest, existing: Any) -> SendAck:
        message_id = blob_to_u128(existing.message_id)
        seq, created_at_ms = existing.conversation_seq, existing.created_at
        entry = self.outbox.get(req.tenant_id, req.conversation_id, seq)
        if entry is not None and not _holds(entry, message_id):
            entry = None  # that seq of *this* conversation is another message: see the checks below
        if existing.state == DedupState.COMMITTED:
            last_activity_id = self._committed_activity_id(req, seq, message_id, entry)
            ack = SendAck(message_id=message_id, conversation_seq=seq, last_activity_id=last_activity_id,
                          created_at_ms=created_at_ms, replayed=True)
            # The first attempt may have died before step 7; an equal head is a no-op.
            self._submit_head(req, ack)
            return ack
        # Resume: write only what is missing (module docstring).
        stored = self._stored_row(req, seq)
        if stored is not None and stored.message_id != u128_to_blob(message_id):
            raise InvalidId("client_message_id is reserved for another conversation's message",
                            field="client_message_id", value=req.client_message_id, conversation_seq=seq)
        if entry is None:  # a concurrent attempt of this same send may have appended since the first look
            entry = self.outbox.get(req.tenant_id, req.conversation_id, seq)
            if entry is not None and not _holds(entry, message_id):
                raise InvalidId("client_message_id is reserved for another conversation's message",
                                field="client_message_id", value=req.client_message_id, conversation_seq=seq)
        if entry is not None:
            record = _logged_record(entry)
            # the row is missing (a resume in archiver mode, an expired row) or another attempt's
            write = stored is None or stored.last_activity_id != record.last_activity_id
            return self._finish(req, record, entry=entry, replayed=True, write=write, above=stored is not None)
        if stored is not None:  # the first attempt's row, with whatever happened to it since
            return self._finish(req, stored, entry=None, replayed=True, write=False)
        record = self._encode(req, message_id=message_id, seq=seq,
                              last_activity_id=self.sequences.next_activity_id(), created_at_ms=created_at_ms)
        return self._finish(req, record, entry=None, replayed=True)

    def _finish(self, req: SendRequest, record: EncodedRecord, *, entry: OutboxEntry | None,
                replayed: bool, write: bool = True, above: bool = False) -> SendAck:
        """Steps 3-7 on the calling thread (a retry's resume)."""
        return run(self._finish_steps(req, record, entry=entry, replayed=replayed, write=write, above=above),
                   self.ctx.connection)

    def _finish_steps(self, req: SendRequest, record: EncodedRecord, *, entry: OutboxEntry | None,
                      replayed: bool, write: bool = True, above: bool = False) -> Walk[SendAck]:
        """Steps 3-7 with the ids in ``record``; each write is an idempotent upsert at the
        message's write time (``above``: one µs over it, to beat another attempt's cells).
        ``write=False``: the row (or hot copy) is already the message's and is left alone."""
        seq, created_at_ms = record.conversation_seq, record.created_at
        if write and not self.archiver_mode:
            yield from self._write_record(req, record, above=above)
        elif write and self.hot is not None and entry is None:  # archiver mode: step 3 writes the hot window
            # (§2.1 note); with an entry logged, the first attempt put it already
            yield Blocking(functools.partial(self.hot.put, record))
        self.ctx.faults.hit("after_record")
        if entry is None:
            logged = message_log_record(record)
            entry = yield Blocking(functools.partial(self.outbox.append, logged),
                                   functools.partial(self.outbox.append_async, logged))
            if entry.duplicate:  # first append wins; a fresh entry holds our own record
                winner = _logged_record(entry)
                if write and winner.last_activity_id != record.last_activity_id:
                    # A concurrent attempt of this same send (another thread, process or node
                    # that found our reservation) appended first, with its own last_activity_id
                    # and sealing. Its entry is what every ack names, so what we just wrote is
                    # overwritten with it: log, row and ack agree whoever wrote last.
                    if not self.archiver_mode:
                        yield from self._write_record(req, winner, above=True)
                    elif self.hot is not None:  # only if our copy is still there, unchanged
                        yield Blocking(functools.partial(self.hot.swap, record, winner))
                record = winner
        self.ctx.faults.hit("after_outbox")
        yield self._commit(req, record)
        self.ctx.faults.hit("after_commit")
        ack = SendAck(message_id=blob_to_u128(record.message_id), conversation_seq=seq,
                      last_activity_id=blob_to_u128(record.last_activity_id), created_at_ms=created_at_ms,
                      replayed=replayed)
        self.ctx.faults.hit("before_ack")
        self._submit_head(req, ack)
        return ack

    # -- steps --------------------------------------------------------------------------------
    def _write_record(self, req: SendRequest, record: EncodedRecord, *, above: bool = False) -> Walk[None]:
        """Step 3: message_record + message_index with the remaining TTL of the class, at the
        message's write time (its created_at; ``above``: 1 µs over it)."""
        ttl = self.ctx.retention.remaining_ttl_seconds(req.retention_class, req.tenant_id,
                                                       created_at_ms=record.created_at, now_ms=self.ctx.clock_ms())
        if ttl is not None:  # None: already expired (a resume past a short TTL): nothing to keep
            written_at_us = record.created_at * US_PER_MS + (1 if above else 0)
            yield Cql(tuple(record_statements(self.ctx, record, ttl, timestamp_us=written_at_us)))

    def _encode(self, req: SendRequest, *, message_id: int, seq: int, last_activity_id: int,
                created_at_ms: int) -> EncodedRecord:
        c = self.ctx.constants
        message = Message(
            tenant_id=req.tenant_id, conversation_id=req.conversation_id,
            seq_bucket=seq_bucket(seq, c.message_seq_bucket_width), conversation_seq=seq, message_id=message_id,
            last_activity_id=last_activity_id, sender_id=req.sender_id, sender_device_id=req.sender_device_id,
            client_message_id=req.client_message_id, message_type=req.message_type, custom_type=req.custom_type,
            body=req.body, e2ee=req.e2ee, media=req.media, reply_to_conversation_seq=req.reply_to_conversation_seq,
            mentions=req.mentions, created_at_ms=created_at_ms, retention_class=req.retention_class)
        return encode_record(message, self.ctx.encryptor, bucket_width=c.message_seq_bucket_width,
                             thumbnail_max_bytes=c.media_thumbnail_max_bytes)

    def _commit(self, req: SendRequest, record: EncodedRecord) -> Cql:
        """Step 5. Rewrites the ids with the state and the row's *remaining* dedup TTL, so the
        COMMITTED cell never outlives the ids it vouches for."""
        window_ms = self.ctx.constants.client_dedup_ttl_seconds * 1000
        ttl = max(1, -(-(record.created_at + window_ms - self.ctx.clock_ms()) // 1000))
        return Cql(((self.ctx.prepare(COMMIT_CQL),
                     (min(ttl, self.ctx.constants.client_dedup_ttl_seconds), int(DedupState.COMMITTED),
                      record.message_id, record.conversation_seq, record.created_at, req.tenant_id,
                      req.sender_id, req.client_message_id)),))

    def _submit_head(self, req: SendRequest, ack: SendAck) -> None:
        self.head.submit(HeadUpdate(tenant_id=req.tenant_id, conversation_id=req.conversation_id,
                                    conversation_seq=ack.conversation_seq, message_id=ack.message_id,
                                    last_activity_id=ack.last_activity_id, sender_id=req.sender_id,
                                    preview=req.body, e2ee=req.e2ee))

    # -- retry helpers ------------------------------------------------------------------------
    def _stored_row(self, req: SendRequest, seq: int) -> EncodedRecord | None:
        """The whole message_record row at this coordinate, as it stands (one point read; retries
        only), or None when there is none (or only cells of a row never written whole)."""
        stmt = self.ctx.prepare(_STORED_ROW_CQL, key_columns=MESSAGE_RECORD_KEY)
        row = self.ctx.connection.execute(stmt, (req.tenant_id, req.conversation_id,
                                                 seq_bucket(seq, self.ctx.constants.message_seq_bucket_width),
                                                 seq)).one()
        return None if row is None or row.message_id is None else EncodedRecord.of(dict(zip(MESSAGE_RECORD_COLUMNS, row)))

    def _committed_activity_id(self, req: SendRequest, seq: int, message_id: int, entry: OutboxEntry | None) -> int:
        if entry is not None:
            return blob_to_u128(_logged_record(entry).last_activity_id)
        stored = self._stored_row(req, seq)
        if stored is not None and stored.message_id == u128_to_blob(message_id):
            return blob_to_u128(stored.last_activity_id)
        raise NotFound("client_message_id was committed for a message this conversation does not hold "
                       "(was it reused for another conversation?)", tenant_id=req.tenant_id,
                       conversation_id=req.conversation_id, client_message_id=req.client_message_id,
                       conversation_seq=seq)


def _holds(entry: OutboxEntry, message_id: int) -> bool:
    """Whether a log entry is the message ``message_id`` (not another message, not a CONTROL event)."""
    payload = entry.record.payload
    return isinstance(payload, MessagePayload) and payload.record.message_id == u128_to_blob(message_id)


def _logged_record(entry: OutboxEntry) -> EncodedRecord:
    """The sealed record a logged message carries (what every ack of it names)."""
    payload = entry.record.payload
    if not isinstance(payload, MessagePayload):  # a CONTROL event holds that key: not this message
        raise InvalidId("the log holds a CONTROL event at this message's coordinate", kind=entry.record.kind,
                        conversation_seq=entry.record.conversation_seq)
    return payload.record
