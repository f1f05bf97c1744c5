"""message_record rows: the decoded :class:`Message`, the payload envelope, and the
encode/decode between them and the CQL column values (design §1, §2.1, §5.2, §6).

More: docs/store-internals.md.
"""
from __future__ import annotations

import functools
import struct
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from lab.constants import Constants
from cryptography.exceptions import InvalidTag

from lab.store.crypto import NONCE_BYTES, Encryptor
from lab.store.crypto.encryptor import MIN_BLOB_BYTES
from lab.errors import CryptoError, DecryptError, KeyDestroyed, ValidationError
from lab.store.rows.encoded import MESSAGE_RECORD_COLUMNS, MESSAGE_RECORD_KEY, EncodedRecord
from lab.store.rows.ids import BIT63, DekId, blob_to_u128, parse_uuid, check_bigint, check_conversation_seq, seq_bucket, u128_to_blob
from lab.store.rows.media import MediaMetadata, MentionTargets
from lab.store.rows.model import MessageState, MessageType, RetentionClass, parse_enum

__all__ = ["ENVELOPE_E2EE", "ENVELOPE_PLAIN", "MESSAGE_RECORD_COLUMNS", "MESSAGE_RECORD_KEY", "EncodedRecord", "Message",
           "PARTITION_ROW_COLUMNS", "RECORD_SCHEMA_VERSION", "decode_row", "decode_rows", "encode_record", "open_payload", "seal_payload"]

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
# What a read of one known partition selects (the batch read): every column but the partition key
# (tenant_id, conversation_id, seq_bucket), which the read names itself; decode_rows(partition=...)
# puts it back. Two UUIDs a row fewer for the driver to build.
_PARTITION_KEY_COLUMNS = 3
PARTITION_ROW_COLUMNS = MESSAGE_RECORD_COLUMNS[_PARTITION_KEY_COLUMNS:]


@dataclass(frozen=True, kw_only=True, slots=True)
class Message:
    """One message_record row, decoded. ``body`` is the decrypted payload (for ``e2ee`` the
    client's opaque E2EE ciphertext); it is kept out of repr so bodies never reach logs.

    Slots: a read keeps hundreds of these alive at once (a 500-message batch, the body LRU), and
    without slots each is two objects for the cyclic GC (the instance and its __dict__). No weakref
    slot: on Python 3.11 a ``__weakref__`` slot makes decode_rows' ``__class__`` assignment refuse the
    layout (nothing takes weak references to messages)."""

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


def decode_row(row: Any, encryptor: Encryptor) -> Message:
    """A :class:`Message` from a driver row of ``SELECT * FROM message_record`` (or a mapping
    with the same column names). Raises CryptoError (DecryptError / KeyDestroyed) when the
    payload cannot be opened: an erased conversation reads as an error, not as empty text."""
    return decode_rows((row,), encryptor)[0]  # type: ignore[return-value]


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
    if getattr(row, "_fields", None) == MESSAGE_RECORD_COLUMNS and isinstance(row, tuple):
        if len(_ORDERED_ROW_TYPES) < _ORDERED_ROW_TYPES_MAX:
            _ORDERED_ROW_TYPES.add(kind)
        return row
    get = _values(row).get
    return tuple(get(name) for name in MESSAGE_RECORD_COLUMNS)


