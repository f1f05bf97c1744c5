"""Concurrency on the real node.

- Many concurrent sends of one client_message_id, from threads (over several stores, i.e.
  several writers) and from separate processes (each with its own MessageStore on the same
  keyspace and a shared state_dir), yield exactly one message: one LWT winner, every other
  sender replays the winner's ack, and every table holds that one message once, with the
  acked last_activity_id (also when two resumes of a crashed send race, made deterministic
  with a fault plan that pauses instead of crashing).
- Concurrent conversation_head updates never move latest_conversation_seq backwards: a
  poller reads the head throughout and must only ever see it grow.

Every test runs with each outbox (local SQLite, Kafka-protocol log): ``outbox_kind`` is
parametrized for the module, and the writers share the log as they share the state folder.
"""
from __future__ import annotations

import random
import threading
import uuid

import pytest

from concurrent_sends import process_main, race, send_as_client
from fan_out import fan_out_processes
from lab.errors import CrashInjected
from lab.store import DedupState, FaultPlan, HeadUpdate, blob_to_u128, u128_to_blob
from store_checks import dedup_row, index_rows, new_request, outbox_messages

pytestmark = [pytest.mark.node,
              pytest.mark.parametrize("outbox_kind", ("local", "kafka"), indirect=True, scope="module")]

THREAD_ROUNDS, THREADS, THREAD_STORES = 4, 16, 4
PROCESS_ROUNDS, PROCESSES, PROCESS_THREADS = 3, 4, 4
PROCESS_TIMEOUT_SECONDS = 240


def conversation_rows(store, tenant_id, conversation_id) -> list:
    """Every message_record row of one conversation, whatever bucket a racing writer used
    (each writer allocates from its own reservation window, so buckets differ)."""
    rows = store.connection.execute(
        f"SELECT tenant_id, conversation_id, conversation_seq, message_id, last_activity_id, client_message_id "
        f"FROM {store.keyspace}.message_record")
    return [r for r in rows if (r.tenant_id, r.conversation_id) == (tenant_id, conversation_id)]


def assert_one_message(store, request, acks: list[dict]) -> dict:
    """The race's acks agree and the tables hold exactly that one message."""
    errors = [a["error"] for a in acks if "error" in a]
    assert not errors, errors
    ids = {(a["message_id"], a["conversation_seq"], a["last_activity_id"]) for a in acks}
    assert len(ids) == 1, f"{len(ids)} different acks for one client_message_id: {ids}"
    assert sum(not a["replayed"] for a in acks) == 1, "exactly one sender wins the reservation"
    message_id, seq, activity = ids.pop()
    rows = conversation_rows(store, request.tenant_id, request.conversation_id)
    assert [(r.conversation_seq, blob_to_u128(r.message_id)) for r in rows] == [(seq, message_id)]
    assert blob_to_u128(rows[0].last_activity_id) == activity, "the row must carry the acked last_activity_id"
    dedup = dedup_row(store, request)
    assert dedup.state == DedupState.COMMITTED and blob_to_u128(dedup.message_id) == message_id
    assert len(index_rows(store, request.tenant_id, u128_to_blob(message_id))) == 1
    entries = outbox_messages(store, request.tenant_id, request.conversation_id)
    assert [e.record.conversation_seq for e in entries] == [seq]
    return {"senders": len(acks), "client_retries": sum(a["failures"] for a in acks)}


def test_threads_on_several_writers_send_one_message(store, open_store):
    writers = [store] + [open_store(node_id=10 + i) for i in range(THREAD_STORES - 1)]
    stats = []
    for _ in range(THREAD_ROUNDS):
        request = new_request()
        stats.append(assert_one_message(store, request, race(writers, request, THREADS)))
        # and a late retry, after the race settled, replays the same ack
        again, _ = send_as_client(writers[-1], request)
        assert again.replayed
    print(f"threads: {THREAD_ROUNDS} races x {THREADS} senders on {THREAD_STORES} writers; "
          f"client retries {sum(s['client_retries'] for s in stats)}")


class PauseAt(FaultPlan):
    """A fault plan that blocks (instead of crashing) when its store reaches ``point``."""

    def __init__(self, point: str) -> None:
        super().__init__()
        self.point, self.reached, self.release = point, threading.Event(), threading.Event()

    def hit(self, point: str) -> None:
        super().hit(point)
        if point == self.point:
            self.reached.set()
            assert self.release.wait(120), "never released"


def test_two_resumes_of_one_send_leave_the_row_their_acks_name(store, open_store):
    """The first attempt died after its reservation: two retries both find RESERVED and no log
    entry, so each resumes with a last_activity_id (and sealing) of its own. Here the one that
    wrote the row first wins the outbox append: its columns are what both acks name, so the
    other, whose row write came last, must rewrite the row with them."""
    request = new_request()
    with pytest.raises(CrashInjected):
        open_store(faults=FaultPlan().arm("after_reserve")).send(request)
    first, second = PauseAt("after_record"), PauseAt("after_record")
    acks: dict[str, object] = {}

    def resume(name: str, plan: PauseAt) -> None:
        acks[name] = open_store(faults=plan).send(request)

    threads = {name: threading.Thread(target=resume, args=(name, plan))
               for name, plan in (("first", first), ("second", second))}
    threads["first"].start()
    assert first.reached.wait(60)   # first: row written, paused before the outbox
    threads["second"].start()
    assert second.reached.wait(60)  # second: its row written after the first's, paused too
    first.release.set()
    threads["first"].join()         # first appends (wins), commits, acks
    second.release.set()
    threads["second"].join()        # second's append finds the first's entry
    assert set(acks) == {"first", "second"}
    assert_one_message(store, request, [{"message_id": a.message_id, "conversation_seq": a.conversation_seq,
                                         "last_activity_id": a.last_activity_id, "replayed": name == "second",
                                         "failures": 0} for name, a in acks.items()])


