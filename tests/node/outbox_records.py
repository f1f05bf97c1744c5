"""Outbox records for the outbox tests: a logged message tagged by its client_message_id, an edit
of a chosen size, and the tag read back."""
from __future__ import annotations

from lab.store import EditEvent, EncodedRecord, MessagePayload, OutboxRecord


def message(tenant, conversation, seq, tag: str = "") -> OutboxRecord:
    """A logged message whose client_message_id is ``tag`` (what a test reads back)."""
    return OutboxRecord(tenant_id=tenant, conversation_id=conversation, conversation_seq=seq, payload=MessagePayload(
        record=EncodedRecord(tenant_id=tenant, conversation_id=conversation, seq_bucket=0, conversation_seq=seq,
                             message_id=seq.to_bytes(16, "big"), last_activity_id=bytes(16), sender_id=tenant,
                             sender_device_id=tenant, client_message_id=tag or f"m-{seq}", message_type=1,
                             schema_version=1, state=0, payload_or_ciphertext=b"\x00sealed",
                             dek_id=("conversation", "k", 1), retention_class=0, created_at=seq)))


def edit(tenant, conversation, seq: int, size: int) -> OutboxRecord:
    """An edit of message 1 whose sealed payload is ``size`` bytes (twice that as hex in the log)."""
    return OutboxRecord(tenant_id=tenant, conversation_id=conversation, conversation_seq=seq, target_seq=1,
                        payload=EditEvent(actor_id=tenant, activity_id=seq, created_at_ms=seq,
                                          payload_or_ciphertext=b"e" * size, dek_id=("conversation", "k", 1)))


def tag(entry) -> str:
    return entry.record.payload.record.client_message_id
