"""A resumed send never undoes what happened after its first attempt.

A send dies after its record (and maybe its outbox entry) was written and before COMMITTED; the
message is then edited, recalled or reacted to (the row exists, so a reader can act on it); the
client retries the same client_message_id and the retry resumes the send. The resume writes only
what is still missing and writes a message's own cells at the message's created_at (the write time
of its first attempt), so whatever happened later stands: the row keeps the edit (body, state,
edited_at_activity_id) or the recall (the raw state cell too, not only the decoded one), and
``recover()`` afterwards agrees with the row. The ack names the row's ids.
"""
from __future__ import annotations

import pytest

from lab.errors import CrashInjected
from lab.store import MESSAGE_RECORD_COLUMNS, DedupState, FaultPlan, MessageState, blob_to_u128
from store_checks import dedup_row, new_request, outbox_messages, record_row

pytestmark = pytest.mark.node

POINTS = ("after_record", "after_outbox")
ALL = ", ".join(MESSAGE_RECORD_COLUMNS)


def crashed_then_restarted(open_store, tmp_path, point, **options):
    crashing = open_store(state_dir=tmp_path, faults=FaultPlan().arm(point), **options)
    request = new_request(body=b"original")
    with pytest.raises(CrashInjected):
        crashing.send(request)
    return request, open_store(state_dir=tmp_path, **options)


def reserved_seq(store, request) -> int:
    reservation = dedup_row(store, request)
    assert reservation.state == DedupState.RESERVED
    return reservation.conversation_seq


@pytest.mark.parametrize("point", POINTS)
def test_resume_keeps_a_later_edit(open_store, store, tmp_path, point):
    request, restarted = crashed_then_restarted(open_store, tmp_path, point)
    seq = reserved_seq(store, request)
    edit = restarted.edit(request.tenant_id, request.conversation_id, seq, body=b"edited", actor_id=request.sender_id)
    ack = restarted.send(request)  # the client's retry resumes the send
    assert ack.replayed and ack.conversation_seq == seq
    for when in ("after the resume", "after recover()"):
        row = record_row(store, request.tenant_id, request.conversation_id, seq, ALL)
        message = restarted.decode_record(row)
        assert (message.state, message.body, message.edited_at_activity_id) == (
            MessageState.EDITED, b"edited", edit.edited_at_activity_id), when
        assert row.state == MessageState.EDITED, when
        assert blob_to_u128(row.last_activity_id) == ack.last_activity_id, when
        restarted.recover()
    [entry] = outbox_messages(restarted, request.tenant_id, request.conversation_id)
    assert blob_to_u128(entry.record.payload.record.last_activity_id) == ack.last_activity_id
    assert dedup_row(store, request).state == DedupState.COMMITTED


@pytest.mark.parametrize("point", POINTS)
def test_resume_keeps_a_later_recall(open_store, store, tmp_path, point):
    request, restarted = crashed_then_restarted(open_store, tmp_path, point)
    seq = reserved_seq(store, request)
    recall = restarted.recall(request.tenant_id, request.conversation_id, seq, actor_id=request.sender_id)
    ack = restarted.send(request)
    assert ack.replayed and ack.conversation_seq == seq
    row = record_row(store, request.tenant_id, request.conversation_id, seq, ALL)
    # the raw cell, not only the decoded state (decode forces RECALLED when the coordinate is set)
    assert row.state == MessageState.RECALLED
    assert row.recall_event_conversation_seq == recall.recall_event_conversation_seq
    assert restarted.recover() == 0


@pytest.mark.parametrize("point", POINTS)
def test_resume_keeps_a_later_reaction(open_store, store, tmp_path, point):
    request, restarted = crashed_then_restarted(open_store, tmp_path, point)
    seq = reserved_seq(store, request)
    summary = restarted.react(request.tenant_id, request.conversation_id, seq, request.sender_id, "like")
    restarted.send(request)
    again = restarted.reaction_summary(request.tenant_id, request.conversation_id, seq)
    assert again.counts == summary.counts == {"like": 1}


def test_resume_in_archiver_mode_keeps_the_hot_copy_of_a_later_edit(open_store, store, tmp_path, redis_services):
    """Archiver mode with the Redis hot window: the commit path writes the hot copy instead of
    the row. A resume after the outbox append must not put the original columns back over the
    edited hot copy, which batch reads answer from before message_record."""
    request, restarted = crashed_then_restarted(open_store, tmp_path, "after_outbox", archiver_mode=True,
                                                services=redis_services)
    seq = reserved_seq(store, request)
    edit = restarted.edit(request.tenant_id, request.conversation_id, seq, body=b"edited", actor_id=request.sender_id)
    ack = restarted.send(request)
    from lab.store import BatchEntry

    restarted.body_cache.clear()
    result = restarted.batch_read(request.tenant_id, [BatchEntry(
        conversation_id=request.conversation_id, conversation_seq=seq, message_id=ack.message_id)])
    message = result.messages[ack.message_id]
    assert (message.body, message.edited_at_activity_id) == (b"edited", edit.edited_at_activity_id)
    restarted.archive_once()
    restarted.drain()  # the resumed send's head update is asynchronous: the latest page shows seq once it landed
    page = restarted.history(request.tenant_id, request.conversation_id)
    [shown] = [m for m in page.messages if m.conversation_seq == seq]
    assert shown.body == b"edited"
