"""The encoded message_record row: its CQL column values as typed fields (:class:`EncodedRecord`).

More: docs/store-internals.md.
"""
from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cassandra.query import UNSET_VALUE

from lab.errors import ValidationError

__all__ = ["MESSAGE_RECORD_COLUMNS", "MESSAGE_RECORD_KEY", "WIRE_JSON", "EncodedRecord"]

MESSAGE_RECORD_COLUMNS: tuple[str, ...] = (
    "tenant_id", "conversation_id", "seq_bucket", "conversation_seq", "message_id", "last_activity_id",
    "sender_id", "sender_device_id", "client_message_id", "message_type", "custom_type", "schema_version",
    "payload_or_ciphertext", "media_metadata", "reply_to_conversation_seq", "mention_targets", "state",
    "recall_event_conversation_seq", "edited_at_activity_id", "created_at", "retention_class", "dek_id",
)
MESSAGE_RECORD_KEY: tuple[str, ...] = ("tenant_id", "conversation_id", "seq_bucket", "conversation_seq")
# A wire form as the logs and the hot window store it: compact JSON, keys sorted. One encoder for
# every call (json.dumps given separators or sort_keys builds a new one per call).
WIRE_JSON = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode

# How each column travels in the wire form (JSON): blobs as hex, UUIDs as str, dek_id as a list.
_BLOB_COLUMNS = frozenset({"message_id", "last_activity_id", "edited_at_activity_id", "payload_or_ciphertext",
                           "media_metadata", "mention_targets"})
_UUID_COLUMNS = frozenset({"tenant_id", "conversation_id", "sender_id", "sender_device_id"})
_INT_COLUMNS = frozenset({"seq_bucket", "conversation_seq", "message_type", "schema_version", "state", "created_at",
                          "retention_class", "reply_to_conversation_seq", "recall_event_conversation_seq"})
_TEXT_COLUMNS = frozenset({"client_message_id", "custom_type"})
# (column, its value's wire form or None for as it is), in column order: one pass per record
_TO_WIRE: tuple[tuple[str, Any], ...] = tuple(
    (name, (lambda v: bytes(v).hex()) if name in _BLOB_COLUMNS else str if name in _UUID_COLUMNS
     else list if name == "dek_id" else None) for name in MESSAGE_RECORD_COLUMNS)
_REQUIRED = frozenset({"tenant_id", "conversation_id", "seq_bucket", "conversation_seq", "message_id",
                       "last_activity_id", "sender_id", "sender_device_id", "client_message_id", "message_type",
                       "schema_version", "payload_or_ciphertext", "state", "created_at", "retention_class",
                       "dek_id"})


@dataclass(frozen=True, kw_only=True)
class EncodedRecord:
    """One message_record row as the store binds it: u128 ids as 16-byte blobs, enums as ints,
    the body sealed, dek_id the (scope, key_id, version) tuple that sealed it. Optional columns
    are None (bound as UNSET, never as a null cell)."""

    tenant_id: uuid.UUID
    conversation_id: uuid.UUID
    seq_bucket: int
    conversation_seq: int
    message_id: bytes
    last_activity_id: bytes
    sender_id: uuid.UUID
    sender_device_id: uuid.UUID
    client_message_id: str
    message_type: int
    custom_type: str | None = None
    schema_version: int
    payload_or_ciphertext: bytes
    media_metadata: bytes | None = None
    reply_to_conversation_seq: int | None = None
    mention_targets: bytes | None = None
    state: int
    recall_event_conversation_seq: int | None = None
    edited_at_activity_id: bytes | None = None
    created_at: int
    retention_class: int
    dek_id: tuple[str, str, int]

    @classmethod
    def of(cls, fields: dict[str, Any]) -> EncodedRecord:
        """A record from every one of its fields, already checked (the encoder's and ``from_wire``'s
        own), without the frozen dataclass __init__: 22 ``object.__setattr__`` calls cost about
        three times the dict they fill, once per send and per archived row."""
        record = object.__new__(cls)
        record.__dict__.update(fields)
        return record

    def values(self) -> tuple[Any, ...]:
        """Bind values in :data:`MESSAGE_RECORD_COLUMNS` order (for the prepared INSERT).

        An absent value binds as UNSET, not null: a bound null is written as a tombstone cell,
        and a dozen optional columns per row would make every history read scan tombstones
        (S-6 demands zero). UNSET leaves the cell alone, which for an upsert of the same
        message is the same row."""
        d = self.__dict__
        return tuple([UNSET_VALUE if (v := d[name]) is None else v for name in MESSAGE_RECORD_COLUMNS])

    def columns(self) -> tuple[Any, ...]:
        """The column values in :data:`MESSAGE_RECORD_COLUMNS` order, None where absent."""
        d = self.__dict__
        return tuple([d[name] for name in MESSAGE_RECORD_COLUMNS])

    def index_values(self) -> tuple[Any, ...]:
        """message_index's columns: tenant_id, message_id, conversation_id, conversation_seq, seq_bucket."""
        return self.tenant_id, self.message_id, self.conversation_id, self.conversation_seq, self.seq_bucket

    def replace(self, **changes: Any) -> EncodedRecord:
        return dataclasses.replace(self, **changes)

    # ---- wire form ----------------------------------------------------------------------------
    def to_wire(self) -> dict[str, Any]:
        """JSON-ready: every column by name, blobs as hex, UUIDs as str, dek_id as a list."""
        d = self.__dict__
        return {name: None if (value := d[name]) is None else value if wire is None else wire(value)
                for name, wire in _TO_WIRE}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> EncodedRecord:
        """Inverse of :meth:`to_wire`; a typed ValidationError for anything that is not one."""
        if not isinstance(data, Mapping):
            raise ValidationError(f"an encoded record's wire form is a mapping, got {type(data).__name__}",
                                  field="columns")
        missing = [name for name in MESSAGE_RECORD_COLUMNS if name not in data]
        if missing:
            raise ValidationError(f"outbox record lacks columns: {', '.join(missing)}", columns=missing)
        fields: dict[str, Any] = {}
        for name in MESSAGE_RECORD_COLUMNS:
            value = data[name]
            try:
                fields[name] = _from_wire(name, value)
            except (TypeError, ValueError, AttributeError):
                raise ValidationError(f"column {name} has no valid wire value: {value!r}", column=name,
                                      value=value) from None
        return cls.of(fields)


def _from_wire(name: str, value: Any) -> Any:
    if value is None:
        if name in _REQUIRED:
            raise ValueError("required")
        return None
    if name in _BLOB_COLUMNS:
        return bytes.fromhex(value)
    if name in _UUID_COLUMNS:
        return uuid.UUID(value)
    if name == "dek_id":
        scope, key_id, version = value
        if not isinstance(scope, str) or not isinstance(key_id, str) or type(version) is not int:
            raise TypeError("dek_id")
        return scope, key_id, version
    if name in _INT_COLUMNS and type(value) is not int:
        raise TypeError(name)
    if name in _TEXT_COLUMNS and not isinstance(value, str):
        raise TypeError(name)
    return value