class _Keys:
    """The opening keys of one batch by (tenant, conversation, dek_id), each looked up once
    (``Encryptor.opening_key``); a key that failed fails every row of it the same way. A key is
    ``(cipher, pack, prefix, version, dek_id)``: ``pack(prefix, seq, version)`` is the row's AAD
    ``prefix || seq (8 B BE) || version`` in one call (one bytes object, not three concatenated)."""

    def __init__(self, encryptor: Encryptor, cached_only: bool = False) -> None:
        self._encryptor, self._cached_only = encryptor, cached_only
        self._keys: dict[tuple[int, int, Any], tuple[Any, Callable[..., bytes], bytes, bytes, DekId] | CryptoError] = {}

    def get(self, tenant_id: Any, conversation_id: Any,
            dek: Any) -> tuple[Any, Callable[..., bytes], bytes, bytes, DekId] | CryptoError:
        slot = (tenant_id.int, conversation_id.int, dek if type(dek) is tuple else tuple(dek))
        found = self._keys.get(slot)
        if found is None:
            dek_id = _dek_id(slot[2])
            try:
                cipher, prefix, version = self._encryptor.opening_key(
                    tenant_id=tenant_id, conversation_id=conversation_id, dek_id=dek_id, cached_only=self._cached_only)
                found = (cipher, _aad_packer(len(prefix), len(version)), prefix, version, dek_id)
            except CryptoError as exc:
                found = exc
            self._keys[slot] = found
        return found


@functools.lru_cache(maxsize=8)
def _aad_packer(prefix_bytes: int, version_bytes: int) -> Callable[..., bytes]:
    return struct.Struct(f">{prefix_bytes}sQ{version_bytes}s").pack


class _Fields:
    """:class:`Message`'s layout without its dataclass. decode_rows sets a row's fields on one of these
    with plain attribute stores (slot stores, the interpreter's fast path) and then assigns
    ``__class__ = Message``: the same frozen Message the constructor builds, field for field, at a
    fraction of the cost of the keyword constructor or of ``object.__setattr__`` per field (grouped
    1x500 read). The same slots as Message, so the assignment is allowed;
    tests/unit/test_records_decode.py checks the result against the constructor's."""

    __slots__ = Message.__slots__


_UUID = uuid.UUID
_TEXT = MessageType.TEXT
_NORMAL, _RECALLED = MessageState.NORMAL, MessageState.RECALLED
_DEFAULT_CLASS = RetentionClass.DEFAULT
_TYPES, _STATES, _CLASSES = (_ENUM_BY_VALUE[c] for c in (MessageType, MessageState, RetentionClass))
_NO_KEY = object()

try:  # the compiled decode of the common row (native/, installed by `make venv`)
    import lab_native as _lab_native
except ImportError:  # pragma: no cover - a venv without native/: every row takes the Python path
    _lab_native = None
# decode_rows' compiled path: a page whose every row has the common shape is decoded in one call; at the
# first row of any other shape, or any error, it returns None and the whole page takes the Python path
# below, which raises what it raises (tests/unit/test_records_native.py compares the two field for field)
NATIVE_DECODER = None if _lab_native is None else _lab_native.Decoder(
    Message, _TYPES, _STATES, _CLASSES, _NORMAL, _RECALLED, _DEFAULT_CLASS, RECORD_SCHEMA_VERSION,
    MediaMetadata.decode, MentionTargets.decode, _UUID, _ORDERED_ROW_TYPES)


def _native_keys(encryptor: Encryptor, cached_only: bool = False) -> Callable[[Any, Any, tuple[Any, ...]], Any]:
    """The compiled path's key lookup: ``(native cipher, AAD prefix, version suffix, dek_id)``, or None
    when the key fails (the Python path then raises or skips exactly as it does; a key not cached under
    ``cached_only`` stops the compiled path, and the Python path raises KeyNotCached)."""
    def key_for(tenant_id: Any, conversation_id: Any, dek: tuple[Any, ...]) -> Any:
        try:
            return encryptor.native_opening_key(tenant_id=tenant_id, conversation_id=conversation_id,
                                                dek_id=_dek_id(dek), cached_only=cached_only)
        except CryptoError:
            return None
    return key_for


def _partial_row(columns: tuple[Any, ...]) -> ValidationError:
    values = dict(zip(MESSAGE_RECORD_COLUMNS, columns))
    missing = [name for name in _WHOLE_ROW_COLUMNS if values[name] is None]
    return ValidationError(f"not a whole message_record row: {', '.join(missing)} missing", columns=missing,
                           conversation_seq=values["conversation_seq"])


