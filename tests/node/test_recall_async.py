"""recall_async and edit_async against the real node (lab.store.plumbing.steps): many in flight from
one thread without a thread per call, each applied once (one recall event per message, however
many recall it at once); the statements recall() and edit() issue; errors, crash points and
fencing in the future, of the types the synchronous calls raise."""
from __future__ import annotations

import threading
import uuid
from collections import Counter

import pytest

from lab.errors import CrashInjected, Fenced, InvalidState
from lab.store import FaultPlan, MESSAGE_RECORD_COLUMNS, MessageState
from store_checks import new_request, record_row, settle, snapshot_tables, stale_writer

pytestmark = [pytest.mark.node,
              pytest.mark.parametrize("outbox_kind", ["local", "kafka"], indirect=True, scope="module")]

WAIT_SECONDS = 180
CLIENT_ATTEMPTS = 5  # a call the cluster failed (a timeout under load, a contended LWT) is retried, as a client does
THREAD_ALLOWANCE = 8  # the threads the asynchronous calls may add: their blocking pools, the group commit's worker
ALL = ", ".join(MESSAGE_RECORD_COLUMNS)


def _settle(calls: list) -> list:
    return settle(calls, attempts=CLIENT_ATTEMPTS, timeout=WAIT_SECONDS)[0]


def test_many_recalls_and_edits_in_flight_from_one_thread_apply_each_once(store, outbox_kind):
    n = 120 if outbox_kind == "local" else 30
    tenant, sender = uuid.uuid4(), uuid.uuid4()
    conversations = [uuid.uuid4() for _ in range(6)]
    requests = [new_request(tenant_id=tenant, sender_id=sender, conversation_id=conversations[i % 6])
                for i in range(n)]
    acks = _settle([lambda r=r: store.send_async(r) for r in requests])
    threads_before = threading.active_count()
    calls, kinds = [], []
    for i, (req, ack) in enumerate(zip(requests, acks)):
        seq = ack.conversation_seq
        if i % 2 == 0:  # recalled; every sixth message by three callers at once
            for _ in range(3 if i % 6 == 0 else 1):
                calls.append(lambda r=req, q=seq: store.recall_async(tenant, r.conversation_id, q, actor_id=sender))
                kinds.append(("recall", i))
        else:
            calls.append(lambda r=req, q=seq, b=b"edited-%d" % i: store.edit_async(
                tenant, r.conversation_id, q, body=b, actor_id=sender))
            kinds.append(("edit", i))
    results = _settle(calls)
    assert threading.active_count() <= threads_before + THREAD_ALLOWANCE

    recalled = {}
    for (kind, i), result in zip(kinds, results):
        assert result.conversation_seq == acks[i].conversation_seq
        if kind == "recall":  # every caller of one message is told the one event's coordinate
            assert recalled.setdefault(i, result.recall_event_conversation_seq) == result.recall_event_conversation_seq
    for i, (req, ack) in enumerate(zip(requests, acks)):
        row = store.decode_record(record_row(store, tenant, req.conversation_id, ack.conversation_seq, ALL))
        if i % 2 == 0:
            [event] = store.log.controls_for(tenant, req.conversation_id, ack.conversation_seq, "recall")
            assert event.record.conversation_seq == recalled[i] == row.recall_event_conversation_seq
            assert row.state is MessageState.RECALLED
        else:
            [event] = store.log.controls_for(tenant, req.conversation_id, ack.conversation_seq, "edit")
            assert (row.state, row.body) == (MessageState.EDITED, b"edited-%d" % i)
            assert row.edited_at_activity_id == event.record.payload.activity_id
    # no coordinate given twice in a conversation: the messages, the recall events, the edit events
    given = Counter((requests[i].conversation_id, acks[i].conversation_seq) for i in range(n))
    given.update((requests[i].conversation_id, seq) for i, seq in recalled.items())
    given.update((requests[i].conversation_id, r.edit_event_conversation_seq)
                 for (kind, i), r in zip(kinds, results) if kind == "edit")
    assert sum(given.values()) == n + len(recalled) + n // 2 and max(given.values()) == 1


