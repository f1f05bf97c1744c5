"""The outbox: the commit log every committed message and CONTROL event goes to (§5.1 step 4).

    sqlite_log      LocalOutbox, the log in a SQLite file under the store's state_dir ("local")
    kafka_log       KafkaOutbox, the log over the Kafka protocol ("kafka")
    kafka_producer  its producer: appends until the broker acked them, a fatal error's replacement
    kafka_index     the index it builds by tailing the partitions (get, controls_for)
    kafka_errors    its client errors: what a consumer heard, named when a read times out

More: docs/store-internals.md.
"""
from __future__ import annotations

import abc
import functools
import importlib
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, ClassVar

from lab.errors import ValidationError
from lab.store.rows.encoded import EncodedRecord
from lab.store.rows.ids import blob_to_u128, check_bigint, check_conversation_seq, parse_uuid, u128_to_blob

__all__ = ["CONTROL_KINDS", "ControlEvent", "EditEvent", "MessagePayload", "OUTBOXES", "Outbox", "OutboxBatch",
           "OutboxEntry", "OutboxPayload", "OutboxRecord", "OutboxView", "RECORD_KINDS", "RecallEvent", "open_outbox"]

KIND_MESSAGE = "message"
KIND_RECALL = "recall"
KIND_EDIT = "edit"
CONTROL_KINDS = (KIND_RECALL, KIND_EDIT)
RECORD_KINDS = (KIND_MESSAGE, *CONTROL_KINDS)
DEFAULT_READ_LIMIT = 1000


# ---- what a record carries: a message, or a CONTROL event (typed; the log stores their wire form) ----
@dataclass(frozen=True, kw_only=True)
class MessagePayload:
    """A committed message: the row exactly as the commit path sealed it (the archiver writes it)."""

    kind: ClassVar[str] = KIND_MESSAGE
    record: EncodedRecord

    def __post_init__(self) -> None:
        if not isinstance(self.record, EncodedRecord):
            raise ValidationError(f"a message payload carries an EncodedRecord, got {type(self.record).__name__}",
                                  field="record")

    def to_wire(self) -> dict[str, Any]:
        return {"columns": self.record.to_wire()}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> MessagePayload:
        return cls(record=EncodedRecord.from_wire(data["columns"]))


class _Control:
    """What a recall and an edit share: the write time of the cells they change."""

    created_at_ms: int
    written_at_us: int | None

    @property
    def write_time_us(self) -> int:
        """``USING TIMESTAMP`` of the cells the event changes (lab.store.write.recall): its
        ``written_at_us``, or for an event logged before write times existed its millisecond."""
        return self.written_at_us if self.written_at_us is not None else self.created_at_ms * 1000

    def _check(self) -> None:
        object.__setattr__(self, "actor_id", parse_uuid(self.actor_id))  # type: ignore[attr-defined]
        u128_to_blob(self.activity_id)  # type: ignore[attr-defined]
        check_bigint(self.created_at_ms, column="created_at")
        if self.written_at_us is not None:
            check_bigint(self.written_at_us, column="written_at_us")

    def _wire(self) -> dict[str, Any]:
        out = {"actor_id": str(self.actor_id), "activity_id": u128_to_blob(self.activity_id).hex(),  # type: ignore[attr-defined]
               "created_at": self.created_at_ms}
        if self.written_at_us is not None:
            out["written_at_us"] = self.written_at_us
        return out


@dataclass(frozen=True, kw_only=True)
class RecallEvent(_Control):
    """A recall (§5.3): who, its activity id (u128), when, and the write time of its cells."""

    kind: ClassVar[str] = KIND_RECALL
    actor_id: uuid.UUID
    activity_id: int
    created_at_ms: int
    written_at_us: int | None = None

    def __post_init__(self) -> None:
        self._check()

    def to_wire(self) -> dict[str, Any]:
        return self._wire()

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> RecallEvent:
        return cls(**_control_fields(data))


@dataclass(frozen=True, kw_only=True)
class EditEvent(_Control):
    """An edit (§5.3): as a recall, plus the new payload sealed for the target row and its key."""

    kind: ClassVar[str] = KIND_EDIT
    actor_id: uuid.UUID
    activity_id: int
    created_at_ms: int
    payload_or_ciphertext: bytes = field(repr=False)
    dek_id: tuple[str, str, int]
    written_at_us: int | None = None

    def __post_init__(self) -> None:
        self._check()
        if not isinstance(self.payload_or_ciphertext, bytes):
            raise ValidationError("an edit carries its sealed payload as bytes", field="payload_or_ciphertext")
        object.__setattr__(self, "dek_id", tuple(self.dek_id))

    def to_wire(self) -> dict[str, Any]:
        return {**self._wire(), "payload_or_ciphertext": self.payload_or_ciphertext.hex(), "dek_id": list(self.dek_id)}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> EditEvent:
        return cls(**_control_fields(data), payload_or_ciphertext=bytes.fromhex(data["payload_or_ciphertext"]),
                   dek_id=tuple(data["dek_id"]))