def decode_rows(rows: Iterable[Any], encryptor: Encryptor, *, skip_destroyed: bool = False,
                partition: tuple[uuid.UUID, uuid.UUID, int] | None = None,
                wanted: Mapping[int, int] | None = None, skip_partial: bool = False,
                cached_only: bool = False) -> list[Message | None]:
    """:func:`decode_row` of each row, in one pass: the key of each (conversation, dek_id) of the
    rows is looked up once (``Encryptor.opening_key``), and a row of the common shape (the store's
    own SELECT, whole, a sealed blob) is opened and built inline, without per-row calls into the
    checks that only an unusual row needs (those rows take the checked path and raise what it
    raises). ``skip_destroyed``: a row whose key was crypto-erased decodes as None instead of
    raising KeyDestroyed (a batch reports it missing). ``partition``: the rows are one partition's,
    read without its key (tuples in :data:`PARTITION_ROW_COLUMNS` order: the batch read's SELECT),
    and each decodes as the whole row ``partition + row``. ``wanted``: conversation_seq -> message_id
    of the rows asked for (the batch read's group); any other row (another message at that coordinate,
    a row in a range read's span that was not asked for) decodes as None, unopened. ``skip_partial``: a row
    without message_id (a partial row, :func:`lab.store.read.bucket.whole_rows`) is left out instead of
    refused, in the same pass (a history page counts what was left out: rows in, messages out).
    ``cached_only``: a key the cache does not hold raises :class:`~lab.errors.KeyNotCached`
    instead of a key store read (a read on the driver's loop thread; its walk loads the keys and decodes again)."""
    keyless = partition is not None
    if keyless:
        if len(partition) != _PARTITION_KEY_COLUMNS or partition[0] is None or partition[1] is None \
                or partition[2] is None:
            raise ValidationError(f"partition must be (tenant_id, conversation_id, seq_bucket), got {partition!r}",
                                  field="partition")
        tenant_id, conversation_id, bucket = partition
    native = NATIVE_DECODER
    if native is not None and type(rows) is list and (wanted is None or type(wanted) is dict):
        decoded = native.decode(rows, partition, _native_keys(encryptor, cached_only), wanted, skip_partial)
        if decoded is not None:
            return decoded
    keys = _Keys(encryptor, cached_only)  # the Python path's key lookups (the compiled path above has its own)
    out: list[Message | None] = []
    append = out.append
    new, from_bytes, ordered, message_class = object.__new__, int.from_bytes, _ORDERED_ROW_TYPES, Message
    # the last key and what it was for: rows of one read mostly share one key (no lookup)
    last_dek: Any = _NO_KEY
    last_tenant = last_conversation = -1
    key: Any = None
    cipher: Any = None
    pack: Any = None
    prefix = version = b""
    key_dek_id: Any = None
    for row in rows:
        if keyless:
            (seq, message_id, last_activity_id, sender_id, sender_device_id, client_message_id, message_type,
             custom_type, schema_version, payload, media, reply_to, mentions, state, recall_seq, edited_at,
             created_at, retention_class, dek) = row
        else:
            columns = row if type(row) in ordered else _columns(row)
            (tenant_id, conversation_id, bucket, seq, message_id, last_activity_id, sender_id, sender_device_id,
             client_message_id, message_type, custom_type, schema_version, payload, media, reply_to, mentions, state,
             recall_seq, edited_at, created_at, retention_class, dek) = columns
        if message_id is not None:
            mid = from_bytes(message_id, "big") if type(message_id) is bytes and len(message_id) == 16 \
                else blob_to_u128(message_id)
            if wanted is not None and wanted.get(seq) != mid:
                append(None)  # not asked for: not opened, not checked
                continue
        elif skip_partial:
            continue
        if seq is None or message_id is None or last_activity_id is None or not keyless and (
                tenant_id is None or conversation_id is None or bucket is None):
            raise _partial_row(partition + tuple(row) if keyless else tuple(columns))
        body, e2ee, dek_id = b"", False, None
        if payload is not None:
            if dek is None:
                raise ValidationError("row has a payload but no dek_id", column="dek_id", conversation_seq=seq)
            if dek != last_dek or not (keyless or type(tenant_id) is _UUID and type(conversation_id) is _UUID
                                       and tenant_id.int == last_tenant and conversation_id.int == last_conversation):
                tenant_id, conversation_id = parse_uuid(tenant_id), parse_uuid(conversation_id)
                key = keys.get(tenant_id, conversation_id, dek)
                last_dek, last_tenant, last_conversation = dek, tenant_id.int, conversation_id.int
                if type(key) is tuple:  # unpacked once per key, not once per row
                    cipher, pack, prefix, version, key_dek_id = key
            if type(key) is not tuple:
                if skip_destroyed and isinstance(key, KeyDestroyed):
                    append(None)
                    continue
                raise key
            dek_id = key_dek_id
            if type(payload) is bytes and len(payload) >= MIN_BLOB_BYTES and type(seq) is int and 0 <= seq < BIT63:
                # bytes slices, not memoryview slices: copying a few hundred bytes costs less than the
                # view and its two slices (50-row page: 0.94x the decode time, paired runs)
                try:
                    envelope = cipher.decrypt(payload[:NONCE_BYTES], payload[NONCE_BYTES:],
                                              pack(prefix, seq, version))
                except InvalidTag:
                    raise DecryptError("authentication failed: wrong key, wrong row (AAD) or tampered ciphertext",
                                       tenant_id=tenant_id, conversation_id=conversation_id, conversation_seq=seq,
                                       dek_id=dek_id) from None
            else:  # the unusual blob or seq: decrypt() checks and names it
                envelope = encryptor.decrypt(payload, tenant_id=tenant_id, conversation_id=conversation_id,
                                             conversation_seq=seq, dek_id=dek_id)
            flag = envelope[0] if envelope else -1
            if flag == ENVELOPE_PLAIN:
                body = envelope[ENVELOPE_FLAG_BYTES:]
            elif flag == ENVELOPE_E2EE:
                body, e2ee = envelope[ENVELOPE_FLAG_BYTES:], True
            else:
                body, e2ee = _envelope(envelope, seq)  # raises: no valid flag byte
        elif dek is not None:
            dek_id = _dek_id(dek if type(dek) is tuple else tuple(dek))
        # every field once, in Message's order (tests/unit/test_records_decode.py), no dataclass __init__
        message = new(_Fields)
        message.tenant_id = tenant_id
        message.conversation_id = conversation_id
        message.seq_bucket = bucket
        message.conversation_seq = seq
        message.message_id = mid
        message.last_activity_id = from_bytes(last_activity_id, "big") \
            if type(last_activity_id) is bytes and len(last_activity_id) == 16 else blob_to_u128(last_activity_id)
        message.sender_id = sender_id
        message.sender_device_id = sender_device_id
        message.client_message_id = client_message_id or ""
        message.message_type = _TEXT if message_type == 1 and type(message_type) is int \
            else _TYPES.get(message_type) or _enum(MessageType, message_type)
        message.custom_type = custom_type
        message.schema_version = schema_version or RECORD_SCHEMA_VERSION
        message.body = body
        message.e2ee = e2ee
        message.media = None if media is None else MediaMetadata.decode(media)
        message.reply_to_conversation_seq = reply_to
        message.mentions = None if mentions is None else MentionTargets.decode(mentions)
        # Recalled stays recalled: only a recall sets the coordinate (lab.store.write.recall), so a row
        # carrying it reads as RECALLED even in the instant a racing edit's state cell wins.
        message.state = _RECALLED if recall_seq is not None else _NORMAL if not state \
            else _STATES.get(state) or _enum(MessageState, state)
        message.recall_event_conversation_seq = recall_seq
        message.edited_at_activity_id = None if edited_at is None else blob_to_u128(edited_at)
        message.created_at_ms = created_at or 0
        message.retention_class = _DEFAULT_CLASS if not retention_class \
            else _CLASSES.get(retention_class) or _enum(RetentionClass, retention_class)
        message.dek_id = dek_id
        message.__class__ = message_class
        append(message)
    return out
