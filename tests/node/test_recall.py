"""Recall and edit (design §5.3) and S-7: a crash after the log write and before the state
update is repaired by recovery, and no recall is lost."""
from __future__ import annotations

import uuid

import pytest

from lab.errors import CrashInjected, DecryptError, InvalidState
from lab.store import FaultPlan, MESSAGE_RECORD_COLUMNS, MessageState, RetentionClass, blob_to_u128
from store_checks import new_request, record_row

pytestmark = pytest.mark.node

ALL = ", ".join(MESSAGE_RECORD_COLUMNS)
TTLS = ", TTL(state) AS ttl_state, TTL(payload_or_ciphertext) AS ttl_payload, TTL(created_at) AS ttl_created"


def _controls(store, tenant, conversation, target_seq, kind):
    return store.log.controls_for(tenant, conversation, target_seq, kind)


def _row(store, req, seq):
    return record_row(store, req.tenant_id, req.conversation_id, seq, ALL + TTLS)


@pytest.mark.parametrize("retention_class", [RetentionClass.EPHEMERAL_24H, RetentionClass.COMPLIANCE_HOLD])
def test_recall_logs_first_then_marks_the_row_keeping_its_ttl(store, retention_class):
    req = new_request(retention_class=retention_class)
    ack = store.send(req)
    result = store.recall(req.tenant_id, req.conversation_id, ack.conversation_seq, actor_id=req.sender_id)
    assert not result.replayed
    # the CONTROL event has its own conversation_seq from the conversation's sequence
    assert result.recall_event_conversation_seq > ack.conversation_seq
    [event] = _controls(store, req.tenant_id, req.conversation_id, ack.conversation_seq, "recall")
    assert event.record.conversation_seq == result.recall_event_conversation_seq
    row = _row(store, req, ack.conversation_seq)
    msg = store.decode_record(row)
    assert msg.state is MessageState.RECALLED
    assert msg.recall_event_conversation_seq == result.recall_event_conversation_seq
    assert msg.body == req.body  # recall is a rendering flag; the row stays (no DELETE)
    if retention_class is RetentionClass.COMPLIANCE_HOLD:
        assert (row.ttl_state, row.ttl_payload, row.ttl_created) == (None, None, None)
    else:  # the UPDATEd cells expire with the row, not later and not never
        assert row.ttl_state is not None and abs(row.ttl_state - row.ttl_created) <= 2


def test_recall_twice_is_one_event(store):
    req = new_request()
    ack = store.send(req)
    first = store.recall(req.tenant_id, req.conversation_id, ack.conversation_seq, actor_id=req.sender_id)
    again = store.recall(req.tenant_id, req.conversation_id, ack.conversation_seq, actor_id=req.sender_id)
    assert again.replayed and again.recall_event_conversation_seq == first.recall_event_conversation_seq
    assert again.activity_id == first.activity_id
    assert len(_controls(store, req.tenant_id, req.conversation_id, ack.conversation_seq, "recall")) == 1


def test_s7_crash_between_log_and_update_is_recovered(open_store, store, tmp_path):
    """S-7: every recall dies after its log write. Recovery follows the design's condition:
    a logged recall whose row has no recall_event_conversation_seq is re-emitted to the log
    (idempotent by its coordinate: still one event) and then applied; 0 are lost."""
    crashing = open_store(state_dir=tmp_path, faults=FaultPlan().arm("after_recall_log", times=None))
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    reqs = [new_request(tenant_id=tenant, conversation_id=conversation) for _ in range(5)]
    acks = [crashing.send(r) for r in reqs]
    for req, ack in zip(reqs, acks):
        with pytest.raises(CrashInjected):
            crashing.recall(tenant, conversation, ack.conversation_seq, actor_id=req.sender_id)
    # logged, but no row carries its coordinate yet
    for req, ack in zip(reqs, acks):
        assert len(_controls(crashing, tenant, conversation, ack.conversation_seq, "recall")) == 1
        row = _row(store, req, ack.conversation_seq)
        assert row.recall_event_conversation_seq is None and row.state == MessageState.NORMAL
    restarted = open_store(state_dir=tmp_path)
    end_before = restarted.log.end_offset()
    assert restarted.recover() == 5
    assert restarted.alerts.recall_reemitted == 5
    assert restarted.log.end_offset() == end_before  # re-emitted, not duplicated
    lost = 0
    for req, ack in zip(reqs, acks):
        [event] = _controls(restarted, tenant, conversation, ack.conversation_seq, "recall")
        row = _row(store, req, ack.conversation_seq)
        if row.state != MessageState.RECALLED or row.recall_event_conversation_seq != event.record.conversation_seq:
            lost += 1
        assert abs(row.ttl_state - row.ttl_created) <= 2
    assert lost == 0
    assert restarted.recover() == 0  # nothing left to repair, and the log position was committed


def test_retried_recall_after_crash_finishes_the_logged_event(open_store, store, tmp_path):
    crashing = open_store(state_dir=tmp_path, faults=FaultPlan().arm("after_recall_log"))
    req = new_request()
    ack = crashing.send(req)
    with pytest.raises(CrashInjected):
        crashing.recall(req.tenant_id, req.conversation_id, ack.conversation_seq, actor_id=req.sender_id)
    [logged] = _controls(crashing, req.tenant_id, req.conversation_id, ack.conversation_seq, "recall")
    result = open_store(state_dir=tmp_path).recall(req.tenant_id, req.conversation_id, ack.conversation_seq,
                                                   actor_id=req.sender_id)
    assert result.recall_event_conversation_seq == logged.record.conversation_seq
    assert len(_controls(crashing, req.tenant_id, req.conversation_id, ack.conversation_seq, "recall")) == 1
    assert _row(store, req, ack.conversation_seq).recall_event_conversation_seq == logged.record.conversation_seq


