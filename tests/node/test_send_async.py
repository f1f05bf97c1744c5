"""send_async against the real node (lab.store.plumbing.steps): a thousand sends in flight from
one thread, without a thread per send, every one stored once where its ack says (rows, index,
log, dedup, head); the statements send() issues, no more; errors, crash points, fencing and
retries in the future, of the type send() raises."""
from __future__ import annotations

import threading
import uuid
from collections import Counter, defaultdict

import pytest

from lab.errors import CrashInjected, Fenced, PayloadTooLarge, ValidationError
from lab.store import DedupState, FaultPlan, blob_to_u128
from store_checks import dedup_row, new_request, outbox_messages, settle, snapshot_tables, stale_writer

pytestmark = [pytest.mark.node,
              pytest.mark.parametrize("outbox_kind", ["local", "kafka"], indirect=True, scope="module")]

SENDS = 1000
CONVERSATIONS = 20
WAIT_SECONDS = 180
CLIENT_ATTEMPTS = 5  # a send the cluster failed (a timeout under 1,000 in flight) is retried as a client does
# the threads send_async may add at most: its blocking pool, the group commit's worker, the driver's own
THREAD_ALLOWANCE = 8


def test_a_thousand_sends_in_flight_from_one_thread_are_each_stored_once(store, outbox_kind):
    sends = SENDS if outbox_kind == "local" else SENDS // 5  # the suite's time: the Kafka outbox at a fifth
    tenant = uuid.uuid4()
    conversations = [uuid.uuid4() for _ in range(CONVERSATIONS)]
    requests = [new_request(tenant_id=tenant, conversation_id=conversations[i % CONVERSATIONS],
                            body=f"async {i}".encode()) for i in range(sends)]
    threads_before = threading.active_count()
    futures = [store.send_async(r) for r in requests]
    threads_in_flight = threading.active_count()
    acks, retries = settle([lambda r=r: store.send_async(r) for r in requests], started=futures,
                           attempts=CLIENT_ATTEMPTS, timeout=WAIT_SECONDS)
    threads_after = threading.active_count()
    assert threads_in_flight - threads_before <= THREAD_ALLOWANCE, "a thread per send in flight"
    assert threads_after - threads_before <= THREAD_ALLOWANCE
    # each ack once: distinct message ids, and per conversation the seqs 1..n with no gap or repeat
    assert len({a.message_id for a in acks}) == sends
    assert sum(a.replayed for a in acks) <= retries, "a replay without a retry"
    by_conversation: dict = defaultdict(dict)
    for request, ack in zip(requests, acks):
        by_conversation[request.conversation_id][ack.conversation_seq] = (ack.message_id, request.body)
    per = sends // CONVERSATIONS
    store.drain(60)  # the latest page starts at the head: every head update in
    for conversation, acked in by_conversation.items():
        assert sorted(acked) == list(range(1, per + 1))
        page = store.history(tenant, conversation, limit=per + 10)
        assert {m.conversation_seq: (m.message_id, m.body) for m in page.messages} == acked, \
            "history is not what the acks name"
        logged = outbox_messages(store, tenant, conversation)
        assert Counter(e.record.conversation_seq for e in logged) == Counter(acked.keys()), "log lost or doubled a send"
        assert {e.record.conversation_seq: blob_to_u128(e.record.payload.record.message_id) for e in logged} \
            == {seq: ids[0] for seq, ids in acked.items()}
    assert all((row := dedup_row(store, r)).state == DedupState.COMMITTED and blob_to_u128(row.message_id)
               == a.message_id for r, a in zip(requests, acks))
    for conversation in conversations:
        assert store.head(tenant, conversation).latest_conversation_seq == per


def test_an_async_send_issues_the_statements_send_issues(store, outbox_kind):
    if outbox_kind == "kafka":
        pytest.skip("no outbox in what this checks: the local outbox's run covers it")
    counter = store.connection.counter
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    snapshots = []
    for send in (store.send, lambda r: store.send_async(r).result(timeout=WAIT_SECONDS)) * 2:
        store.drain(60)
        before = counter.snapshot()
        send(new_request(tenant_id=tenant, conversation_id=conversation))
        store.drain(60)
        after = counter.snapshot()
        snapshots.append({(t, k): n - before.get(t, {}).get(k, 0) for t, kinds in after.items()
                          for k, n in kinds.items() if n != before.get(t, {}).get(k, 0)})
    # the first of each pair may read the head's epoch (fencing, once per conversation); the second may not
    assert snapshots[2] == snapshots[3], "a warm async send issues other statements than a warm send"
    assert snapshots[1] == snapshots[2]


def test_errors_are_the_futures_of_the_types_send_raises(store, open_store, tmp_path, outbox_kind):
    if outbox_kind == "kafka":
        pytest.skip("no outbox in what this checks: the local outbox's run covers it")
    future = store.send_async("not a request")
    assert isinstance(future.exception(timeout=WAIT_SECONDS), ValidationError)
    big = new_request(body=b"x" * (store.constants.payload_max_bytes + 1))
    assert isinstance(store.send_async(big).exception(timeout=WAIT_SECONDS), PayloadTooLarge)
    # a retry of the same client_message_id: the first ack, replayed (the resume runs off the loop)
    request = new_request()
    first = store.send_async(request).result(timeout=WAIT_SECONDS)
    again = store.send_async(request).result(timeout=WAIT_SECONDS)
    assert (again.message_id, again.conversation_seq, again.replayed) == (first.message_id, first.conversation_seq,
                                                                          True)


@pytest.mark.parametrize("point", ["after_reserve", "after_record", "after_outbox", "after_commit"])
def test_a_crash_point_fails_the_future_and_a_retry_resumes(open_store, tmp_path, point, outbox_kind):
    if outbox_kind == "kafka" and point != "after_outbox":
        pytest.skip("the walk is the same: the local outbox's runs cover this point")
    crashing = open_store(state_dir=tmp_path, faults=FaultPlan().arm(point))
    request = new_request()
    assert isinstance(crashing.send_async(request).exception(timeout=WAIT_SECONDS), CrashInjected)
    restarted = open_store(state_dir=tmp_path)
    restarted.recover()
    ack = restarted.send_async(request).result(timeout=WAIT_SECONDS)
    assert ack.replayed
    row = dedup_row(restarted, request)
    assert (row.state, blob_to_u128(row.message_id)) == (DedupState.COMMITTED, ack.message_id)
    restarted.drain(60)
    page = restarted.history(request.tenant_id, request.conversation_id)
    assert [(m.conversation_seq, m.message_id) for m in page.messages] == [(ack.conversation_seq, ack.message_id)]


def test_a_fenced_writer_refuses_in_the_future_before_writing(store, open_store, tmp_path, outbox_kind):
    if outbox_kind == "kafka":
        pytest.skip("no outbox in what this checks: the local outbox's run covers it")
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    stale, _seq = stale_writer(open_store, tmp_path, tenant, conversation)
    before = snapshot_tables(store)
    refused = stale.send_async(new_request(tenant_id=tenant, conversation_id=conversation)).exception(
        timeout=WAIT_SECONDS)
    assert isinstance(refused, Fenced) and (refused.epoch, refused.head_epoch) == (0, 1)
    assert snapshot_tables(store) == before
