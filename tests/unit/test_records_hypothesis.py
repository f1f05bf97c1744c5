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
from lab.store.rows.records import MESSAGE_RECORD_COLUMNS, EncodedRecord, Message, decode_row, encode_record

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
    record = encode_record(message, encryptor, bucket_width=width)
    assert [f.name for f in dataclasses.fields(record)] == list(MESSAGE_RECORD_COLUMNS)
    decoded = decode_row(record, encryptor)
    assert decoded.dek_id is not None and decoded.dek_id.as_tuple() == record.dek_id
    assert dataclasses.replace(decoded, dek_id=None) == message
    if message.body:
        assert message.body not in record.payload_or_ciphertext or len(message.body) < 8  # sealed at rest


@PROPERTY
@given(messages())
def test_the_outbox_wire_form_carries_the_same_cells(encryptor, drawn):
    """Commit path -> outbox (JSON) -> archiver: the archiver writes the cells the commit path sealed."""
    message, width = drawn
    record = encode_record(message, encryptor, bucket_width=width)
    wire = json.loads(json.dumps(record.to_wire()))
    wired = EncodedRecord.from_wire(wire)
    assert wired == record and wired.values() == record.values() and wired.to_wire() == wire
    assert dataclasses.replace(decode_row(wired, encryptor), dek_id=None) == message


@settings(max_examples=40, deadline=None)
@given(messages(), st.integers(min_value=1, max_value=1000))
def test_a_payload_copied_to_another_row_does_not_open(encryptor, drawn, shift):
    """The row's coordinates are the AAD: the same cells under another seq or conversation fail."""
    message, width = drawn
    record = encode_record(message, encryptor, bucket_width=width)
    moved_seq = record.replace(conversation_seq=(message.conversation_seq + shift - 1) % (BIT63 - 1) + 1)
    if moved_seq.conversation_seq != message.conversation_seq:
        with pytest.raises(CryptoError):
            decode_row(moved_seq, encryptor)
    with pytest.raises(CryptoError):
        decode_row(record.replace(conversation_id=uuid.uuid4()), encryptor)


# The wire form of a message record as the code before EncodedRecord wrote it (records.columns_to_wire
# at 7dd0829): outbox files, Kafka topics and hot windows written then must still read.
PRE_TYPED_WIRE = {
    "client_message_id": "c-7", "conversation_id": "00000000-0000-0000-0000-000000000002", "conversation_seq": 7,
    "created_at": 1700000000123, "custom_type": None,
    "dek_id": ["conversation", "00000000-0000-0000-0000-000000000001:00000000-0000-0000-0000-000000000002", 1],
    "edited_at_activity_id": None, "last_activity_id": "00000000040000000000000000000003", "media_metadata": None,
    "mention_targets": "0a1000000000000000000000000000000005", "message_id": "00000010000000000000000000000005",
    "message_type": 1,
    "payload_or_ciphertext": "b46c08090ee5fab000000000642e795a76991e073735f6d907bddb463a91ebe38805",
    "recall_event_conversation_seq": None, "reply_to_conversation_seq": 3, "retention_class": 0,
    "schema_version": 1, "sender_device_id": "00000000-0000-0000-0000-000000000004",
    "sender_id": "00000000-0000-0000-0000-000000000003", "seq_bucket": 0, "state": 0,
    "tenant_id": "00000000-0000-0000-0000-000000000001"}


def test_a_record_written_before_the_typed_form_reads_back_unchanged():
    record = EncodedRecord.from_wire(PRE_TYPED_WIRE)
    assert record.to_wire() == PRE_TYPED_WIRE
    assert record.message_id == (2**100 + 5).to_bytes(16, "big") and record.reply_to_conversation_seq == 3
    assert record.dek_id == tuple(PRE_TYPED_WIRE["dek_id"]) and record.tenant_id == uuid.UUID(int=1)


@pytest.mark.parametrize("change", [
    {"message_id": None}, {"message_id": "zz"}, {"tenant_id": "not-a-uuid"}, {"conversation_seq": "7"},
    {"dek_id": ["conversation", "k"]}, {"dek_id": ["conversation", "k", "1"]}, {"client_message_id": 7},
    {"payload_or_ciphertext": None}])
def test_a_bad_wire_form_is_a_typed_error(change):
    from lab.errors import ValidationError

    with pytest.raises(ValidationError):
        EncodedRecord.from_wire({**PRE_TYPED_WIRE, **change})
    with pytest.raises(ValidationError):
        EncodedRecord.from_wire({k: v for k, v in PRE_TYPED_WIRE.items() if k != "state"})
