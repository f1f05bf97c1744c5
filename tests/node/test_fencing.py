"""Fencing as a contract (design §2.4, §5.1 step 7).

- A writer learns it is fenced (a higher fencing_epoch on conversation_head: the takeover marker
  a failover writer leaves) and then refuses every further send, recall and edit of that
  conversation with :class:`~lab.errors.Fenced`, before anything is written.
- A normal-mode writer never moves back a head written at a higher epoch; the update it drops is
  counted (``head_regressions_dropped``), and so is the refusal (``fenced_refusals``).
- §2.4's failover branch: the compare-and-set writes over a lower epoch and over a row with no
  epoch; a higher epoch whose seq is below the head takes the epoch over (the marker) without
  moving latest_conversation_seq back; a lower epoch is dropped.
- §5.1 step 7: a head update that fails on the cluster (a real Unavailable: the keyspace asks
  for 3 replicas of a 1-node cluster) is retried, and alerted when the retries run out.
"""
from __future__ import annotations

import uuid

import pytest

from lab.errors import Fenced
from lab.store import FaultPlan, HeadUpdate
from store_checks import Replicas, new_request, snapshot_tables

pytestmark = pytest.mark.node


def _send(store, tenant, conversation, body=b"m"):
    return store.send(new_request(tenant_id=tenant, conversation_id=conversation, body=body))


def _history_seqs(store, tenant, conversation):
    return [m.conversation_seq for m in store.history(tenant, conversation, limit=1000).messages]


def test_old_owner_learns_it_is_fenced_and_refuses_before_writing(open_store, store, tmp_path):
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    old = open_store(state_dir=tmp_path, node_id=1)  # normal mode, epoch 0
    for _ in range(3):
        _send(old, tenant, conversation)
    old.drain()
    new = open_store(state_dir=tmp_path, node_id=2, fencing_epoch=1, head_failover=True)
    taken = [_send(new, tenant, conversation) for _ in range(2)]
    new.drain()
    assert (new.head(tenant, conversation).fencing_epoch,
            new.head(tenant, conversation).latest_conversation_seq) == (1, taken[-1].conversation_seq)
    # The old owner does not know yet: this send is written and acked, its head update finds epoch 1.
    late = _send(old, tenant, conversation)
    old.drain()
    head = new.head(tenant, conversation)
    assert (head.latest_conversation_seq, head.fencing_epoch) == (taken[-1].conversation_seq, 1), "head regressed"
    assert old.alerts.head_regressions_dropped >= 1
    assert late.conversation_seq in _history_seqs(new, tenant, conversation), "an acked message is hidden"
    # From now on it refuses, before anything is written.
    before = snapshot_tables(store)
    for call in (lambda: _send(old, tenant, conversation),
                 lambda: old.recall(tenant, conversation, late.conversation_seq, actor_id=uuid.uuid4()),
                 lambda: old.edit(tenant, conversation, late.conversation_seq, body=b"x", actor_id=uuid.uuid4())):
        with pytest.raises(Fenced) as refused:
            call()
        assert (refused.value.epoch, refused.value.head_epoch) == (0, 1)
    assert snapshot_tables(store) == before
    assert old.alerts.fenced_refusals == 3
    # Other conversations are not fenced.
    _send(old, tenant, uuid.uuid4())


@pytest.mark.parametrize("failover", [False, True], ids=["normal", "failover-form"])
def test_a_writer_started_at_a_stale_epoch_is_refused_on_its_first_send(open_store, store, tmp_path, failover):
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    new = open_store(state_dir=tmp_path, node_id=2, fencing_epoch=3, head_failover=True)
    owned = _send(new, tenant, conversation)
    new.drain()
    stale = open_store(state_dir=tmp_path, node_id=3, fencing_epoch=2, head_failover=failover)
    before = snapshot_tables(store)
    with pytest.raises(Fenced):
        _send(stale, tenant, conversation)
    assert snapshot_tables(store) == before
    assert new.head(tenant, conversation).latest_conversation_seq == owned.conversation_seq


