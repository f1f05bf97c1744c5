"""Every crash point of lab.store.plumbing.faults on the real node (design §5.1, §5.3, S-7).

One case per point in ``lab.store.plumbing.faults.CRASH_POINTS`` (the parametrization is that dict, so a
new point gets a case or fails ``test_every_point_has_a_scenario``). A case arms the point on
a store, lets it die there (:class:`~lab.errors.CrashInjected`: what was written stays,
nothing after it happens), then a restarted writer on the same state_dir runs ``recover()``
and retries what the client would retry. Afterwards:

- messages: message_record holds exactly one row per send, nothing else;
- same ids: each row has the message_id and conversation_seq of the first attempt (its
  reservation, or its ack) and every later ack names them; client_dedup is COMMITTED,
  message_index and the outbox hold the message once;
- lost recalls: a recall (edit) whose CONTROL event is in the log is applied to its row
  with that event's coordinate, and the log holds one event (S-7).

Every case runs with each outbox (the local SQLite file, the Kafka-protocol log on the
embedded broker): ``outbox_kind`` is parametrized for the whole module. The table (outbox |
point | action | messages | same ids | lost recalls) is printed at the end of the session and
written to results/tests-<run-id>/crash_points.md.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest

from lab.errors import CrashInjected
from lab.store import (CRASH_POINTS, DedupState, FaultPlan, MESSAGE_RECORD_COLUMNS, MessageState, blob_to_u128,
                       u128_to_blob)
from store_checks import Replicas, dedup_row, index_rows, new_request, outbox_messages, record_row

OUTBOXES = ("local", "kafka")
pytestmark = [pytest.mark.node,
              pytest.mark.parametrize("outbox_kind", OUTBOXES, indirect=True, scope="module")]

WRITE_POINTS = ("after_allocate", "after_reserve", "after_record", "after_outbox", "after_commit", "before_ack")
ARCHIVER_POINTS = ("archiver_after_read", "archiver_after_write", "archiver_after_commit")
RECALL_POINTS = ("after_recall_log", "after_recall_update")
EDIT_POINTS = ("after_edit_log", "after_edit_update")
HEAD_POINTS = ("before_head", "head_retry")
ARCHIVED_SENDS = 3
ALL = ", ".join(MESSAGE_RECORD_COLUMNS)


@dataclass
class Outcome:
    point: str
    action: str
    messages: str = "?"
    same_ids: str = "?"
    lost_recalls: str = "-"


OUTCOMES: dict[tuple[str, str], Outcome] = {}  # (outbox, point) -> outcome


@pytest.fixture(scope="module", autouse=True)
def crash_table(report):
    yield
    lines = ["| outbox | crash point | action | messages | same ids | lost recalls |", "|---|---|---|---|---|---|"]
    for outbox in OUTBOXES:
        for point in CRASH_POINTS:
            o = OUTCOMES.get((outbox, point))
            if o is None:
                lines.append(f"| {outbox} | {point} | not run | | | |")
            else:
                lines.append(f"| {outbox} | {o.point} | {o.action} | {o.messages} | {o.same_ids} | {o.lost_recalls} |")
    lines += ["", "messages: message_record rows / sends; same ids: every row and later ack carry the first "
              "attempt's message_id and conversation_seq; lost recalls: logged recall (edit) events not applied "
              "to their row (edit points count edit events)."]
    report("crash_points.md", "crash points (lab.faults), crash then recover/retry", "\n".join(lines) + "\n")


def test_every_point_has_a_scenario(outbox_kind):
    covered = WRITE_POINTS + ARCHIVER_POINTS + RECALL_POINTS + EDIT_POINTS + HEAD_POINTS
    assert sorted(covered) == sorted(CRASH_POINTS)


def check_sends(store, reader, requests, firsts, bodies=None) -> tuple[str, str]:
    """Read back every table for ``requests``; ``firsts`` are the (message_id, seq) each must
    carry, ``bodies`` what each row must decrypt to (default: the request's body). Returns
    the table cells (messages, same ids); the caller asserts them."""
    same = True
    bodies = bodies or [r.body for r in requests]
    # buckets 0-2 hold every seq the crashed writer, the restarted one and its retries
    # allocated (one reservation window of 4096 each): a stray row would be there
    conversation_rows = {key: list(store.connection.execute(
        f"SELECT conversation_seq, message_id, client_message_id FROM {store.keyspace}.message_record "
        "WHERE tenant_id = %s AND conversation_id = %s AND seq_bucket IN (0, 1, 2)", key))
        for key in {(r.tenant_id, r.conversation_id) for r in requests}}
    rows = sum(len(v) for v in conversation_rows.values())
    for req, (message_id, seq), body in zip(requests, firsts, bodies):
        stored = [r for r in conversation_rows[(req.tenant_id, req.conversation_id)]
                  if r.client_message_id == req.client_message_id]
        checks = {"row": [(r.conversation_seq, blob_to_u128(r.message_id)) for r in stored] == [(seq, message_id)]}
        dedup = dedup_row(store, req)
        checks["client_dedup"] = dedup.state == DedupState.COMMITTED and (
            blob_to_u128(dedup.message_id), dedup.conversation_seq) == (message_id, seq)
        checks["message_index"] = len(index_rows(store, req.tenant_id, u128_to_blob(message_id))) == 1
        checks["outbox"] = [e.record.conversation_seq for e in outbox_messages(reader, req.tenant_id, req.conversation_id)
                            if e.record.payload.record.client_message_id == req.client_message_id] == [seq]
        # a retry now (the client never saw an ack, or saw one and retries anyway) replays those ids
        again = reader.send(req)
        checks["retry"] = again.replayed and (again.message_id, again.conversation_seq) == (message_id, seq)
        row = record_row(store, req.tenant_id, req.conversation_id, seq, ALL)
        checks["body"] = row is not None and reader.decode_record(row).body == body
        checks["last_activity_id"] = row is not None and blob_to_u128(row.last_activity_id) == again.last_activity_id
        failed = [name for name, ok in checks.items() if not ok]
        if failed:
            print(f"{req.client_message_id}: failed checks {failed}")
        same &= not failed
    return f"{rows}/{len(requests)}", "yes" if same else "NO"


@pytest.mark.parametrize("point", WRITE_POINTS)
def test_send_crash_then_retry(open_store, store, tmp_path, outbox_kind, point):
    outcome = OUTCOMES[outbox_kind, point] = Outcome(point, "restart writer, recover(), retry send")
    crashing = open_store(state_dir=tmp_path, faults=FaultPlan().arm(point))
    req = new_request()
    with pytest.raises(CrashInjected):
        crashing.send(req)
    assert crashing.faults.fired[point] == 1
    reserved = dedup_row(store, req)
    assert (reserved is None) is (point == "after_allocate")  # died before / after the reservation
    restarted = open_store(state_dir=tmp_path)  # a new writer process: fresh seq window and id generator
    restarted.recover()
    ack = restarted.send(req)
    assert ack.replayed is (point != "after_allocate")
    first = (ack.message_id, ack.conversation_seq) if reserved is None else \
        (blob_to_u128(reserved.message_id), reserved.conversation_seq)
    outcome.messages, outcome.same_ids = check_sends(store, restarted, [req], [first])
    restarted.drain()
    assert store.head(req.tenant_id, req.conversation_id).latest_conversation_seq == first[1]
    assert (outcome.messages, outcome.same_ids) == ("1/1", "yes")


def test_head_crash_then_retry(open_store, store, tmp_path, outbox_kind):
    """before_head fires on the head writer's thread after the ack: the message is committed,
    only step 7 died. The client's retry replays the ack and re-submits the head update."""
    point = "before_head"
    outcome = OUTCOMES[outbox_kind, point] = Outcome(point, "ack returned, head update died; retry send re-submits it")
    crashing = open_store(state_dir=tmp_path, faults=FaultPlan().arm(point))
    req = new_request()
    ack = crashing.send(req)
    crashing.drain()
    assert crashing.faults.fired[point] == 1
    assert store.head(req.tenant_id, req.conversation_id) is None  # step 7 never ran
    restarted = open_store(state_dir=tmp_path)
    outcome.messages, outcome.same_ids = check_sends(store, restarted, [req], [(ack.message_id, ack.conversation_seq)])
    restarted.drain()
    assert store.head(req.tenant_id, req.conversation_id).latest_conversation_seq == ack.conversation_seq
    assert (outcome.messages, outcome.same_ids) == ("1/1", "yes")


def test_head_retry_crash_then_retry(open_store, store, tmp_path, outbox_kind):
    """head_retry fires on the head writer's thread when an update that failed on the cluster
    (a real Unavailable) is about to be tried again: the update dies there, the message is
    committed. The client's retry, once the cluster is back, replays the ack and re-submits it."""
    point = "head_retry"
    outcome = OUTCOMES[outbox_kind, point] = Outcome(point, "ack returned, head update died retrying; retry send")
    plan = FaultPlan().arm(point)
    crashing = open_store(state_dir=tmp_path, faults=plan)
    req = new_request()
    with Replicas(store) as replicas:
        plan.interleave("before_head", replicas.fail)  # the send is written; then the cluster fails
        ack = crashing.send(req)
        crashing.drain()
    assert crashing.faults.fired[point] == 1
    assert store.head(req.tenant_id, req.conversation_id) is None  # step 7 never landed
    restarted = open_store(state_dir=tmp_path)
    outcome.messages, outcome.same_ids = check_sends(store, restarted, [req], [(ack.message_id, ack.conversation_seq)])
    restarted.drain()
    assert store.head(req.tenant_id, req.conversation_id).latest_conversation_seq == ack.conversation_seq
    assert (outcome.messages, outcome.same_ids) == ("1/1", "yes")


@pytest.mark.parametrize("point", ARCHIVER_POINTS)
def test_archiver_crash_then_rerun(open_store, store, tmp_path, outbox_kind, point):
    outcome = OUTCOMES[outbox_kind, point] = Outcome(point, "restart archiver, run_once() again, retry sends")
    crashing = open_store(archiver_mode=True, state_dir=tmp_path, faults=FaultPlan().arm(point))
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    requests = [new_request(tenant_id=tenant, conversation_id=conversation, body=b"m%d" % i)
                for i in range(ARCHIVED_SENDS)]
    acks = [crashing.send(r) for r in requests]
    with pytest.raises(CrashInjected):
        crashing.archive_once()
    restarted = open_store(archiver_mode=True, state_dir=tmp_path)
    restarted.recover()
    written = restarted.archive_once()
    assert written == (0 if point == "archiver_after_commit" else ARCHIVED_SENDS)
    assert restarted.archive_lag() == 0
    outcome.messages, outcome.same_ids = check_sends(store, restarted, requests,
                                                     [(a.message_id, a.conversation_seq) for a in acks])
    assert (outcome.messages, outcome.same_ids) == (f"{ARCHIVED_SENDS}/{ARCHIVED_SENDS}", "yes")


def _events(s, req, seq, kind):
    return s.log.controls_for(req.tenant_id, req.conversation_id, seq, kind)


@pytest.mark.parametrize("point", RECALL_POINTS)
def test_recall_crash_then_recover_and_retry(open_store, store, tmp_path, outbox_kind, point):
    outcome = OUTCOMES[outbox_kind, point] = Outcome(point, "restart writer, recover(), retry recall")
    crashing = open_store(state_dir=tmp_path, faults=FaultPlan().arm(point))
    req = new_request()
    ack = crashing.send(req)
    with pytest.raises(CrashInjected):
        crashing.recall(req.tenant_id, req.conversation_id, ack.conversation_seq, actor_id=req.sender_id)
    [logged] = _events(crashing, req, ack.conversation_seq, "recall")
    restarted = open_store(state_dir=tmp_path)
    assert restarted.recover() == (1 if point == "after_recall_log" else 0)
    retried = restarted.recall(req.tenant_id, req.conversation_id, ack.conversation_seq, actor_id=req.sender_id)
    assert retried.replayed and retried.recall_event_conversation_seq == logged.record.conversation_seq
    events = _events(restarted, req, ack.conversation_seq, "recall")
    row = record_row(store, req.tenant_id, req.conversation_id, ack.conversation_seq, ALL)
    outcome.lost_recalls = str(sum(1 for e in events if not (
        row.state == MessageState.RECALLED and row.recall_event_conversation_seq == e.record.conversation_seq)))
    outcome.messages, outcome.same_ids = check_sends(store, restarted, [req], [(ack.message_id, ack.conversation_seq)])
    assert len(events) == 1  # the retry finished the logged event instead of logging a second
    assert (outcome.messages, outcome.same_ids, outcome.lost_recalls) == ("1/1", "yes", "0")


@pytest.mark.parametrize("point", EDIT_POINTS)
def test_edit_crash_then_recover(open_store, store, tmp_path, outbox_kind, point):
    outcome = OUTCOMES[outbox_kind, point] = Outcome(point, "restart writer, recover()")
    crashing = open_store(state_dir=tmp_path, faults=FaultPlan().arm(point))
    req = new_request(body=b"v1")
    ack = crashing.send(req)
    with pytest.raises(CrashInjected):
        crashing.edit(req.tenant_id, req.conversation_id, ack.conversation_seq, body=b"v2", actor_id=req.sender_id)
    restarted = open_store(state_dir=tmp_path)
    assert restarted.recover() == (1 if point == "after_edit_log" else 0)
    [event] = _events(restarted, req, ack.conversation_seq, "edit")
    msg = restarted.decode_record(record_row(store, req.tenant_id, req.conversation_id, ack.conversation_seq, ALL))
    applied = (msg.body == b"v2" and msg.state is MessageState.EDITED
               and msg.edited_at_activity_id == event.record.payload.activity_id)
    outcome.lost_recalls = "0" if applied else "1"
    outcome.messages, outcome.same_ids = check_sends(store, restarted, [req], [(ack.message_id, ack.conversation_seq)],
                                                     bodies=[b"v2"])
    assert (outcome.messages, outcome.same_ids, outcome.lost_recalls) == ("1/1", "yes", "0")