def test_the_async_calls_issue_the_statements_the_sync_calls_issue(store, outbox_kind):
    if outbox_kind == "kafka":
        pytest.skip("no outbox in what this checks: the local outbox's run covers it")
    counter = store.connection.counter
    tenant, conversation, sender = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    seqs = [store.send(new_request(tenant_id=tenant, conversation_id=conversation, sender_id=sender)).conversation_seq
            for _ in range(8)]
    store.drain(60)
    calls = [lambda q: store.recall(tenant, conversation, q, actor_id=sender),
             lambda q: store.recall_async(tenant, conversation, q, actor_id=sender).result(timeout=WAIT_SECONDS),
             lambda q: store.edit(tenant, conversation, q, body=b"e", actor_id=sender),
             lambda q: store.edit_async(tenant, conversation, q, body=b"e", actor_id=sender).result(timeout=WAIT_SECONDS)]
    deltas = []
    for call, seq in zip(calls * 2, seqs):
        before = counter.snapshot()
        call(seq)
        after = counter.snapshot()
        deltas.append({(t, k): n - before.get(t, {}).get(k, 0) for t, kinds in after.items()
                       for k, n in kinds.items() if n != before.get(t, {}).get(k, 0)})
    # the first recall may read the head's epoch (fencing, once per conversation); the rest may not
    assert deltas[4] == deltas[5] == deltas[1], "an async recall issues other statements than a recall"
    assert deltas[6] == deltas[7] == deltas[3] == deltas[2], "an async edit issues other statements than an edit"


@pytest.mark.parametrize("point", ["after_recall_log", "after_recall_update", "after_edit_log", "after_edit_update"])
def test_a_crash_point_fails_the_future_and_recovery_finishes_it(open_store, tmp_path, point, outbox_kind):
    if outbox_kind == "kafka" and point not in ("after_recall_log", "after_edit_log"):
        pytest.skip("the walk is the same: the local outbox's runs cover this point")
    crashing = open_store(state_dir=tmp_path, faults=FaultPlan().arm(point))
    req = new_request(body=b"v1")
    seq = crashing.send(req).conversation_seq
    if "recall" in point:
        future = crashing.recall_async(req.tenant_id, req.conversation_id, seq, actor_id=req.sender_id)
    else:
        future = crashing.edit_async(req.tenant_id, req.conversation_id, seq, body=b"v2", actor_id=req.sender_id)
    assert isinstance(future.exception(timeout=WAIT_SECONDS), CrashInjected)
    restarted = open_store(state_dir=tmp_path)
    assert restarted.recover() == (1 if point.endswith("_log") else 0)
    if "recall" in point:  # a retry finishes the logged event instead of logging a second
        [logged] = restarted.log.controls_for(req.tenant_id, req.conversation_id, seq, "recall")
        retried = restarted.recall_async(req.tenant_id, req.conversation_id, seq, actor_id=req.sender_id).result(
            timeout=WAIT_SECONDS)
        assert retried.replayed and retried.recall_event_conversation_seq == logged.record.conversation_seq
        assert len(restarted.log.controls_for(req.tenant_id, req.conversation_id, seq, "recall")) == 1
    row = restarted.decode_record(record_row(restarted, req.tenant_id, req.conversation_id, seq, ALL))
    expected = (MessageState.RECALLED, b"v1") if "recall" in point else (MessageState.EDITED, b"v2")
    assert (row.state, row.body) == expected


def test_a_fenced_writer_refuses_in_the_future_before_writing(store, open_store, tmp_path, outbox_kind):
    if outbox_kind == "kafka":
        pytest.skip("no outbox in what this checks: the local outbox's run covers it")
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    stale, seq = stale_writer(open_store, tmp_path, tenant, conversation)
    before = snapshot_tables(store)
    for future in (stale.recall_async(tenant, conversation, seq, actor_id=uuid.uuid4()),
                   stale.edit_async(tenant, conversation, seq, body=b"x", actor_id=uuid.uuid4())):
        refused = future.exception(timeout=WAIT_SECONDS)
        assert isinstance(refused, Fenced) and (refused.epoch, refused.head_epoch) == (0, 1)
    assert snapshot_tables(store) == before


def test_a_recalled_message_cannot_be_edited_in_the_future(store, outbox_kind):
    if outbox_kind == "kafka":
        pytest.skip("no outbox in what this checks: the local outbox's run covers it")
    req = new_request()
    seq = store.send(req).conversation_seq
    store.recall_async(req.tenant_id, req.conversation_id, seq, actor_id=req.sender_id).result(timeout=WAIT_SECONDS)
    refused = store.edit_async(req.tenant_id, req.conversation_id, seq, body=b"x", actor_id=req.sender_id)
    assert isinstance(refused.exception(timeout=WAIT_SECONDS), InvalidState)
    assert store.log.controls_for(req.tenant_id, req.conversation_id, seq, "edit") == []
