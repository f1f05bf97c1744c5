"""message_record rows: the decoded :class:`Message`, the payload envelope, and the
encode/decode between them and the CQL column values (design §1, §2.1, §5.2, §6).

Payload envelope. What the DEK seals into ``payload_or_ciphertext`` is::

    1 flag byte (0x00 plain, 0x01 e2ee) || body

so the E2EE flag needs no new column (the schema is the design's, exactly) and is not
visible at rest. The AAD is the row's coordinates (``lab.store.crypto.aad``), so a ciphertext
copied to another row fails to decrypt. E2EE bodies are the client's ciphertext: sealed
and opened like any payload, never interpreted.

Both write paths (commit, archiver) and every read path go through :func:`encode_record`
(a Message -> its :class:`~lab.store.rows.encoded.EncodedRecord`) and :func:`decode_row`;
:data:`MESSAGE_RECORD_COLUMNS` is the one column order used by INSERT and SELECT. The
encoded record's wire form (``to_wire`` / ``from_wire``) carries it through the outbox, so the
archiver writes the very bytes the commit path sealed (an archive run twice writes identical cells).
"""
from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from lab.constants import Constants
from lab.store.crypto import Encryptor
from lab.errors import CryptoError, KeyDestroyed, ValidationError
from lab.store.rows.encoded import MESSAGE_RECORD_COLUMNS, MESSAGE_RECORD_KEY, EncodedRecord
from lab.store.rows.ids import DekId, blob_to_u128, check_bigint, check_conversation_seq, seq_bucket, u128_to_blob
from lab.store.rows.media import MediaMetadata, MentionTargets
from lab.store.rows.model import MessageState, MessageType, RetentionClass, parse_enum

__all__ = ["ENVELOPE_E2EE", "ENVELOPE_PLAIN", "MESSAGE_RECORD_COLUMNS", "MESSAGE_RECORD_KEY", "EncodedRecord", "Message",
           "RECORD_SCHEMA_VERSION", "decode_row", "decode_rows", "encode_record", "open_payload", "seal_payload"]

_DEFAULTS = Constants.appendix_b()
E = TypeVar("E", MessageType, MessageState, RetentionClass)
# distinct dek_id values kept parsed (conversations x key versions a process reads)
DEK_ID_CACHE_ENTRIES = 65536

ENVELOPE_PLAIN = 0x00
ENVELOPE_E2EE = 0x01
ENVELOPE_FLAG_BYTES = 1
# Version of the row layout this module writes (schema_version column); readers accept it
# and anything older they know.
RECORD_SCHEMA_VERSION = 1

# What every row the store writes has; a row without them is not a message (decode refuses it).
_WHOLE_ROW_COLUMNS = MESSAGE_RECORD_KEY + ("message_id", "last_activity_id")
_ENUM_BY_VALUE = {cls: {int(m): m for m in cls} for cls in (MessageType, MessageState, RetentionClass)}


@dataclass(frozen=True, kw_only=True)
class Message:
    """One message_record row, decoded. ``body`` is the decrypted payload (for ``e2ee`` the
    client's opaque E2EE ciphertext); it is kept out of repr so bodies never reach logs."""

    tenant_id: uuid.UUID
    conversation_id: uuid.UUID
    seq_bucket: int
    conversation_seq: int
    message_id: int
    last_activity_id: int
    sender_id: uuid.UUID
    sender_device_id: uuid.UUID
    client_message_id: str
    message_type: MessageType
    custom_type: str | None = None
    schema_version: int = RECORD_SCHEMA_VERSION
    body: bytes = field(default=b"", repr=False)
    e2ee: bool = False
    media: MediaMetadata | None = None
    reply_to_conversation_seq: int | None = None
    mentions: MentionTargets | None = None
    state: MessageState = MessageState.NORMAL
    recall_event_conversation_seq: int | None = None
    edited_at_activity_id: int | None = None
    created_at_ms: int = 0
    retention_class: RetentionClass = RetentionClass.DEFAULT
    dek_id: DekId | None = None

    @property
    def recalled(self) -> bool:
        return self.state is MessageState.RECALLED


# --- payload envelope -------------------------------------------------------------------------

def seal_payload(body: bytes, *, e2ee: bool, encryptor: Encryptor, tenant_id: uuid.UUID,
                 conversation_id: uuid.UUID, conversation_seq: int) -> tuple[bytes, DekId]:
    """Envelope + DEK seal with the row's coordinates as AAD; returns (blob, dek_id)."""
    flag = ENVELOPE_E2EE if e2ee else ENVELOPE_PLAIN
    sealed = encryptor.encrypt(bytes([flag]) + bytes(body), tenant_id=tenant_id, conversation_id=conversation_id,
                               conversation_seq=conversation_seq, e2ee=e2ee)
    return sealed.blob, sealed.dek_id


def open_payload(blob: bytes, *, encryptor: Encryptor, tenant_id: uuid.UUID, conversation_id: uuid.UUID,
                 conversation_seq: int, dek_id: DekId | tuple[str, str, int]) -> tuple[bytes, bool]:
    """(body, e2ee) of a sealed envelope; CryptoError if it does not belong to this row."""
    return _envelope(encryptor.decrypt(blob, tenant_id=tenant_id, conversation_id=conversation_id,
                                       conversation_seq=conversation_seq, dek_id=dek_id), conversation_seq)


