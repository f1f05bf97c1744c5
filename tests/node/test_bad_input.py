"""Bad input raises a typed error and leaves the six tables (and the outbox) unchanged.

Each case is checked by reading every table back before and after the call.
"""
from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from lab.errors import (Bit63Violation, InvalidId, InvalidSeq, NotFound, PayloadTooLarge, UnknownEnum,
                        UnknownRetentionClass, ValidationError)
from lab.store import BIT63, MediaMetadata, MessageType
from store_checks import new_request, snapshot_tables

pytestmark = pytest.mark.node

LIMITS = {"payload": 65536, "thumbnail": 32768}

BAD_SENDS = {
    "malformed tenant uuid": (dict(tenant_id="not-a-uuid"), InvalidId),
    "malformed conversation uuid": (dict(conversation_id="1234"), InvalidId),
    "conversation id of wrong type": (dict(conversation_id=1234), InvalidId),
    "sender id missing": (dict(sender_id=None), InvalidId),
    "device id as bytes": (dict(sender_device_id=uuid.uuid4().bytes), InvalidId),
    "empty client_message_id": (dict(client_message_id=""), InvalidId),
    "over-long client_message_id": (dict(client_message_id="x" * 129), InvalidId),
    "client_message_id of wrong type": (dict(client_message_id=42), InvalidId),
    "client_message_id not utf-8": (dict(client_message_id="bad\ud800"), InvalidId),
    "body of wrong type": (dict(body="text, not bytes"), ValidationError),
    "oversized body": (dict(body=b"x" * (LIMITS["payload"] + 1)), PayloadTooLarge),
    "oversized thumbnail": (dict(media=MediaMetadata(object_id="o", thumbnail=b"t" * (LIMITS["thumbnail"] + 1))),
                            PayloadTooLarge),
    "media of wrong type": (dict(media={"object_id": "o"}), ValidationError),
    "mentions of wrong type": (dict(mentions=[uuid.uuid4()]), ValidationError),
    "unknown retention class name": (dict(retention_class="forever"), UnknownRetentionClass),
    "unknown retention class value": (dict(retention_class=9), UnknownRetentionClass),
    "unknown message type": (dict(message_type="sticker"), UnknownEnum),
    "reserved message type CONTROL": (dict(message_type=MessageType.CONTROL), UnknownEnum),
    "reply_to with bit 63": (dict(reply_to_conversation_seq=BIT63), Bit63Violation),
    "reply_to beyond u64": (dict(reply_to_conversation_seq=1 << 64), Bit63Violation),
    "negative reply_to": (dict(reply_to_conversation_seq=-1), Bit63Violation),
    "reply_to zero": (dict(reply_to_conversation_seq=0), InvalidSeq),
    "reply_to of wrong type": (dict(reply_to_conversation_seq="5"), InvalidSeq),
    "e2ee of wrong type": (dict(e2ee="yes"), ValidationError),
    "custom_type of wrong type": (dict(custom_type=5), ValidationError),
}


@pytest.fixture(scope="module")
def seeded(store):
    """One real message so "unchanged" is checked against non-empty tables."""
    req = new_request()
    ack = store.send(req)
    store.drain()
    return req, ack


@pytest.mark.parametrize("case", list(BAD_SENDS))
def test_bad_send_raises_typed_error_and_writes_nothing(store, seeded, case):
    changes, error = BAD_SENDS[case]
    assert store.constants.payload_max_bytes == LIMITS["payload"]
    assert store.constants.media_thumbnail_max_bytes == LIMITS["thumbnail"]
    req = replace(seeded[0], client_message_id=f"bad-{uuid.uuid4().hex[:8]}")
    before = snapshot_tables(store)
    with pytest.raises(error):  # the request refuses itself when built, or send refuses it (size limits)
        store.send(replace(req, **changes))
    store.drain()
    assert snapshot_tables(store) == before


def test_not_a_request_is_refused(store, seeded):
    before = snapshot_tables(store)
    with pytest.raises(ValidationError):
        store.send({"tenant_id": seeded[0].tenant_id})
    assert snapshot_tables(store) == before


def test_at_most_the_limits_are_accepted(store):
    """The edges of the two size limits are inside: the refusals above are not off by one."""
    req = new_request(body=b"x" * LIMITS["payload"],
                      media=MediaMetadata(object_id="o", thumbnail=b"t" * LIMITS["thumbnail"]),
                      client_message_id="y" * 128)
    assert store.send(req).conversation_seq == 1
    store.drain()  # its head update is asynchronous: landing during the next test, it changed that test's tables (CI)


BAD_RECALLS = {
    "malformed tenant": (dict(tenant_id="nope"), InvalidId),
    "seq with bit 63": (dict(conversation_seq=BIT63 + 1), Bit63Violation),
    "seq zero": (dict(conversation_seq=0), InvalidSeq),
    "malformed actor": (dict(actor_id="someone"), InvalidId),
    "no such message": (dict(conversation_seq=999), NotFound),
}


@pytest.mark.parametrize("case", list(BAD_RECALLS))
def test_bad_recall_and_edit_write_nothing(store, seeded, case):
    req, ack = seeded
    changes, error = BAD_RECALLS[case]
    args = {"tenant_id": req.tenant_id, "conversation_id": req.conversation_id,
            "conversation_seq": ack.conversation_seq, "actor_id": req.sender_id, **changes}
    where = (args["tenant_id"], args["conversation_id"], args["conversation_seq"])
    before = snapshot_tables(store)
    with pytest.raises(error):
        store.recall(*where, actor_id=args["actor_id"])
    with pytest.raises(error):
        store.edit(*where, body=b"new", actor_id=args["actor_id"])
    assert snapshot_tables(store) == before


@pytest.mark.parametrize("body, error", [(b"x" * (LIMITS["payload"] + 1), PayloadTooLarge),
                                         ("text", ValidationError)])
def test_bad_edit_body_writes_nothing(store, seeded, body, error):
    req, ack = seeded
    before = snapshot_tables(store)
    with pytest.raises(error):
        store.edit(req.tenant_id, req.conversation_id, ack.conversation_seq, body=body, actor_id=req.sender_id)
    assert snapshot_tables(store) == before
