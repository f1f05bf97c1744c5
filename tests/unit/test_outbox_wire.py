"""Property: every outbox record (a message's EncodedRecord, a recall or an edit event) survives
its wire form (JSON) and the local SQLite log unchanged; records written before the typed form
(7dd0829's dict payloads) still read. Kafka's round trip: tests/node/test_kafka_outbox.py."""
from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab.errors import ValidationError
from lab.store import (BIT63, U128_MAX, EditEvent, EncodedRecord, MessagePayload, OutboxRecord, RecallEvent,
                       u128_to_blob)
from lab.store.outbox import payload_from_wire
from lab.store.outbox.sqlite_log import LocalOutbox

BIGINT = st.integers(min_value=0, max_value=BIT63 - 1)
SEQ = st.integers(min_value=1, max_value=BIT63 - 1)
U128 = st.integers(min_value=0, max_value=U128_MAX)
BLOB16 = U128.map(u128_to_blob)
TEXT = st.text(max_size=40)
DEK = st.tuples(st.sampled_from(["conversation", "tenant"]), TEXT, st.integers(min_value=1, max_value=2**31 - 1))

records = st.builds(
    EncodedRecord, tenant_id=st.uuids(), conversation_id=st.uuids(), seq_bucket=BIGINT, conversation_seq=SEQ,
    message_id=BLOB16, last_activity_id=BLOB16, sender_id=st.uuids(), sender_device_id=st.uuids(),
    client_message_id=st.text(min_size=1, max_size=60), message_type=st.integers(0, 9), custom_type=st.none() | TEXT,
    schema_version=st.integers(1, 3), payload_or_ciphertext=st.binary(max_size=300),
    media_metadata=st.none() | st.binary(max_size=60), reply_to_conversation_seq=st.none() | SEQ,
    mention_targets=st.none() | st.binary(max_size=60), state=st.integers(0, 3),
    recall_event_conversation_seq=st.none() | SEQ, edited_at_activity_id=st.none() | BLOB16, created_at=BIGINT,
    retention_class=st.integers(0, 3), dek_id=DEK)
recalls = st.builds(RecallEvent, actor_id=st.uuids(), activity_id=U128, created_at_ms=BIGINT)
edits = st.builds(EditEvent, actor_id=st.uuids(), activity_id=U128, created_at_ms=BIGINT,
                  payload_or_ciphertext=st.binary(max_size=300), dek_id=DEK)


@st.composite
def outbox_records(draw: st.DrawFn) -> OutboxRecord:
    payload = draw(st.one_of(records.map(lambda r: MessagePayload(record=r)), recalls, edits))
    target = None if isinstance(payload, MessagePayload) else draw(SEQ)
    return OutboxRecord(tenant_id=draw(st.uuids()), conversation_id=draw(st.uuids()), conversation_seq=draw(SEQ),
                        payload=payload, target_seq=target)


PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(records)
def test_an_encoded_record_round_trips_its_wire_form(record):
    wire = json.loads(json.dumps(record.to_wire()))
    back = EncodedRecord.from_wire(wire)
    assert back == record and back.values() == record.values() and back.to_wire() == wire


@PROPERTY
@given(outbox_records())
def test_an_outbox_record_round_trips_its_wire_form(record):
    wire = json.loads(json.dumps(record.to_wire()))
    back = OutboxRecord.from_wire(wire)
    assert back == record and back.kind == record.kind and type(back.payload) is type(record.payload)


@pytest.fixture(scope="module")
def box(tmp_path_factory):
    log = LocalOutbox(tmp_path_factory.mktemp("outbox") / "o.sqlite")
    yield log
    log.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(outbox_records())
def test_the_local_log_gives_back_the_record_it_stored(box, record):
    stored = box.append(record)
    got = box.get(record.tenant_id, record.conversation_id, record.conversation_seq)
    assert got.record == stored.record
    if not stored.duplicate:
        assert got.record == record and box.read(stored.offset, 1)[0].record == record


# CONTROL payloads as 7dd0829 wrote them (recall.py's dicts): still read, and re-encode identically.
PRE_TYPED_RECALL = {"actor_id": "00000000-0000-0000-0000-000000000009",
                    "activity_id": "00000010000000000000000000000005", "created_at": 1700000000123}
PRE_TYPED_EDIT = {**PRE_TYPED_RECALL, "payload_or_ciphertext": "b46c08", "dek_id": ["conversation", "t:c", 2]}


def test_control_events_written_before_the_typed_form_still_read():
    recall = payload_from_wire("recall", PRE_TYPED_RECALL)
    assert recall == RecallEvent(actor_id=uuid.UUID(int=9), activity_id=2**100 + 5, created_at_ms=1700000000123)
    assert recall.to_wire() == PRE_TYPED_RECALL
    edit = payload_from_wire("edit", PRE_TYPED_EDIT)
    assert (edit.payload_or_ciphertext, edit.dek_id) == (bytes.fromhex("b46c08"), ("conversation", "t:c", 2))
    assert edit.to_wire() == PRE_TYPED_EDIT


@pytest.mark.parametrize("kind, data", [("recall", {}), ("recall", {**PRE_TYPED_RECALL, "activity_id": "xyz"}),
                                        ("edit", PRE_TYPED_RECALL), ("message", {"columns": {"pad": "x"}}),
                                        ("nope", PRE_TYPED_RECALL), ("recall", {**PRE_TYPED_RECALL, "actor_id": 5})])
def test_a_bad_payload_is_a_typed_error(kind, data):
    with pytest.raises(ValidationError):
        payload_from_wire(kind, data)