ControlEvent = RecallEvent | EditEvent
OutboxPayload = MessagePayload | RecallEvent | EditEvent
_PAYLOADS: dict[str, type[MessagePayload] | type[RecallEvent] | type[EditEvent]] = {
    KIND_MESSAGE: MessagePayload, KIND_RECALL: RecallEvent, KIND_EDIT: EditEvent}


def _control_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    return {"actor_id": data["actor_id"], "activity_id": blob_to_u128(bytes.fromhex(data["activity_id"])),
            "created_at_ms": data["created_at"], "written_at_us": data.get("written_at_us")}


def payload_from_wire(kind: str, data: Mapping[str, Any]) -> OutboxPayload:
    """The typed payload of a record of ``kind`` from its wire form; a typed ValidationError
    (nothing half-read) for anything else."""
    cls = _PAYLOADS.get(kind)
    if cls is None:
        raise ValidationError(f"unknown outbox record kind {kind!r}", kind=kind)
    try:
        return cls.from_wire(data)
    except ValidationError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValidationError(f"not the wire form of a {kind} payload: {exc!r}", kind=kind) from None


@dataclass(frozen=True, kw_only=True)
class OutboxRecord:
    """One log record: a message (:class:`MessagePayload`) or a CONTROL event (:class:`RecallEvent`,
    :class:`EditEvent`) at its own coordinate; ``kind`` follows from the payload and
    ``target_seq`` is the message a CONTROL event acts on."""

    tenant_id: uuid.UUID
    conversation_id: uuid.UUID
    conversation_seq: int
    payload: OutboxPayload = field(repr=False)
    target_seq: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "tenant_id", parse_uuid(self.tenant_id))
        object.__setattr__(self, "conversation_id", parse_uuid(self.conversation_id))
        check_conversation_seq(self.conversation_seq)
        if not isinstance(self.payload, (MessagePayload, RecallEvent, EditEvent)):
            raise ValidationError(f"an outbox record carries a MessagePayload, RecallEvent or EditEvent, got "
                                  f"{type(self.payload).__name__}", field="payload")
        if (self.kind in CONTROL_KINDS) != (self.target_seq is not None):
            raise ValidationError("CONTROL records (and only they) carry a target_seq", kind=self.kind)
        if self.target_seq is not None:
            check_conversation_seq(self.target_seq, column="target_seq")

    @property
    def kind(self) -> str:
        return self.payload.kind

    def to_wire(self) -> dict[str, Any]:
        """JSON-ready: the coordinates, kind, target_seq and the payload's wire form."""
        return {"tenant_id": str(self.tenant_id), "conversation_id": str(self.conversation_id),
                "conversation_seq": self.conversation_seq, "kind": self.kind, "target_seq": self.target_seq,
                "payload": self.payload.to_wire()}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> OutboxRecord:
        try:
            return cls(tenant_id=data["tenant_id"], conversation_id=data["conversation_id"],
                       conversation_seq=data["conversation_seq"], target_seq=data["target_seq"],
                       payload=payload_from_wire(data["kind"], data["payload"]))
        except KeyError as exc:
            raise ValidationError(f"outbox record lacks {exc}", field=str(exc)) from None


@dataclass(frozen=True, kw_only=True)
class OutboxEntry:
    offset: int
    record: OutboxRecord
    appended_at_ms: int
    duplicate: bool = False  # True when append() found the key already stored
    partition: int = 0


@dataclass(frozen=True, kw_only=True)
class OutboxBatch:
    """One ``consume`` of a group: the entries, and per partition the offset the group reads
    next once the batch is committed (past entries an implementation skipped, e.g. replayed
    appends of a key already in the log)."""

    entries: tuple[OutboxEntry, ...]
    next_offsets: Mapping[int, int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.next_offsets)


