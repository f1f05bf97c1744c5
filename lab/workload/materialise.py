"""Materialisation: a workload row -> the store's inputs, the same bytes every time.

:func:`to_message` gives a ``lab.store.rows.records.Message`` at the row's own coordinates (bulk
loads that bypass the write path); :func:`to_send_request` a ``lab.store.SendRequest`` (the
store then allocates conversation_seq itself, so dataset holes do not carry over). Bodies,
media metadata and mentions come from the row's ``content_seed``.
"""
from __future__ import annotations

import math
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd

from lab.store import (
    MediaMetadata,
    MentionTargets,
    Message,
    MessageType,
    RetentionClass,
    SendRequest,  # type: ignore[attr-defined]
    compose_message_id,
)
from lab.workload.synthesis import MEDIA_TYPES, entity_uuid

BLURHASH_CHARS = 28
CHECKSUM_BYTES = 32
_VOCAB = ("ok yes no the a to and of you i it in is that for on this we be have are with just not so but "
          "what can will see lol thanks meeting tomorrow today later call send file photo here there "
          "good great sure sounds fine let me know when where who how why please sorry again done").split()


def _get(row: Any, name: str) -> Any:
    return row[name] if isinstance(row, Mapping) else getattr(row, name)


def _row_rng(row: Any, salt: int) -> np.random.Generator:
    return np.random.default_rng([int(_get(row, "content_seed")), salt])


def body_for(row: Any) -> bytes:
    """The message body: words for text/captions, JSON-ish for custom, opaque bytes for E2EE."""
    n = int(_get(row, "body_bytes"))
    if n == 0:
        return b""
    rng = _row_rng(row, 1)
    if bool(_get(row, "e2ee")):
        return rng.bytes(n)
    words = np.array(_VOCAB, dtype=object)[rng.integers(0, len(_VOCAB), n // 3 + 2)]
    text = " ".join(words)
    if int(_get(row, "message_type")) == MessageType.CUSTOM:
        text = '{"type":"' + str(_get(row, "custom_type")) + '","text":"' + text
    data = text.encode()
    return data[:n] if len(data) >= n else data + b"." * (n - len(data))


def media_for(row: Any) -> Any:
    """``lab.store.rows.media.MediaMetadata`` of a media row (None for text, custom and E2EE rows)."""
    mtype = int(_get(row, "message_type"))
    if mtype not in [int(t) for t in MEDIA_TYPES] or bool(_get(row, "e2ee")):
        return None

    rng = _row_rng(row, 2)
    thumb_n = int(_get(row, "thumbnail_bytes"))
    has_thumb = thumb_n > 0
    alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz#$%*+,-.:;=?@[]^_{|}~"
    blurhash = "".join(alphabet[i] for i in rng.integers(0, len(alphabet), BLURHASH_CHARS)) if has_thumb else ""
    return MediaMetadata(
        object_id=f"obj/{uuid.UUID(bytes=rng.bytes(16), version=4)}", mime=str(_get(row, "mime")),
        size_bytes=int(_get(row, "media_size_bytes")), width=int(_get(row, "media_width")),
        height=int(_get(row, "media_height")), duration_ms=int(_get(row, "duration_ms")),
        thumbnail=rng.bytes(thumb_n),  # JPEG bytes are as incompressible as random ones
        blurhash=blurhash, checksum=rng.bytes(CHECKSUM_BYTES))


def mentions_for(row: Any, seed: int) -> Any:
    """``lab.store.rows.media.MentionTargets`` of a row (None without mentions); ``seed`` is the dataset's."""
    count, at_all = int(_get(row, "mention_count")), bool(_get(row, "mention_all"))
    if count == 0 and not at_all:
        return None

    rng = _row_rng(row, 3)
    members, sender = int(_get(row, "members")), int(_get(row, "sender_member"))
    others = [m for m in rng.choice(members, size=min(members, count + 1), replace=False) if m != sender][:count]
    conv = int(_get(row, "conversation_idx"))
    return MentionTargets(user_ids=tuple(entity_uuid(seed, "user", conv, int(m)) for m in others), at_all=at_all)


def _optional_int(value: Any) -> int | None:
    return None if value is None or pd.isna(value) else int(value)


def to_message(row: Any, *, seed: int, message_id: int | None = None, node_id: int = 1) -> Any:
    """A ``lab.store.rows.records.Message`` at the row's own coordinates (bulk loads that bypass the
    write path: the archiver's shape). message_id defaults to (created_at, node, row)."""

    mid = message_id if message_id is not None else compose_message_id(
        time_ms=int(_get(row, "created_at_ms")), node_id=node_id, counter=int(_get(row, "row")))
    custom = _get(row, "custom_type")
    return Message(
        tenant_id=uuid.UUID(str(_get(row, "tenant_id"))), conversation_id=uuid.UUID(str(_get(row, "conversation_id"))),
        seq_bucket=int(_get(row, "seq_bucket")), conversation_seq=int(_get(row, "conversation_seq")),
        message_id=mid, last_activity_id=mid, sender_id=uuid.UUID(str(_get(row, "sender_id"))),
        sender_device_id=uuid.UUID(str(_get(row, "sender_device_id"))),
        client_message_id=str(_get(row, "client_message_id")), message_type=MessageType(int(_get(row, "message_type"))),
        custom_type=None if custom is None or (isinstance(custom, float) and math.isnan(custom)) else str(custom),
        body=body_for(row), e2ee=bool(_get(row, "e2ee")), media=media_for(row),
        reply_to_conversation_seq=_optional_int(_get(row, "reply_to_conversation_seq")),
        mentions=mentions_for(row, seed), created_at_ms=int(_get(row, "created_at_ms")),
        retention_class=RetentionClass(int(_get(row, "retention_class"))))


def to_send_request(row: Any, *, seed: int) -> Any:
    """A ``lab.store.SendRequest`` for the row (the store allocates conversation_seq)."""

    custom = _get(row, "custom_type")
    return SendRequest(
        tenant_id=uuid.UUID(str(_get(row, "tenant_id"))), conversation_id=uuid.UUID(str(_get(row, "conversation_id"))),
        sender_id=uuid.UUID(str(_get(row, "sender_id"))), sender_device_id=uuid.UUID(str(_get(row, "sender_device_id"))),
        client_message_id=str(_get(row, "client_message_id")), body=body_for(row),
        message_type=MessageType(int(_get(row, "message_type"))), media=media_for(row),
        mentions=mentions_for(row, seed), reply_to_conversation_seq=None,
        retention_class=RetentionClass(int(_get(row, "retention_class"))), e2ee=bool(_get(row, "e2ee")),
        custom_type=None if custom is None or (isinstance(custom, float) and math.isnan(custom)) else str(custom))


def send_requests(messages: pd.DataFrame, *, seed: int) -> Iterator[Any]:
    for row in messages.to_dict("records"):
        yield to_send_request(row, seed=seed)


def messages_of(messages: pd.DataFrame, *, seed: int) -> Iterator[Any]:
    for row in messages.to_dict("records"):
        yield to_message(row, seed=seed)
