"""Recall and edit (design §5.3) and their crash recovery (S-7): the CONTROL event goes to the
log first, then the row; recalled stays recalled; one recall event per message. Each is one walk
(lab.store.plumbing.steps): ``recall`` / ``edit`` drive it on the calling thread, ``recall_async``
/ ``edit_async`` on the driver's event loop.

More: docs/store-internals.md.
"""
from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lab.store.write.archiver import archive_statements
from lab.store.plumbing.context import StoreContext
from lab.errors import InvalidState, NotFound, PayloadTooLarge, ValidationError
from lab.store.rows.ids import IdLike, blob_to_u128, check_conversation_seq, parse_uuid, seq_bucket, u128_to_blob
from lab.store.rows.model import MessageState, RetentionClass, parse_enum
from lab.store.outbox import KIND_RECALL, EditEvent, MessagePayload, Outbox, OutboxEntry, OutboxRecord, RecallEvent
from lab.store.rows.model import DedupState
from lab.store.rows.records import MESSAGE_RECORD_KEY, seal_payload
from lab.store.write.fencing import Fencing
from lab.store.plumbing.steps import Blocking, BlockingPool, Cql, Walk, run, start_prepared
from lab.store.write.send import RECORD_CQL, RESERVE_CQL
from lab.store.write.sequence import Allocation, SequenceAllocator

if TYPE_CHECKING:
    from lab.store.hot.redis_window import HotWindow

__all__ = ["EditResult", "RECALL_DEDUP_KEY", "RecallPath", "RecallResult"]

# client_dedup key of a message's recall: sender_id = the conversation, this client_message_id
# (the unit separator cannot start a client's own client_message_id: lab.store.rows.ids.check_text_key)
RECALL_DEDUP_KEY = "\x1frecall/{seq}"
BLOCKING_WORKERS = 2  # the asynchronous calls' blocking steps: the log's reads and appends, the hot window
_ROW_KEY = "WHERE tenant_id = ? AND conversation_id = ? AND seq_bucket = ? AND conversation_seq = ?"
TARGET_CQL = ("SELECT message_id, state, recall_event_conversation_seq, edited_at_activity_id, "
              "WRITETIME(edited_at_activity_id) AS edited_written_us, TTL(created_at) AS ttl_seconds "
              f"FROM {{ks}}.message_record {_ROW_KEY}")
RECALL_CQL = ("UPDATE {ks}.message_record USING TTL ? AND TIMESTAMP ? SET state = ?, recall_event_conversation_seq = ? "
              + _ROW_KEY)
EDIT_CQL = ("UPDATE {ks}.message_record USING TTL ? AND TIMESTAMP ? SET payload_or_ciphertext = ?, dek_id = ?, "
            "edited_at_activity_id = ?, state = ? " + _ROW_KEY)
STATE_CQL = ("SELECT state, recall_event_conversation_seq, WRITETIME(state) AS state_written "
             f"FROM {{ks}}.message_record {_ROW_KEY}")
RESTORE_CQL = f"UPDATE {{ks}}.message_record USING TTL ? AND TIMESTAMP ? SET state = ? {_ROW_KEY}"


@dataclass(frozen=True, kw_only=True)
class RecallResult:
    conversation_seq: int                 # the recalled message
    recall_event_conversation_seq: int    # the CONTROL event's own coordinate
    activity_id: int | None
    replayed: bool = False                # the message was already recalled / the event already logged


@dataclass(frozen=True, kw_only=True)
class EditResult:
    conversation_seq: int
    edit_event_conversation_seq: int
    edited_at_activity_id: int
    written_at_us: int = 0                # the edit's write time: of a message's edits, the highest stands


@dataclass(frozen=True, kw_only=True)
class _Target:
    """What recall/edit need to know about the row they change."""

    tenant_id: uuid.UUID
    conversation_id: uuid.UUID
    conversation_seq: int
    bucket: int
    message_id: int
    ttl_seconds: int                      # for USING TTL; 0 = none
    state: MessageState
    recall_event_conversation_seq: int | None
    edited_at_activity_id: int | None
    edited_written_us: int | None = None   # WRITETIME(edited_at_activity_id): the standing edit's write time
    unarchived: OutboxEntry | None = None  # archiver mode: the logged message, not in message_record yet