def _envelope(envelope: bytes, conversation_seq: int) -> tuple[bytes, bool]:
    if len(envelope) < ENVELOPE_FLAG_BYTES or envelope[0] not in (ENVELOPE_PLAIN, ENVELOPE_E2EE):
        raise ValidationError("payload envelope has no valid flag byte", column="payload_or_ciphertext",
                              conversation_seq=conversation_seq)
    return envelope[ENVELOPE_FLAG_BYTES:], envelope[0] == ENVELOPE_E2EE


# --- encode -----------------------------------------------------------------------------------

def _opt_bigint(value: int | None, column: str) -> int | None:
    return None if value is None else check_bigint(value, column=column)


def encode_record(message: Message, encryptor: Encryptor, *,
                  bucket_width: int = _DEFAULTS.message_seq_bucket_width,
                  thumbnail_max_bytes: int = _DEFAULTS.media_thumbnail_max_bytes) -> EncodedRecord:
    """The row of ``message`` as the store binds it (:class:`EncodedRecord`).

    Seals the body with the conversation's current DEK (``message.dek_id`` is ignored: the
    key that sealed it is what the row must name). Every bigint passes the bit-63 guard here,
    so a bad value raises before any statement is bound.
    """
    seq = check_conversation_seq(message.conversation_seq)
    bucket = seq_bucket(seq, bucket_width)
    if message.seq_bucket != bucket:
        raise ValidationError(f"seq_bucket {message.seq_bucket} does not match conversation_seq {seq} "
                              f"at width {bucket_width}", column="seq_bucket", value=message.seq_bucket)
    payload, dek_id = seal_payload(message.body, e2ee=message.e2ee, encryptor=encryptor,
                                   tenant_id=message.tenant_id, conversation_id=message.conversation_id,
                                   conversation_seq=seq)
    return EncodedRecord.of({
        "tenant_id": message.tenant_id,
        "conversation_id": message.conversation_id,
        "seq_bucket": check_bigint(bucket, column="seq_bucket"),
        "conversation_seq": seq,
        "message_id": u128_to_blob(message.message_id),
        "last_activity_id": u128_to_blob(message.last_activity_id),
        "sender_id": message.sender_id,
        "sender_device_id": message.sender_device_id,
        "client_message_id": message.client_message_id,
        "message_type": int(message.message_type),
        "custom_type": message.custom_type,
        "schema_version": int(message.schema_version),
        "payload_or_ciphertext": payload,
        "media_metadata": None if message.media is None
        else message.media.encode(thumbnail_max_bytes=thumbnail_max_bytes),
        "reply_to_conversation_seq": _opt_bigint(message.reply_to_conversation_seq, "reply_to_conversation_seq"),
        "mention_targets": None if message.mentions is None else message.mentions.encode(),
        "state": int(message.state),
        "recall_event_conversation_seq": _opt_bigint(message.recall_event_conversation_seq,
                                                  "recall_event_conversation_seq"),
        "edited_at_activity_id": None if message.edited_at_activity_id is None
        else u128_to_blob(message.edited_at_activity_id),
        "created_at": check_bigint(message.created_at_ms, column="created_at"),
        "retention_class": int(message.retention_class),
        "dek_id": dek_id.as_tuple(),
    })


# --- decode -----------------------------------------------------------------------------------

def _values(row: Any) -> Mapping[str, Any]:
    """The row's columns by name, resolved once per row (not once per column): a driver row is
    a named tuple, the hot window hands over dicts, anything else is read by attribute."""
    if type(row) is dict:
        return row
    fields = getattr(row, "_fields", None)
    if fields is not None:
        return dict(zip(fields, row))
    if isinstance(row, Mapping):
        return row
    return {name: getattr(row, name, None) for name in MESSAGE_RECORD_COLUMNS}


@functools.lru_cache(maxsize=DEK_ID_CACHE_ENTRIES)
def _dek_id(value: tuple[Any, ...]) -> DekId:
    # a row names its key as a (scope, key_id, version) tuple; the same few per conversation
    return DekId.from_tuple(value)


def _enum(enum_cls: type[E], value: Any) -> E:
    member = _ENUM_BY_VALUE[enum_cls].get(value) if type(value) is int else None
    return member if member is not None else parse_enum(enum_cls, value)


def _opt_u128(value: Any) -> int | None:
    return None if value is None else blob_to_u128(value)


def _message(fields: dict[str, Any]) -> Message:
    """A Message from every one of its fields, without the frozen dataclass __init__ (23
    ``object.__setattr__`` calls: 6 µs, a sixth of a row's decode; read paths build one per row).
    ``fields`` must name each field exactly once (tests/unit/test_records_decode.py)."""
    message = object.__new__(Message)
    message.__dict__.update(fields)
    return message


Opener = Callable[[bytes, int], bytes]


