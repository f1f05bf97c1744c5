"""A message row for the hot window's tests: seq ``seq`` of one conversation, a body that names
its seq, one sender (shared by the real-Redis tests of its rounds and lanes)."""
from __future__ import annotations

import time
import uuid

from lab.store import EncodedRecord, u128_to_blob


def hot_record(tenant: uuid.UUID, conversation: uuid.UUID, seq: int) -> EncodedRecord:
    sender = uuid.UUID(int=1)
    return EncodedRecord(tenant_id=tenant, conversation_id=conversation, seq_bucket=0, conversation_seq=seq,
                         message_id=u128_to_blob(seq), last_activity_id=u128_to_blob(seq), sender_id=sender,
                         sender_device_id=sender, client_message_id=f"c-{seq}", message_type=1, schema_version=1,
                         state=0, payload_or_ciphertext=b"body %d" % seq, dek_id=("conversation", "k", 1),
                         retention_class=0, created_at=time.time_ns() // 1_000_000)
