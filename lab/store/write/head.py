"""conversation_head: the row (design §2.4), its updates and its point read.

More: docs/store-internals.md.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from lab.store.plumbing.context import StoreContext
from lab.store.crypto import KEY_SCOPE_CONVERSATION, conversation_dek_key_id
from lab.errors import CryptoError, ValidationError
from lab.store.rows.ids import DekId, blob_to_u128, check_conversation_seq, parse_uuid, u128_to_blob
from lab.store.rows.records import open_payload, seal_payload

__all__ = ["ConversationHead", "HeadUpdate", "check_head_update", "read_head", "seal_preview"]

PREVIEW_MAX_BYTES = 128
KEY_VERSION_BYTES = 4
# What "no messages trimmed yet" reads as: the design's E bound with nothing below seq 1.
# Only lab.store.write.earliest (the advancer) moves it; the head writer never writes E.
EARLIEST_AVAILABLE_DEFAULT = 1

HEAD_KEY = ("tenant_id", "conversation_id")
_HEAD_COLUMNS = ("latest_conversation_seq, earliest_available_conversation_seq, last_message_id, "
                 "last_activity_id, last_sender_id, preview_or_placeholder, member_count, updated_at, "
                 "fencing_epoch, head_version")


@dataclass(frozen=True, kw_only=True)
class ConversationHead:
    tenant_id: uuid.UUID
    conversation_id: uuid.UUID
    latest_conversation_seq: int
    earliest_available_conversation_seq: int = EARLIEST_AVAILABLE_DEFAULT
    last_message_id: int | None = None
    last_activity_id: int | None = None
    last_sender_id: uuid.UUID | None = None
    preview: bytes | None = field(default=None, repr=False)  # decrypted; None if absent/unreadable
    preview_e2ee: bool = False
    member_count: int | None = None
    updated_at_ms: int | None = None
    fencing_epoch: int | None = None
    head_version: int | None = None


@dataclass(frozen=True, kw_only=True)
class HeadUpdate:
    tenant_id: uuid.UUID
    conversation_id: uuid.UUID
    conversation_seq: int
    message_id: int
    last_activity_id: int
    sender_id: uuid.UUID
    preview: bytes = field(default=b"", repr=False)
    e2ee: bool = False

    def __post_init__(self) -> None:
        # Checked here, not at apply time: submit() runs on another thread, where a bad
        # value would only surface as a counted failure instead of the caller's error.
        for name in ("tenant_id", "conversation_id", "sender_id"):
            object.__setattr__(self, name, parse_uuid(getattr(self, name)))
        check_conversation_seq(self.conversation_seq)
        u128_to_blob(self.message_id)
        u128_to_blob(self.last_activity_id)
        if not isinstance(self.preview, (bytes, bytearray, memoryview)):
            raise ValidationError(f"preview must be bytes, got {type(self.preview).__name__}", field="preview")
        if not isinstance(self.e2ee, bool):
            raise ValidationError(f"e2ee must be a bool, got {self.e2ee!r}", field="e2ee")


def check_head_update(update: object) -> HeadUpdate:
    """``update`` if it is a :class:`HeadUpdate` (which checked its values when built), else a typed error."""
    if not isinstance(update, HeadUpdate):
        raise ValidationError(f"a head update is a lab.store.HeadUpdate, got {type(update).__name__}", field="update")
    return update


def seal_preview(ctx: StoreContext, update: HeadUpdate) -> bytes:
    text = b"" if update.e2ee else bytes(update.preview[:PREVIEW_MAX_BYTES])
    blob, dek_id = seal_payload(text, e2ee=update.e2ee, encryptor=ctx.encryptor, tenant_id=update.tenant_id,
                                conversation_id=update.conversation_id, conversation_seq=update.conversation_seq)
    return dek_id.key_version.to_bytes(KEY_VERSION_BYTES, "big") + blob


def _open_preview(ctx: StoreContext, tenant_id: uuid.UUID, conversation_id: uuid.UUID, seq: int,
                  blob: bytes) -> tuple[bytes | None, bool]:
    if blob is None or len(blob) <= KEY_VERSION_BYTES:
        return None, False
    version = int.from_bytes(blob[:KEY_VERSION_BYTES], "big")
    dek_id = DekId(key_scope=KEY_SCOPE_CONVERSATION, key_id=conversation_dek_key_id(tenant_id, conversation_id),
                   key_version=version)
    try:
        return open_payload(blob[KEY_VERSION_BYTES:], encryptor=ctx.encryptor, tenant_id=tenant_id,
                            conversation_id=conversation_id, conversation_seq=seq, dek_id=dek_id)
    except (CryptoError, ValidationError):
        # An erased conversation (or a preview sealed for another seq) must not make the
        # head unreadable: the bounds are what the read path needs from it.
        return None, False


def read_head(ctx: StoreContext, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str) -> ConversationHead | None:
    """The stored head (one point read), or None for a conversation without one."""
    tenant_id, conversation_id = parse_uuid(tenant_id), parse_uuid(conversation_id)
    stmt = ctx.prepare(f"SELECT {_HEAD_COLUMNS} FROM {{ks}}.conversation_head WHERE tenant_id = ? AND conversation_id = ?",
                       key_columns=HEAD_KEY)
    row = ctx.connection.execute(stmt, (tenant_id, conversation_id)).one()
    if row is None or row.latest_conversation_seq is None:
        return None
    preview, e2ee = _open_preview(ctx, tenant_id, conversation_id, row.latest_conversation_seq,
                                  row.preview_or_placeholder)
    earliest = row.earliest_available_conversation_seq
    return ConversationHead(
        tenant_id=tenant_id, conversation_id=conversation_id, latest_conversation_seq=row.latest_conversation_seq,
        earliest_available_conversation_seq=EARLIEST_AVAILABLE_DEFAULT if earliest is None else earliest,
        last_message_id=None if row.last_message_id is None else blob_to_u128(row.last_message_id),
        last_activity_id=None if row.last_activity_id is None else blob_to_u128(row.last_activity_id),
        last_sender_id=row.last_sender_id, preview=preview, preview_e2ee=e2ee, member_count=row.member_count,
        updated_at_ms=row.updated_at, fencing_epoch=row.fencing_epoch, head_version=row.head_version)
