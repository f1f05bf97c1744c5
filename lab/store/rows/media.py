"""media_metadata and mention_targets columns: Protobuf blobs (design §5.2).

More: docs/store-internals.md.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from google.protobuf.message import DecodeError, EncodeError

from lab.constants import Constants
from lab.errors import PayloadTooLarge, ValidationError
from lab.store.rows.ids import parse_uuid
from lab.store.rows.proto import common_pb2

_DEFAULTS = Constants.appendix_b()

MEDIA_THUMBNAIL_MAX_BYTES = _DEFAULTS.media_thumbnail_max_bytes
UUID_BYTES = 16
_UINT32_MAX = (1 << 32) - 1
_UINT64_MAX = (1 << 64) - 1


def _check_uint(name: str, value: object, top: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= top:
        raise ValidationError(f"{name} must be an int in 0..{top}, got {value!r}", field=name, value=value)


def _check_thumbnail(thumbnail: bytes, limit_bytes: int | None) -> None:
    if limit_bytes is not None and len(thumbnail) > limit_bytes:
        raise PayloadTooLarge(f"thumbnail is {len(thumbnail)} B, over the {limit_bytes} B limit",
                              field="thumbnail", size=len(thumbnail), limit=limit_bytes)


def _parse(message_cls: type, data: bytes, column: str):
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ValidationError(f"{column} must be bytes, got {type(data).__name__}", column=column)
    try:
        return message_cls.FromString(bytes(data))
    except DecodeError as exc:
        raise ValidationError(f"malformed {column} blob: {exc}", column=column) from exc


def _serialize(message) -> bytes:
    try:
        return message.SerializeToString(deterministic=True)
    except EncodeError as exc:  # pragma: no cover - our dataclasses validate first
        raise ValidationError(f"cannot encode {type(message).__name__}: {exc}") from exc


@dataclass(frozen=True, kw_only=True)
class MediaMetadata:
    """Mirrors the proto message ``lab.common.MediaMetadata``; ``size_bytes`` is the proto's ``bytes`` field
    (renamed so the builtin type stays usable in this class and the unit is in the name)."""

    object_id: str = ""
    mime: str = ""
    size_bytes: int = 0
    width: int = 0
    height: int = 0
    duration_ms: int = 0
    thumbnail: bytes = field(default=b"", repr=False)  # up to 32 KiB: keep reprs short
    blurhash: str = ""
    checksum: bytes = field(default=b"", repr=False)

    def __post_init__(self) -> None:
        for name in ("object_id", "mime", "blurhash"):
            text = getattr(self, name)
            if not isinstance(text, str):
                raise ValidationError(f"{name} must be a str, got {type(text).__name__}", field=name)
            try:
                text.encode("utf-8")  # proto3 strings must be valid UTF-8
            except UnicodeEncodeError as exc:
                raise ValidationError(f"{name} is not valid UTF-8: {exc}", field=name) from exc
        for name in ("thumbnail", "checksum"):
            blob = getattr(self, name)
            if not isinstance(blob, (bytes, bytearray, memoryview)):
                raise ValidationError(f"{name} must be bytes, got {type(blob).__name__}", field=name)
            object.__setattr__(self, name, bytes(blob))
        _check_uint("size_bytes", self.size_bytes, _UINT64_MAX)
        for name in ("width", "height", "duration_ms"):
            _check_uint(name, getattr(self, name), _UINT32_MAX)

    def encode(self, *, thumbnail_max_bytes: int = MEDIA_THUMBNAIL_MAX_BYTES) -> bytes:
        _check_thumbnail(self.thumbnail, thumbnail_max_bytes)
        return _serialize(common_pb2.MediaMetadata(
            object_id=self.object_id, mime=self.mime, bytes=self.size_bytes, width=self.width,
            height=self.height, duration_ms=self.duration_ms, thumbnail=self.thumbnail,
            blurhash=self.blurhash, checksum=self.checksum))

    @classmethod
    def decode(cls, data: bytes, *, thumbnail_max_bytes: int | None = None) -> MediaMetadata:
        message = _parse(common_pb2.MediaMetadata, data, "media_metadata")
        _check_thumbnail(message.thumbnail, thumbnail_max_bytes)
        return cls(object_id=message.object_id, mime=message.mime, size_bytes=message.bytes,
                   width=message.width, height=message.height, duration_ms=message.duration_ms,
                   thumbnail=message.thumbnail, blurhash=message.blurhash, checksum=message.checksum)


@dataclass(frozen=True, kw_only=True)
class MentionTargets:
    """Mirrors the proto message ``lab.common.MentionTargets``; user ids are UUIDs, 16 raw bytes on the wire."""

    user_ids: tuple[uuid.UUID, ...] = ()
    at_all: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.user_ids, (str, bytes)) or not isinstance(self.user_ids, Iterable):
            raise ValidationError("user_ids must be a sequence of UUIDs", field="user_ids")
        object.__setattr__(self, "user_ids", tuple(parse_uuid(user) for user in self.user_ids))
        if not isinstance(self.at_all, bool):
            raise ValidationError(f"at_all must be a bool, got {self.at_all!r}", field="at_all")

    def encode(self) -> bytes:
        return _serialize(common_pb2.MentionTargets(user_ids=[user.bytes for user in self.user_ids],
                                                    at_all=self.at_all))

    @classmethod
    def decode(cls, data: bytes) -> MentionTargets:
        message = _parse(common_pb2.MentionTargets, data, "mention_targets")
        for raw in message.user_ids:
            if len(raw) != UUID_BYTES:
                raise ValidationError(f"mention user_id must be {UUID_BYTES} bytes, got {len(raw)}",
                                      column="mention_targets")
        return cls(user_ids=tuple(uuid.UUID(bytes=raw) for raw in message.user_ids), at_all=message.at_all)