class Outbox(abc.ABC):
    """The commit-log interface. Implementations must be safe for concurrent callers."""

    @abc.abstractmethod
    def append(self, record: OutboxRecord) -> OutboxEntry:
        """Durably append (idempotent by key); returns the stored entry."""

    def append_async(self, record: OutboxRecord) -> Future[OutboxEntry] | None:
        """:meth:`append` without blocking the caller: a future completed off the caller's thread
        (which may be the driver's event loop), or None where the log has no such path (then the
        caller runs :meth:`append` on a thread of its own)."""
        return None

    def prepare(self, record: OutboxRecord) -> Callable[[], OutboxEntry]:
        """The append of ``record`` with its encoding done now: calling the result appends it as
        :meth:`append` does (durably, idempotent by key). For callers that build appends ahead of
        time, e.g. the benchmark's send floor, which must pay the log's cost without the payload's
        encoding; an implementation that cannot split the two appends on the call."""
        return functools.partial(self.append, record)

    @abc.abstractmethod
    def get(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID, conversation_seq: int) -> OutboxEntry | None:
        """The entry with this key, if any."""

    @abc.abstractmethod
    def controls_for(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID, target_seq: int,
                     kind: str) -> list[OutboxEntry]:
        """CONTROL entries of ``kind`` aimed at ``target_seq``, in log order."""

    @abc.abstractmethod
    def read(self, from_offset: int, limit: int = DEFAULT_READ_LIMIT, *, partition: int = 0) -> list[OutboxEntry]:
        """Up to ``limit`` entries of ``partition`` with offset >= ``from_offset``, in offset order."""

    @abc.abstractmethod
    def end_offset(self, *, partition: int = 0) -> int:
        """The offset the next append to ``partition`` will get (one past its last entry)."""

    @abc.abstractmethod
    def commit(self, group: str, offset: int, *, partition: int = 0) -> int:
        """Record ``offset`` as the next one ``group`` reads in ``partition``; returns the committed value."""

    @abc.abstractmethod
    def committed(self, group: str, *, partition: int = 0) -> int:
        """The group's committed offset in ``partition`` (0 for a group that never committed)."""

    @property
    def partitions(self) -> int:
        return 1

    def consume(self, group: str, limit: int = DEFAULT_READ_LIMIT) -> OutboxBatch:
        """Up to ``limit`` entries after the group's committed offsets, every partition."""
        entries: list[OutboxEntry] = []
        next_offsets: dict[int, int] = {}
        for partition in range(self.partitions):
            if len(entries) >= limit:
                break
            got = self.read(self.committed(group, partition=partition), limit - len(entries), partition=partition)
            if got:
                entries += got
                next_offsets[partition] = got[-1].offset + 1
        return OutboxBatch(entries=tuple(entries), next_offsets=next_offsets)

    def commit_batch(self, group: str, batch: OutboxBatch) -> None:
        """Commit the group past ``batch`` (after its entries were processed)."""
        for partition, offset in batch.next_offsets.items():
            self.commit(group, offset, partition=partition)

    def lag(self, group: str) -> int:
        """Entries (messages and CONTROL events) the group has not consumed yet."""
        return sum(self.end_offset(partition=p) - max(self.committed(group, partition=p), 1)
                   for p in range(self.partitions))

    def scan(self, *, batch: int = DEFAULT_READ_LIMIT) -> list[OutboxEntry]:
        """Every entry of every partition (verification and audits; not a hot path)."""
        out: list[OutboxEntry] = []
        for partition in range(self.partitions):
            offset = 0
            while got := self.read(offset, batch, partition=partition):
                out += got
                offset = got[-1].offset + 1
        return out

    def close(self) -> None:
        pass

    def __enter__(self) -> Outbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class OutboxView:
    """Read-only view of a store's log (``store.log``): what fanout and the archiver consume,
    for tests, audits and operators to inspect. Appending and committing offsets belong to
    the store's paths, so the view has neither."""

    def __init__(self, outbox: Outbox) -> None:
        self._outbox = outbox

    def __repr__(self) -> str:
        return f"OutboxView({self._outbox!r})"

    def get(self, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str,
            conversation_seq: int) -> OutboxEntry | None:
        return self._outbox.get(parse_uuid(tenant_id), parse_uuid(conversation_id),
                                check_conversation_seq(conversation_seq))

    def controls_for(self, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str, target_seq: int,
                     kind: str) -> list[OutboxEntry]:
        return self._outbox.controls_for(parse_uuid(tenant_id), parse_uuid(conversation_id),
                                         check_conversation_seq(target_seq, column="target_seq"), kind)

    @property
    def partitions(self) -> int:
        return self._outbox.partitions

    def read(self, from_offset: int, limit: int = DEFAULT_READ_LIMIT, *, partition: int = 0) -> list[OutboxEntry]:
        return self._outbox.read(from_offset, limit, partition=partition)

    def end_offset(self, *, partition: int = 0) -> int:
        return self._outbox.end_offset(partition=partition)

    def committed(self, group: str, *, partition: int = 0) -> int:
        return self._outbox.committed(group, partition=partition)

    def lag(self, group: str) -> int:
        return self._outbox.lag(group)

    def scan(self) -> list[OutboxEntry]:
        """Every entry of every partition (audits, verification)."""
        return self._outbox.scan()


# name -> class, or "module:Class" imported on first use (confluent-kafka only when "kafka" is opened)
OUTBOXES: dict[str, type[Outbox] | str] = {"local": "lab.store.outbox.sqlite_log:LocalOutbox",
                                           "kafka": "lab.store.outbox.kafka_log:KafkaOutbox"}


def open_outbox(name: str, **options: Any) -> Outbox:
    """An outbox by registry name, e.g. ``open_outbox("local", path=state_dir / "outbox.sqlite")``,
    ``open_outbox("kafka", services=ServicesConfig(...), topic="outbox.msglab")``."""
    try:
        cls = OUTBOXES[name]
    except KeyError:
        raise ValidationError(f"unknown outbox {name!r} (known: {', '.join(OUTBOXES)})", name=name) from None
    if isinstance(cls, str):
        module, _, attr = cls.partition(":")
        cls = getattr(importlib.import_module(module), attr)
    return cls(**options)
