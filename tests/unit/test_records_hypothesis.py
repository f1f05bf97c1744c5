"""Property: any message survives encode_record -> (outbox wire form) -> decode_row unchanged,
sealed and opened with the local key store (SQLite file); no node."""
from __future__ import annotations

import dataclasses
import json
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab.constants import Constants
from lab.errors import CryptoError
from lab.store.crypto import Encryptor, LocalKeyStore
from lab.store import (BIT63, MediaMetadata, MentionTargets, MessageState, MessageType, RetentionClass, U128_MAX,
                       seq_bucket)
from lab.store.rows.records import (MESSAGE_RECORD_COLUMNS, Message, columns_from_wire, columns_to_wire, decode_row,
                               encode_record)

C = Constants.appendix_b()
BIGINT = st.integers(min_value=0, max_value=BIT63 - 1)
SEQ = st.integers(min_value=1, max_value=BIT63 - 1)
U128 = st.integers(min_value=0, max_value=U128_MAX)
UINT32 = st.integers(min_value=0, max_value=(1 << 32) - 1)
TEXT = st.text(max_size=40)
WIDTHS = st.sampled_from([1, 7, 4096, C.message_seq_bucket_width, 1 << 20])

media = st.builds(MediaMetadata, object_id=TEXT, mime=TEXT, size_bytes=st.integers(0, (1 << 64) - 1),
                  width=UINT32, height=UINT32, duration_ms=UINT32,
                  thumbnail=st.binary(max_size=C.media_thumbnail_max_bytes // 64), blurhash=TEXT,
                  checksum=st.binary(max_size=32))
mentions = st.builds(MentionTargets, user_ids=st.lists(st.uuids(), max_size=5).map(tuple), at_all=st.booleans())


@st.composite
def messages(draw: st.DrawFn) -> tuple[Message, int]:
    width = draw(WIDTHS)
    seq = draw(SEQ)
    state = draw(st.sampled_from(MessageState))
    # a recall coordinate on the row means recalled (it decodes as RECALLED whatever the state cell
    # says: a recall that overtook an edit), so only a recalled message carries one
    recall_event = draw(st.none() | SEQ) if state is MessageState.RECALLED else None
    message = Message(
        tenant_id=draw(st.uuids()), conversation_id=draw(st.uuids()), seq_bucket=seq_bucket(seq, width),
        conversation_seq=seq, message_id=draw(U128), last_activity_id=draw(U128), sender_id=draw(st.uuids()),
        sender_device_id=draw(st.uuids()), client_message_id=draw(st.text(min_size=1, max_size=60)),
        message_type=draw(st.sampled_from(MessageType)), custom_type=draw(st.none() | TEXT),
        body=draw(st.binary(max_size=2048)), e2ee=draw(st.booleans()), media=draw(st.none() | media),
        reply_to_conversation_seq=draw(st.none() | SEQ), mentions=draw(st.none() | mentions),
        state=state, recall_event_conversation_seq=recall_event,
        edited_at_activity_id=draw(st.none() | U128), created_at_ms=draw(BIGINT),
        retention_class=draw(st.sampled_from(RetentionClass)))
    return message, width


@pytest.fixture(scope="module")
def encryptor(tmp_path_factory) -> Encryptor:
    return Encryptor(LocalKeyStore(tmp_path_factory.mktemp("keys") / "keys.sqlite"))


PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(messages())
def test_encode_then_decode_is_the_identity(encryptor, drawn):
    message, width = drawn
    columns = encode_record(message, encryptor, bucket_width=width)
    assert list(columns) == list(MESSAGE_RECORD_COLUMNS)
    decoded = decode_row(columns, encryptor)
    assert decoded.dek_id is not None and decoded.dek_id.as_tuple() == tuple(columns["dek_id"])
    assert dataclasses.replace(decoded, dek_id=None) == message
    if message.body:
        assert message.body not in columns["payload_or_ciphertext"] or len(message.body) < 8  # sealed at rest


@PROPERTY
@given(messages())
def test_the_outbox_wire_form_carries_the_same_cells(encryptor, drawn):
    """Commit path -> outbox (JSON) -> archiver: the archiver writes the cells the commit path sealed."""
    message, width = drawn
    columns = encode_record(message, encryptor, bucket_width=width)
    wired = columns_from_wire(json.loads(json.dumps(columns_to_wire(columns))))
    assert wired == columns
    assert dataclasses.replace(decode_row(wired, encryptor), dek_id=None) == message


@settings(max_examples=40, deadline=None)
@given(messages(), st.integers(min_value=1, max_value=1000))
def test_a_payload_copied_to_another_row_does_not_open(encryptor, drawn, shift):
    """The row's coordinates are the AAD: the same cells under another seq or conversation fail."""
    message, width = drawn
    columns = encode_record(message, encryptor, bucket_width=width)
    moved_seq = {**columns, "conversation_seq": (message.conversation_seq + shift - 1) % (BIT63 - 1) + 1}
    if moved_seq["conversation_seq"] != message.conversation_seq:
        with pytest.raises(CryptoError):
            decode_row(moved_seq, encryptor)
    with pytest.raises(CryptoError):
        decode_row({**columns, "conversation_id": uuid.uuid4()}, encryptor)
