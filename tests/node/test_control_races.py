"""Recall and edit under racing callers: threads on one store, threads over
several stores (writers) on one state folder, and separate processes.

- recall: however many callers race on one message, the log holds ONE recall CONTROL event for it,
  the row carries that event's coordinate, and every caller is answered with that coordinate;
- edit: each edit is an event of its own; the row carries exactly one of them whole (its body and
  its edited_at_activity_id together), and ``recover()`` afterwards finds nothing to do: the live
  paths and recovery agree on which version stands.

Every test runs with each outbox (``outbox_kind`` parametrized for the module).
"""
from __future__ import annotations

import uuid

import pytest

from control_races import process_main, race
from fan_out import fan_out_processes
from lab.store import MESSAGE_RECORD_COLUMNS, MessageState
from store_checks import new_request, record_row

pytestmark = [pytest.mark.node,
              pytest.mark.parametrize("outbox_kind", ("local", "kafka"), indirect=True, scope="module")]

ROUNDS, THREADS = 4, 6
PROCESS_ROUNDS, PROCESSES, PROCESS_THREADS = 2, 3, 3  # rounds: per operation
PROCESS_TIMEOUT_SECONDS = 240
ALL = ", ".join(MESSAGE_RECORD_COLUMNS)


def check_recall(store, target, results) -> None:
    tenant, conversation, seq = target
    errors = [r["error"] for r in results if "error" in r]
    assert not errors, errors
    events = store.log.controls_for(tenant, conversation, seq, "recall")
    row = record_row(store, tenant, conversation, seq, ALL)
    assert len(events) == 1, f"{len(events)} recall events for one message: {[e.record.conversation_seq for e in events]}"
    assert row.state == MessageState.RECALLED and row.recall_event_conversation_seq == events[0].record.conversation_seq
    answered = sorted({r["event_seq"] for r in results})
    assert answered == [row.recall_event_conversation_seq], f"callers were told {answered}"
    assert sum(not r["replayed"] for r in results) <= 1


def check_edits(store, target, results) -> None:
    tenant, conversation, seq = target
    errors = [r["error"] for r in results if "error" in r]
    assert not errors, errors
    events = store.log.controls_for(tenant, conversation, seq, "edit")
    assert sorted(e.record.conversation_seq for e in events) == sorted(r["event_seq"] for r in results)
    message = store.decode_record(record_row(store, tenant, conversation, seq, ALL))
    standing = [r for r in results if r["activity"] == message.edited_at_activity_id]
    assert len(standing) == 1 and message.body == standing[0]["body"].encode(), "the row mixes two edits"
    assert message.state is MessageState.EDITED


def sent_targets(store, count: int) -> tuple[list[tuple], uuid.UUID]:
    actor = uuid.uuid4()
    targets = []
    for _ in range(count):
        request = new_request(sender_id=actor)
        ack = store.send(request)
        targets.append((request.tenant_id, request.conversation_id, ack.conversation_seq))
    return targets, actor


@pytest.mark.parametrize("writers", [1, 3], ids=["one-store", "three-stores"])
def test_racing_recalls_log_one_event(open_store, tmp_path, writers):
    stores = [open_store(state_dir=tmp_path, node_id=40 + i) for i in range(writers)]
    stores[0].create_schema()
    targets, actor = sent_targets(stores[0], ROUNDS)
    for target in targets:
        check_recall(stores[0], target, race(stores, "recall", target, actor, THREADS))
    assert stores[0].recover() == 0


@pytest.mark.parametrize("writers", [1, 3], ids=["one-store", "three-stores"])
def test_racing_edits_leave_one_whole_version_recovery_agrees_with(open_store, tmp_path, writers):
    stores = [open_store(state_dir=tmp_path, node_id=50 + i) for i in range(writers)]
    stores[0].create_schema()
    targets, actor = sent_targets(stores[0], ROUNDS)
    rows = {}
    for target in targets:
        check_edits(stores[0], target, race(stores, "edit", target, actor, THREADS))
        rows[target] = record_row(stores[0], *target, ALL)
    assert stores[0].recover() == 0, "recovery re-applied an edit the live paths had settled"
    for target, before in rows.items():
        assert record_row(stores[0], *target, ALL) == before


def test_racing_processes(open_store, tmp_path, cluster_config, store_options):
    """Recalls and edits raced by separate processes: one set of processes for both operations
    (each process spawns an interpreter, imports the lab and connects: most of the test's time),
    every process starting each race together."""
    first = open_store(state_dir=tmp_path, node_id=60)
    first.create_schema()
    targets, actor = sent_targets(first, 2 * PROCESS_ROUNDS)
    races = [("recall" if i % 2 == 0 else "edit", target) for i, target in enumerate(targets)]
    config = cluster_config.replace(keyspace=first.keyspace)
    reports = fan_out_processes(process_main, lambda i: (config, str(tmp_path), 61 + i, races, actor, PROCESS_THREADS,
                                                         store_options(tmp_path)),
                                PROCESSES, PROCESS_TIMEOUT_SECONDS)
    for i, (op, target) in enumerate(races):
        check = check_recall if op == "recall" else check_edits
        check(first, target, [r for _, rounds, _ in reports for r in rounds[i]])
    assert first.recover() == 0