def test_edit_replaces_the_payload_sealed_for_its_row(store):
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    req = new_request(tenant_id=tenant, conversation_id=conversation, body=b"original",
                      retention_class=RetentionClass.EPHEMERAL_24H)
    other = new_request(tenant_id=tenant, conversation_id=conversation, body=b"neighbour")
    ack, other_ack = store.send(req), store.send(other)
    result = store.edit(tenant, conversation, ack.conversation_seq, body=b"edited", actor_id=req.sender_id)
    assert result.edit_event_conversation_seq > other_ack.conversation_seq
    row = _row(store, req, ack.conversation_seq)
    msg = store.decode_record(row)
    assert msg.body == b"edited" and msg.state is MessageState.EDITED
    assert msg.edited_at_activity_id == result.edited_at_activity_id
    assert msg.message_id == ack.message_id  # same message, not a new one
    assert abs(row.ttl_payload - row.ttl_created) <= 2
    # the new ciphertext is bound to its row: moved to the neighbour's coordinates it fails
    moved = row._asdict()
    moved.update(conversation_seq=other_ack.conversation_seq)
    with pytest.raises(DecryptError):
        store.decode_record(moved)


def test_edit_crash_after_log_is_recovered(open_store, store, tmp_path):
    crashing = open_store(state_dir=tmp_path, faults=FaultPlan().arm("after_edit_log"))
    req = new_request(body=b"v1")
    ack = crashing.send(req)
    with pytest.raises(CrashInjected):
        crashing.edit(req.tenant_id, req.conversation_id, ack.conversation_seq, body=b"v2", actor_id=req.sender_id)
    assert crashing.decode_record(_row(store, req, ack.conversation_seq)).body == b"v1"
    restarted = open_store(state_dir=tmp_path)
    assert restarted.recover() == 1
    msg = restarted.decode_record(_row(store, req, ack.conversation_seq))
    assert msg.body == b"v2" and msg.state is MessageState.EDITED


def test_recovery_does_not_undo_a_later_edit(open_store, store, tmp_path):
    crashing = open_store(state_dir=tmp_path, faults=FaultPlan().arm("after_edit_log"))
    req = new_request(body=b"v1")
    ack = crashing.send(req)
    with pytest.raises(CrashInjected):
        crashing.edit(req.tenant_id, req.conversation_id, ack.conversation_seq, body=b"v2", actor_id=req.sender_id)
    restarted = open_store(state_dir=tmp_path)
    restarted.edit(req.tenant_id, req.conversation_id, ack.conversation_seq, body=b"v3", actor_id=req.sender_id)
    assert restarted.recover() == 0
    assert restarted.decode_record(_row(store, req, ack.conversation_seq)).body == b"v3"


def test_a_recalled_message_cannot_be_edited(store):
    req = new_request()
    ack = store.send(req)
    store.recall(req.tenant_id, req.conversation_id, ack.conversation_seq, actor_id=req.sender_id)
    with pytest.raises(InvalidState):
        store.edit(req.tenant_id, req.conversation_id, ack.conversation_seq, body=b"x", actor_id=req.sender_id)
    row = _row(store, req, ack.conversation_seq)
    assert row.state == MessageState.RECALLED and row.edited_at_activity_id is None


def test_recall_drops_the_message_from_the_body_cache(store):
    req = new_request()
    ack = store.send(req)
    msg = store.decode_record(_row(store, req, ack.conversation_seq))
    store.body_cache.put(msg)
    assert store.body_cache.get(req.tenant_id, ack.message_id) is not None
    store.recall(req.tenant_id, req.conversation_id, ack.conversation_seq, actor_id=req.sender_id)
    assert store.body_cache.get(req.tenant_id, ack.message_id) is None
    assert blob_to_u128(_row(store, req, ack.conversation_seq).message_id) == ack.message_id


def test_a_recall_landing_inside_an_edit_keeps_the_message_recalled(open_store, store):
    """The edit has checked the state (NORMAL) and logged its event; before its
    UPDATE lands, another writer recalls the message. Recalled stays recalled: in the row's state
    column, in history and batch reads; the edit reports the recall (InvalidState)."""
    from lab.store import BatchEntry

    req = new_request(body=b"original")
    ack = store.send(req)
    recaller = open_store()  # another writer of the conversation
    plan = FaultPlan().interleave("after_edit_log", lambda: recaller.recall(
        req.tenant_id, req.conversation_id, ack.conversation_seq, actor_id=req.sender_id))
    editor = open_store(faults=plan)
    try:
        editor.edit(req.tenant_id, req.conversation_id, ack.conversation_seq, body=b"edited", actor_id=req.sender_id)
        outcome = "edit returned"
    except InvalidState:
        outcome = "edit refused: InvalidState"
    row = _row(store, req, ack.conversation_seq)
    page = store.history(req.tenant_id, req.conversation_id)
    store.body_cache.clear()
    batch = store.batch_read(req.tenant_id, [BatchEntry(conversation_id=req.conversation_id,
                                                        conversation_seq=ack.conversation_seq,
                                                        message_id=ack.message_id)])
    print(f"edit racing a recall: {outcome}; stored state {MessageState(row.state).name}, "
          f"history {page.messages[0].state.name}, batch {batch.messages[ack.message_id].state.name}")
    assert row.recall_event_conversation_seq is not None
    assert row.state == MessageState.RECALLED
    assert page.messages[0].state is MessageState.RECALLED and page.messages[0].recalled
    assert batch.messages[ack.message_id].state is MessageState.RECALLED
    assert outcome == "edit refused: InvalidState"
