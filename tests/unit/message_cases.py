"""Messages for the decode tests (test_records_decode, test_records_native): the ids they share, a
message at a seq, and every field of a decoded Message as (name, type, value)."""
from __future__ import annotations

import dataclasses
import uuid

from lab.store import Message, MessageType

T, C, S, D = uuid.UUID(int=1), uuid.UUID(int=2), uuid.UUID(int=3), uuid.UUID(int=4)


def fields_of(message):
    """Every field's (name, type, value): what the constructor set (a slot never set raises here)."""
    return [(f.name, type(getattr(message, f.name)), getattr(message, f.name)) for f in dataclasses.fields(message)]


def message_at(seq, **kw):
    """A text message of conversation (T, C) at ``seq`` from sender S on device D; ``kw`` overrides fields."""
    fields = dict(tenant_id=T, conversation_id=C, seq_bucket=0, conversation_seq=seq, message_id=seq << 70,
                  last_activity_id=(seq << 70) + 1, sender_id=S, sender_device_id=D, client_message_id=f"c-{seq}",
                  message_type=MessageType.TEXT, body=b"hello %d" % seq, created_at_ms=1_700_000_000_000 + seq)
    return Message(**(fields | kw))