def test_processes_send_one_message(store, cluster_config, store_state_dir, store_options):
    requests = [new_request() for _ in range(PROCESS_ROUNDS)]
    config = cluster_config.replace(keyspace=store.keyspace)
    options = store_options(store_state_dir)  # the same outbox (and log) as the module's stores
    reports = fan_out_processes(process_main, lambda i: (config, str(store_state_dir), 20 + i, requests,
                                                         PROCESS_THREADS, options),
                                PROCESSES, PROCESS_TIMEOUT_SECONDS)
    retries = 0
    for i, request in enumerate(requests):
        acks = [a for _, rounds, _ in reports for a in rounds[i]]
        assert len(acks) == PROCESSES * PROCESS_THREADS
        retries += assert_one_message(store, request, acks)["client_retries"]
    print(f"processes: {PROCESS_ROUNDS} races x {PROCESSES} processes x {PROCESS_THREADS} threads; "
          f"client retries {retries}")


class HeadPoller(threading.Thread):
    """Reads conversation_head as fast as it can; records every regression it sees."""

    def __init__(self, store, tenant_id, conversation_id):
        super().__init__(daemon=True)
        self.store, self.key = store, (tenant_id, conversation_id)
        self.seen: list[int] = []
        self.regressions: list[tuple[int, int]] = []
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            head = self.store.head(*self.key)
            if head is None:
                continue
            if self.seen and head.latest_conversation_seq < self.seen[-1]:
                self.regressions.append((self.seen[-1], head.latest_conversation_seq))
            self.seen.append(head.latest_conversation_seq)

    def stop(self) -> HeadPoller:
        self._halt.set()
        self.join(timeout=30)
        return self


def run_threads(count: int, work) -> None:
    errors: list[BaseException] = []

    def wrapped(i: int) -> None:
        try:
            work(i)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=wrapped, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_head_never_regresses_under_concurrent_sends(store, open_store):
    """One writer, many sending threads: acks (and so head updates) arrive out of seq order;
    the head writer drops the older ones instead of applying them."""
    s = open_store()
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    poller = HeadPoller(s, tenant, conversation)
    poller.start()
    seqs: list[int] = []

    def sender(i: int) -> None:
        for _ in range(12):
            seqs.append(s.send(new_request(tenant_id=tenant, conversation_id=conversation)).conversation_seq)

    run_threads(12, sender)
    s.drain()
    poller.stop()
    assert poller.regressions == []
    assert s.head(tenant, conversation).latest_conversation_seq == max(seqs)
    print(f"head: {len(seqs)} sends, {len(poller.seen)} polls, "
          f"{s.alerts.head_regressions_dropped} stale updates dropped")


def test_head_never_regresses_under_concurrent_writers(store, open_store):
    """Head updates in shuffled seq order from many threads: through one writer's queue (the
    normal blind form), and applied directly by three writers at once (the failover
    compare-and-set form, which is what two writers of one conversation use, §2.4)."""
    sender = uuid.uuid4()

    def updates(tenant, conversation, top):
        order = list(range(1, top + 1))
        random.Random(7).shuffle(order)
        return [HeadUpdate(tenant_id=tenant, conversation_id=conversation, conversation_seq=seq,
                           message_id=seq, last_activity_id=seq, sender_id=sender) for seq in order]

    # blind form: updates submitted concurrently from 8 threads into one writer's queue
    s = open_store()
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    pending = updates(tenant, conversation, 120)
    poller = HeadPoller(s, tenant, conversation)
    poller.start()
    run_threads(8, lambda i: [s.submit_head(u) for u in pending[i::8]])
    s.drain()
    poller.stop()
    assert poller.regressions == [] and s.head(tenant, conversation).latest_conversation_seq == 120

    # failover form: three writers of one epoch apply concurrently, no queue in between
    writers = [open_store(head_failover=True, fencing_epoch=1) for _ in range(3)]
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    pending = updates(tenant, conversation, 60)
    poller = HeadPoller(s, tenant, conversation)
    poller.start()
    verdicts: list[str] = []
    run_threads(6, lambda i: verdicts.extend(writers[i % 3].apply_head(u) for u in pending[i::6]))
    poller.stop()
    head = s.head(tenant, conversation)
    assert poller.regressions == []
    assert (head.latest_conversation_seq, head.head_version) == (60, 60)
    assert "failed" not in verdicts
    print(f"head CAS: {verdicts.count('written')} written, {verdicts.count('dropped')} dropped, "
          f"{sum(w.alerts.head_cas_retries for w in writers)} CAS retries, {len(poller.seen)} polls")