class RecallPath:
    def __init__(self, ctx: StoreContext, *, outbox: Outbox, sequences: SequenceAllocator, fencing: Fencing,
                 on_change: Callable[[uuid.UUID, int], None] | None = None,
                 hot: HotWindow | None = None) -> None:
        self._hot = hot  # archiver mode's hot window: its copy gets every recall / edit too
        self.fencing = fencing
        self.ctx = ctx
        self.outbox = outbox
        self.sequences = sequences
        # Told (tenant_id, message_id) after every row change: the façade drops the message
        # from the batch-read body LRU, which would otherwise serve the old body/state.
        self._on_change = on_change or (lambda tenant_id, message_id: None)
        self._pool = BlockingPool(BLOCKING_WORKERS, "recall-blocking")  # the asynchronous calls' blocking steps
        self._prepared = False

    def _prepare(self) -> None:
        """Every statement of the walks, on a caller's thread (once: the context keeps them)."""
        if not self._prepared:
            for cql in (RESERVE_CQL, RECALL_CQL, EDIT_CQL, RESTORE_CQL, *RECORD_CQL):
                self.ctx.prepare(cql)
            for cql in (TARGET_CQL, STATE_CQL):
                self.ctx.prepare(cql, key_columns=MESSAGE_RECORD_KEY)
            self.fencing.prepare()
            self._prepared = True

    def close(self) -> None:
        """Stop the asynchronous calls' pool (after the steps queued in it)."""
        self._pool.close()

    def _log(self, record: OutboxRecord) -> Blocking:
        """The outbox append as a step: the log's own future where it has one."""
        return Blocking(functools.partial(self.outbox.append, record), functools.partial(self.outbox.append_async, record))

    # -- target row ---------------------------------------------------------------------------
    def _target(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID, seq: int) -> Walk[_Target | None]:
        bucket = seq_bucket(seq, self.ctx.bucket_width)
        stmt = self.ctx.prepare(TARGET_CQL, key_columns=MESSAGE_RECORD_KEY)
        (rows,) = yield Cql(((stmt, (tenant_id, conversation_id, bucket, seq)),))
        row = rows[0] if rows else None
        common = dict(tenant_id=tenant_id, conversation_id=conversation_id, conversation_seq=seq, bucket=bucket)
        changed = {} if row is None else dict(
            state=parse_enum(MessageState, row.state if row.state is not None else 0),
            recall_event_conversation_seq=row.recall_event_conversation_seq,
            edited_at_activity_id=None if row.edited_at_activity_id is None else blob_to_u128(row.edited_at_activity_id),
            edited_written_us=row.edited_written_us)
        if row is not None and row.message_id is not None:
            return _Target(**common, **changed, message_id=blob_to_u128(row.message_id), ttl_seconds=row.ttl_seconds or 0)
        # Archiver mode: committed but not archived yet (no row, or only the cells an earlier
        # recall/edit wrote). The log has the message, with what the TTL needs.
        entry = yield Blocking(functools.partial(self.outbox.get, tenant_id, conversation_id, seq))
        if entry is None or not isinstance(entry.record.payload, MessagePayload):
            return None
        logged = entry.record.payload.record
        ttl = self.ctx.retention.remaining_ttl_seconds(RetentionClass(logged.retention_class), tenant_id,
                                                       created_at_ms=logged.created_at, now_ms=self.ctx.clock_ms())
        if ttl is None:
            return None  # expired before it was archived: nothing left to recall
        changed = changed or dict(state=MessageState.NORMAL, recall_event_conversation_seq=None,
                                  edited_at_activity_id=None)
        return _Target(**common, **changed, message_id=blob_to_u128(logged.message_id), ttl_seconds=ttl,
                       unarchived=entry)

    def _ensure_whole(self, target: _Target) -> Walk[None]:
        """Archive a not-yet-archived target first, so the UPDATE after it lands on a whole row."""
        if target.unarchived is None:
            return
        statements = archive_statements(self.ctx, target.unarchived, now_ms=self.ctx.clock_ms())
        if statements is None:  # expired between the look-up and now: no row may be started
            raise NotFound(f"message at conversation_seq {target.conversation_seq} expired before it was archived",
                           tenant_id=target.tenant_id, conversation_id=target.conversation_id,
                           conversation_seq=target.conversation_seq)
        yield Cql(tuple(statements), concurrency=32)

    def _require_target(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID, seq: int) -> Walk[_Target]:
        target = yield from self._target(tenant_id, conversation_id, seq)
        if target is None:
            raise NotFound(f"no message at conversation_seq {seq}", tenant_id=tenant_id,
                           conversation_id=conversation_id, conversation_seq=seq)
        return target

    @staticmethod
    def _ids(tenant_id: IdLike, conversation_id: IdLike, seq: int,
             actor_id: IdLike) -> tuple[uuid.UUID, uuid.UUID, int, uuid.UUID]:
        return (parse_uuid(tenant_id), parse_uuid(conversation_id), check_conversation_seq(seq),
                parse_uuid(actor_id))

    def _allocate(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID) -> Walk[Allocation]:
        alloc = self.sequences.allocate_now(tenant_id, conversation_id)
        if alloc is None:  # a new window: a durable reservation (a file write) first
            alloc = yield Blocking(functools.partial(self.sequences.allocate, tenant_id, conversation_id))
        return alloc

    # -- recall -------------------------------------------------------------------------------
    def recall(self, tenant_id: IdLike, conversation_id: IdLike, conversation_seq: int, *,
               actor_id: IdLike) -> RecallResult:
        return run(self.recall_walk(tenant_id, conversation_id, conversation_seq, actor_id=actor_id),
                   self.ctx.connection)

    def recall_async(self, tenant_id: IdLike, conversation_id: IdLike, conversation_seq: int, *,
                     actor_id: IdLike) -> Future[RecallResult]:
        """The same steps on the driver's event loop; the future gets the result or ``recall``'s error."""
        return start_prepared(self.recall_walk(tenant_id, conversation_id, conversation_seq, actor_id=actor_id),
                              self.ctx.connection, self._pool, self._prepare)

    def recall_walk(self, tenant_id: IdLike, conversation_id: IdLike, conversation_seq: int, *,
                    actor_id: IdLike) -> Walk[RecallResult]:
        tenant_id, conversation_id, seq, actor_id = self._ids(tenant_id, conversation_id, conversation_seq, actor_id)
        yield from self.fencing.admit_steps(tenant_id, conversation_id)  # Fenced here, before anything is written
        target = yield from self._require_target(tenant_id, conversation_id, seq)
        logged = yield Blocking(functools.partial(self.outbox.controls_for, tenant_id, conversation_id, seq,
                                                  KIND_RECALL))
        if target.recall_event_conversation_seq is not None:
            yield from self._hot_recall(target, target.recall_event_conversation_seq)  # a hot copy left behind catches up
            activity = next((_activity(e) for e in logged
                             if e.record.conversation_seq == target.recall_event_conversation_seq), None)
            return RecallResult(conversation_seq=seq, recall_event_conversation_seq=target.recall_event_conversation_seq,
                                activity_id=activity, replayed=True)
        if logged:  # an earlier attempt logged its event and died: finish that one, never log a second
            entry, replayed = logged[0], True
        else:
            entry, replayed = yield from self._log_recall_once(target, actor_id)
        self.ctx.faults.hit("after_recall_log")
        yield from self._apply_recall(target, entry)
        self.ctx.faults.hit("after_recall_update")
        return RecallResult(conversation_seq=seq, recall_event_conversation_seq=entry.record.conversation_seq,
                            activity_id=_activity(entry), replayed=replayed)

    def _log_recall_once(self, target: _Target, actor_id: uuid.UUID) -> Walk[tuple[OutboxEntry, bool]]:
        """The message's one recall event, logged by whichever caller reserves it first (module
        docstring): (entry, replayed), replayed when another caller's reservation won."""
        alloc = yield from self._allocate(target.tenant_id, target.conversation_id)
        (rows,) = yield Cql(((self.ctx.prepare(RESERVE_CQL), (
            target.tenant_id, target.conversation_id, RECALL_DEDUP_KEY.format(seq=target.conversation_seq),
            u128_to_blob(target.message_id), alloc.conversation_seq, int(DedupState.RESERVED),
            self.ctx.clock_ms())),))
        row = rows[0]
        event_seq = alloc.conversation_seq if row[0] else row.conversation_seq  # ours, or the winner's
        if not row[0]:  # the winner may have logged already; if not (in flight, or dead), log it for it
            logged = yield Blocking(functools.partial(self.outbox.get, target.tenant_id, target.conversation_id,
                                                      event_seq))
            if logged is not None and isinstance(logged.record.payload, RecallEvent):
                return logged, True
        entry = yield self._log(self._event(target, alloc, seq=event_seq, payload=RecallEvent(
            actor_id=actor_id, activity_id=alloc.last_activity_id, created_at_ms=self.ctx.clock_ms(),
            written_at_us=alloc.written_at_us)))
        return entry, entry.duplicate or not row[0]

    @staticmethod
    def _event(target: _Target, alloc: Allocation, *, seq: int, payload: RecallEvent | EditEvent) -> OutboxRecord:
        return OutboxRecord(tenant_id=target.tenant_id, conversation_id=target.conversation_id, conversation_seq=seq,
                            target_seq=target.conversation_seq, payload=payload)

    def _key(self, target: _Target) -> tuple[uuid.UUID, uuid.UUID, int, int]:
        return (target.tenant_id, target.conversation_id, target.bucket, target.conversation_seq)

    def _apply_recall(self, target: _Target, entry: OutboxEntry) -> Walk[None]:
        yield from self._ensure_whole(target)
        # The hot copy before the row: a row that carries the recall tells every retry and
        # recovery that nothing is left to do, so it must be the last thing written.
        yield from self._hot_recall(target, entry.record.conversation_seq)
        yield Cql(((self.ctx.prepare(RECALL_CQL), (target.ttl_seconds, _write_time_us(entry),
                                                   int(MessageState.RECALLED), entry.record.conversation_seq,
                                                   *self._key(target))),))
        yield from self._keep_recalled(target)  # an edit racing this recall may have written a later state cell
        self._on_change(target.tenant_id, target.message_id)

    # -- edit ---------------------------------------------------------------------------------
    def edit(self, tenant_id: IdLike, conversation_id: IdLike, conversation_seq: int, *, body: bytes,
             actor_id: IdLike, e2ee: bool = False) -> EditResult:
        return run(self.edit_walk(tenant_id, conversation_id, conversation_seq, body=body, actor_id=actor_id,
                                  e2ee=e2ee), self.ctx.connection)

    def edit_async(self, tenant_id: IdLike, conversation_id: IdLike, conversation_seq: int, *, body: bytes,
                   actor_id: IdLike, e2ee: bool = False) -> Future[EditResult]:
        """The same steps on the driver's event loop; the future gets the result or ``edit``'s error."""
        return start_prepared(self.edit_walk(tenant_id, conversation_id, conversation_seq, body=body,
                                             actor_id=actor_id, e2ee=e2ee),
                              self.ctx.connection, self._pool, self._prepare)

    def edit_walk(self, tenant_id: IdLike, conversation_id: IdLike, conversation_seq: int, *, body: bytes,
                  actor_id: IdLike, e2ee: bool = False) -> Walk[EditResult]:
        tenant_id, conversation_id, seq, actor_id = self._ids(tenant_id, conversation_id, conversation_seq, actor_id)
        if not isinstance(body, (bytes, bytearray, memoryview)):
            raise ValidationError(f"body must be bytes, got {type(body).__name__}", field="body")
        limit = self.ctx.constants.payload_max_bytes
        if len(body) > limit:
            raise PayloadTooLarge(f"body is {len(body)} B, over the {limit} B limit", field="body",
                                  size=len(body), limit=limit)
        if not isinstance(e2ee, bool):
            raise ValidationError(f"e2ee must be a bool, got {e2ee!r}", field="e2ee")
        yield from self.fencing.admit_steps(tenant_id, conversation_id)  # Fenced here, before anything is written
        target = yield from self._require_target(tenant_id, conversation_id, seq)
        if target.state is MessageState.RECALLED:
            raise InvalidState("a recalled message cannot be edited", tenant_id=tenant_id,
                               conversation_id=conversation_id, conversation_seq=seq, state=target.state)
        if not self.ctx.encryptor.sealing_key_ready(tenant_id, conversation_id):  # a key store read
            yield Blocking(functools.partial(self.ctx.encryptor.load_sealing_key, tenant_id, conversation_id))
        # Sealed for the target row's coordinates: the AAD is the row's, not the event's.
        blob, dek_id = seal_payload(bytes(body), e2ee=e2ee, encryptor=self.ctx.encryptor, tenant_id=tenant_id,
                                    conversation_id=conversation_id, conversation_seq=seq)
        alloc = yield from self._allocate(tenant_id, conversation_id)
        entry = yield self._log(self._event(target, alloc, seq=alloc.conversation_seq, payload=EditEvent(
            actor_id=actor_id, activity_id=alloc.last_activity_id, created_at_ms=self.ctx.clock_ms(),
            payload_or_ciphertext=blob, dek_id=dek_id.as_tuple(), written_at_us=alloc.written_at_us)))
        self.ctx.faults.hit("after_edit_log")
        yield from self._apply_edit(target, entry)
        self.ctx.faults.hit("after_edit_update")
        return EditResult(conversation_seq=seq, edit_event_conversation_seq=alloc.conversation_seq,
                          edited_at_activity_id=alloc.last_activity_id, written_at_us=alloc.written_at_us)

    def _apply_edit(self, target: _Target, entry: OutboxEntry) -> Walk[None]:
        yield from self._ensure_whole(target)
        event = entry.record.payload
        assert isinstance(event, EditEvent)
        yield from self._hot_edit(target, event)  # the hot copy first, as for a recall
        yield Cql(((self.ctx.prepare(EDIT_CQL), (target.ttl_seconds, event.write_time_us, event.payload_or_ciphertext,
                                                 event.dek_id, u128_to_blob(event.activity_id),
                                                 int(MessageState.EDITED), *self._key(target))),))
        self._on_change(target.tenant_id, target.message_id)
        if (yield from self._keep_recalled(target)):
            raise InvalidState("the message was recalled while the edit was in flight: it stays recalled",
                               tenant_id=target.tenant_id, conversation_id=target.conversation_id,
                               conversation_seq=target.conversation_seq, state=MessageState.RECALLED)

    def _hot_recall(self, target: _Target, event_seq: int) -> Walk[None]:
        """Archiver mode: the hot copy carries the recall (a no-op when it does, or has no copy)."""
        if self._hot is not None:
            yield Blocking(functools.partial(self._hot.recall, target.tenant_id, target.conversation_id,
                                             target.conversation_seq, recall_event_conversation_seq=event_seq))

    def _hot_edit(self, target: _Target, event: EditEvent) -> Walk[None]:
        """Archiver mode: the hot copy carries the edit unless it is recalled or has a newer one."""
        if self._hot is not None:
            yield Blocking(functools.partial(self._hot.edit, target.tenant_id, target.conversation_id,
                                             target.conversation_seq, payload_or_ciphertext=event.payload_or_ciphertext,
                                             dek_id=event.dek_id, edited_at_activity_id=u128_to_blob(event.activity_id)))

    def _keep_recalled(self, target: _Target) -> Walk[bool]:
        """If the row carries a recall, make sure its state cell says RECALLED (rewriting it above
        a racing edit's write time); True when the row is recalled."""
        key = self._key(target)
        (rows,) = yield Cql(((self.ctx.prepare(STATE_CQL, key_columns=MESSAGE_RECORD_KEY), key),))
        row = rows[0] if rows else None
        if row is None or row.recall_event_conversation_seq is None:
            return False
        if row.state != MessageState.RECALLED:
            yield Cql(((self.ctx.prepare(RESTORE_CQL),
                        (target.ttl_seconds, (row.state_written or 0) + 1, int(MessageState.RECALLED), *key)),))
            self.ctx.alerts.incr("recalled_state_restored")
        return True

    # -- recovery (S-7; the walk over the log is lab.store.write.recovery) ------------------------
    def reemit(self, entry: OutboxEntry) -> bool:
        """S-7 for one logged CONTROL event: when its target row does not carry it (a recall:
        recall_event_conversation_seq empty; an edit: the row's edit is older, and no recall),
        re-emit it to the log (idempotent by its key) and apply it, log first as in §5.3.
        True when it did."""
        return run(self._reemit(entry), self.ctx.connection)

    def _reemit(self, entry: OutboxEntry) -> Walk[bool]:
        record = entry.record
        assert record.target_seq is not None
        target = yield from self._target(record.tenant_id, record.conversation_id, record.target_seq)
        if target is None:
            return False  # expired meanwhile: no row left to mark
        if record.kind == KIND_RECALL:
            if target.recall_event_conversation_seq is not None:
                yield from self._hot_recall(target, target.recall_event_conversation_seq)  # the row has it; the hot copy too
                return False  # the row says the event is in the log: nothing to re-emit
            yield from self._apply_recall(target, (yield self._log(record)))  # re-emit (idempotent), then the row
            return True
        if target.edited_at_activity_id == _activity(entry) and target.state is not MessageState.RECALLED:
            assert isinstance(record.payload, EditEvent)
            yield from self._hot_edit(target, record.payload)  # the row has this edit; the hot copy too
            return False
        if target.state is MessageState.RECALLED or target.edited_at_activity_id == _activity(entry) or (
                target.edited_written_us is not None and target.edited_written_us >= _write_time_us(entry)):
            return False  # applied, or superseded by a recall or by an edit written later (module docstring)
        yield from self._apply_edit(target, (yield self._log(record)))
        return True


def _activity(entry: OutboxEntry) -> int:
    event = entry.record.payload
    assert isinstance(event, (RecallEvent, EditEvent))
    return event.activity_id


def _write_time_us(entry: OutboxEntry) -> int:
    """The write time of a CONTROL event's cells (lab.store.outbox: ``write_time_us``)."""
    event = entry.record.payload
    assert isinstance(event, (RecallEvent, EditEvent))
    return event.write_time_us