def decode_row(row: Any, encryptor: Encryptor) -> Message:
    """A :class:`Message` from a driver row of ``SELECT * FROM message_record`` (or a mapping
    with the same column names). Raises CryptoError (DecryptError / KeyDestroyed) when the
    payload cannot be opened: an erased conversation reads as an error, not as empty text."""
    return _decode(row, encryptor, {})


def decode_rows(rows: Iterable[Any], encryptor: Encryptor, *, skip_destroyed: bool = False) -> list[Message | None]:
    """:func:`decode_row` of each row, the key looked up once per (conversation, dek_id) of the
    rows instead of once per row (``Encryptor.opener``). ``skip_destroyed``: a row whose key was
    crypto-erased decodes as None instead of raising KeyDestroyed (a batch reports it missing)."""
    openers: dict[tuple[Any, Any, DekId], Opener] = {}
    out: list[Message | None] = []
    for row in rows:
        try:
            out.append(_decode(row, encryptor, openers))
        except KeyDestroyed:
            if not skip_destroyed:
                raise
            out.append(None)
    return out


def _opener(encryptor: Encryptor, openers: dict, tenant_id: Any, conversation_id: Any, dek_id: DekId) -> Opener:
    key = (tenant_id, conversation_id, dek_id)
    opener = openers.get(key)
    if opener is None:
        try:
            opener = encryptor.opener(tenant_id=tenant_id, conversation_id=conversation_id, dek_id=dek_id)
        except CryptoError as exc:  # every row of that key fails the same way, without asking again
            def opener(_blob: bytes, _seq: int, exc: CryptoError = exc) -> bytes:
                raise exc
        openers[key] = opener
    return opener


# row classes whose fields are MESSAGE_RECORD_COLUMNS in order (one per connection's row-class cache,
# lab.cluster.row_factory); capped, since a session with the driver's own factory makes a class per response
_ORDERED_ROW_TYPES: set[type] = set()
_ORDERED_ROW_TYPES_MAX = 64


def _columns(row: Any) -> tuple[Any, ...]:
    """The row's values in :data:`MESSAGE_RECORD_COLUMNS` order: a driver row of the store's own
    SELECT is that tuple already (unpacked as is); any other row is looked up by name."""
    kind = type(row)
    if kind in _ORDERED_ROW_TYPES:
        return row
    if kind is EncodedRecord:  # the hot window's copies
        return row.columns()
    if getattr(row, "_fields", None) == MESSAGE_RECORD_COLUMNS and isinstance(row, tuple):
        if len(_ORDERED_ROW_TYPES) < _ORDERED_ROW_TYPES_MAX:
            _ORDERED_ROW_TYPES.add(kind)
        return row
    get = _values(row).get
    return tuple(get(name) for name in MESSAGE_RECORD_COLUMNS)


def _decode(row: Any, encryptor: Encryptor, openers: dict) -> Message:
    (tenant_id, conversation_id, bucket, seq, message_id, last_activity_id, sender_id, sender_device_id,
     client_message_id, message_type, custom_type, schema_version, payload, media, reply_to, mentions, state,
     recall_seq, edited_at, created_at, retention_class, dek) = _columns(row)
    if tenant_id is None or conversation_id is None or bucket is None or seq is None or message_id is None \
            or last_activity_id is None:
        values = dict(zip(MESSAGE_RECORD_COLUMNS, _columns(row)))
        missing = [name for name in _WHOLE_ROW_COLUMNS if values[name] is None]
        raise ValidationError(f"not a whole message_record row: {', '.join(missing)} missing", columns=missing,
                              conversation_seq=seq)
    dek_id = None if dek is None else _dek_id(tuple(dek))
    body, e2ee = b"", False
    if payload is not None:
        if dek_id is None:
            raise ValidationError("row has a payload but no dek_id", column="dek_id", conversation_seq=seq)
        body, e2ee = _envelope(_opener(encryptor, openers, tenant_id, conversation_id, dek_id)(payload, seq), seq)
    return _message({
        "tenant_id": tenant_id, "conversation_id": conversation_id, "seq_bucket": bucket, "conversation_seq": seq,
        "message_id": blob_to_u128(message_id), "last_activity_id": blob_to_u128(last_activity_id),
        "sender_id": sender_id, "sender_device_id": sender_device_id,
        "client_message_id": client_message_id or "",
        "message_type": _enum(MessageType, message_type),
        "custom_type": custom_type,
        "schema_version": schema_version or RECORD_SCHEMA_VERSION,
        "body": body, "e2ee": e2ee,
        "media": None if media is None else MediaMetadata.decode(media),
        "reply_to_conversation_seq": reply_to,
        "mentions": None if mentions is None else MentionTargets.decode(mentions),
        # Recalled stays recalled: only a recall sets the coordinate (lab.store.write.recall), so a row
        # carrying it reads as RECALLED even in the instant a racing edit's state cell wins.
        "state": MessageState.RECALLED if recall_seq is not None else _enum(MessageState, state or 0),
        "recall_event_conversation_seq": recall_seq,
        "edited_at_activity_id": _opt_u128(edited_at),
        "created_at_ms": created_at or 0,
        "retention_class": _enum(RetentionClass, retention_class or 0),
        "dek_id": dek_id,
    })