def _update(tenant, conversation, seq):
    return HeadUpdate(tenant_id=tenant, conversation_id=conversation, conversation_seq=seq, message_id=seq,
                      last_activity_id=seq, sender_id=uuid.uuid4(), preview=b"p%d" % seq)


def _raw_head(store, tenant, conversation):
    return store.connection.execute(
        f"SELECT latest_conversation_seq, fencing_epoch, head_version FROM {store.keyspace}.conversation_head "
        "WHERE tenant_id = %s AND conversation_id = %s", (tenant, conversation)).one()


def test_failover_writes_over_a_row_with_no_epoch(open_store, store):
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    store.connection.execute(  # a head written before fencing existed: no epoch, no version
        f"UPDATE {store.keyspace}.conversation_head SET latest_conversation_seq = 5 "
        "WHERE tenant_id = %s AND conversation_id = %s", (tenant, conversation))
    failover = open_store(fencing_epoch=1, head_failover=True)
    assert failover.apply_head(_update(tenant, conversation, 6)) == "written"
    assert tuple(_raw_head(store, tenant, conversation)) == (6, 1, 6)


def test_failover_higher_epoch_takes_over_a_lower_one(open_store, store):
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    normal = open_store()
    assert normal.apply_head(_update(tenant, conversation, 10)) == "written"
    assert tuple(_raw_head(store, tenant, conversation)) == (10, 0, 10)
    failover = open_store(fencing_epoch=1, head_failover=True)
    assert failover.apply_head(_update(tenant, conversation, 12)) == "written"
    assert tuple(_raw_head(store, tenant, conversation)) == (12, 1, 12)


def test_failover_higher_epoch_below_the_head_marks_the_takeover_without_a_regression(open_store, store):
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    normal = open_store()
    assert normal.apply_head(_update(tenant, conversation, 10)) == "written"
    failover = open_store(fencing_epoch=1, head_failover=True)
    dropped = failover.alerts.head_regressions_dropped
    assert failover.apply_head(_update(tenant, conversation, 7)) == "dropped"
    assert failover.alerts.head_regressions_dropped == dropped + 1
    latest, epoch, _ = _raw_head(store, tenant, conversation)
    assert (latest, epoch) == (10, 1), "the epoch must move (the takeover marker), latest must not go back"
    # and the normal writer of epoch 0 now learns it is fenced at its next update
    assert normal.apply_head(_update(tenant, conversation, 11)) == "dropped"
    with pytest.raises(Fenced):
        _send(normal, tenant, conversation)


def test_failover_lower_epoch_is_dropped_and_fenced(open_store, store):
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    high = open_store(fencing_epoch=5, head_failover=True)
    assert high.apply_head(_update(tenant, conversation, 3)) == "written"
    low = open_store(fencing_epoch=4, head_failover=True)
    assert low.apply_head(_update(tenant, conversation, 9)) == "dropped"
    assert low.alerts.head_regressions_dropped == 1
    assert tuple(_raw_head(store, tenant, conversation)) == (3, 5, 3)
    with pytest.raises(Fenced):
        _send(low, tenant, conversation)


def test_step7_head_update_is_retried_then_alerted(open_store, store):
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    s = open_store()
    _send(s, tenant, conversation)
    s.drain()
    with Replicas(store) as replicas:
        replicas.fail()
        verdict = s.submit_head(_update(tenant, conversation, 100)).result(timeout=120)
        alerts = s.alerts.snapshot()
    assert verdict == "failed"
    assert alerts["head_update_failures"] == 1 and alerts["head_update_retries"] >= 1


def test_step7_head_update_retry_succeeds_after_a_transient_failure(open_store, store):
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    plan = FaultPlan()
    s = open_store(faults=plan)
    _send(s, tenant, conversation)
    s.drain()
    with Replicas(store) as replicas:
        replicas.fail()
        plan.interleave("head_retry", replicas.restore)  # the cluster recovers before the retry
        verdict = s.submit_head(_update(tenant, conversation, 100)).result(timeout=120)
    assert verdict == "written"
    assert s.alerts.head_update_retries >= 1 and s.alerts.head_update_failures == 0
    assert s.head(tenant, conversation).latest_conversation_seq == 100
