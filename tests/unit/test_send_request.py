"""SendRequest checks and normalises itself when built (no node): a bad request is a typed error
before any store sees it; the store's size limits are check_limits. The same cases against the
node, with "nothing written": tests/node/test_bad_input.py."""
from __future__ import annotations

import dataclasses
import uuid

import pytest

from lab.errors import (Bit63Violation, InvalidId, InvalidSeq, PayloadTooLarge, UnknownEnum, UnknownRetentionClass,
                        ValidationError)
from lab.store import BIT63, MediaMetadata, MessageType, RetentionClass, SendRequest

T = uuid.UUID(int=1)
GOOD = dict(tenant_id=T, conversation_id=T, sender_id=T, sender_device_id=T, client_message_id="c-1")

BAD = {
    "malformed tenant uuid": (dict(tenant_id="not-a-uuid"), InvalidId),
    "sender id missing": (dict(sender_id=None), InvalidId),
    "device id as bytes": (dict(sender_device_id=T.bytes), InvalidId),
    "empty client_message_id": (dict(client_message_id=""), InvalidId),
    "over-long client_message_id": (dict(client_message_id="x" * 129), InvalidId),
    "client_message_id with a control character": (dict(client_message_id="a\nb"), InvalidId),
    "client_message_id not utf-8": (dict(client_message_id="bad\ud800"), InvalidId),
    "body of wrong type": (dict(body="text"), ValidationError),
    "media of wrong type": (dict(media={"object_id": "o"}), ValidationError),
    "mentions of wrong type": (dict(mentions=[T]), ValidationError),
    "unknown retention class": (dict(retention_class="forever"), UnknownRetentionClass),
    "unknown message type": (dict(message_type="sticker"), UnknownEnum),
    "reserved CONTROL": (dict(message_type=MessageType.CONTROL), UnknownEnum),
    "reply_to with bit 63": (dict(reply_to_conversation_seq=BIT63), Bit63Violation),
    "reply_to zero": (dict(reply_to_conversation_seq=0), InvalidSeq),
    "e2ee of wrong type": (dict(e2ee="yes"), ValidationError),
    "custom_type of wrong type": (dict(custom_type=5), ValidationError),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_request_refuses_itself(case):
    changes, error = BAD[case]
    with pytest.raises(error):
        SendRequest(**GOOD | changes)
    good = SendRequest(**GOOD)
    with pytest.raises(error):
        dataclasses.replace(good, **changes)  # a copy is checked the same way


def test_a_request_is_normalised():
    req = SendRequest(**GOOD | dict(tenant_id=str(T), body=bytearray(b"hi"), message_type="text",
                                    retention_class="ephemeral_24h", reply_to_conversation_seq=3))
    assert req.tenant_id == T and isinstance(req.tenant_id, uuid.UUID)
    assert type(req.body) is bytes and req.body == b"hi"
    assert req.message_type is MessageType.TEXT and req.retention_class is RetentionClass.EPHEMERAL_24H


def test_the_store_limits_are_checked_at_the_edges():
    at_limit = SendRequest(**GOOD | dict(body=b"x" * 100, media=MediaMetadata(object_id="o", thumbnail=b"t" * 50)))
    at_limit.check_limits(payload_max_bytes=100, thumbnail_max_bytes=50)
    with pytest.raises(PayloadTooLarge):
        at_limit.check_limits(payload_max_bytes=99, thumbnail_max_bytes=50)
    with pytest.raises(PayloadTooLarge):
        at_limit.check_limits(payload_max_bytes=100, thumbnail_max_bytes=49)
