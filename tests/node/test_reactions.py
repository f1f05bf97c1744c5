"""Reactions (§2.5): per-user rows, absolute summaries with a monotonic summary_version and
no LWT (client_dedup is the only LWT table, §2.3), unreact without DELETE or
tombstones, self reactions by point read only; the asynchronous twins answer as the
synchronous calls do, with the same statements."""
from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pytest

from lab.errors import ValidationError
from lab.store import NO_REACTION, REACTION_KEY_MAX_BYTES
from lab.cluster.tracing import traced

pytestmark = pytest.mark.node

SOURCE = Path(__file__).resolve().parents[2] / "lab" / "store" / "read" / "reactions.py"


def message():
    """A fresh message coordinate; reactions do not need the message row itself."""
    return uuid.uuid4(), uuid.uuid4(), 42


def issued(store, call):
    """``call()``'s result and the requests it issued: (table, kind) -> how many."""
    counter = store.connection.counter
    before = counter.snapshot()
    result = call()
    after = counter.snapshot()
    return result, {(t, k): n - before.get(t, {}).get(k, 0) for t, kinds in after.items()
                    for k, n in kinds.items() if n != before.get(t, {}).get(k, 0)}


def test_react_change_unreact_and_versions(store):
    tenant, conv, seq = message()
    alice, bob = uuid.uuid4(), uuid.uuid4()
    assert store.reaction_summary(tenant, conv, seq).summary_version == 0
    s1 = store.react(tenant, conv, seq, alice, "+1")
    assert dict(s1.counts) == {"+1": 1} and s1.summary_version > 0
    s2 = store.react(tenant, conv, seq, bob, "+1")
    assert dict(s2.counts) == {"+1": 2} and s2.summary_version > s1.summary_version
    s3 = store.react(tenant, conv, seq, alice, "heart")  # one reaction per user: replaces "+1"
    assert dict(s3.counts) == {"+1": 1, "heart": 1} and s3.summary_version > s2.summary_version
    s4 = store.unreact(tenant, conv, seq, bob)
    assert (dict(s4.counts), s4.total) == ({"heart": 1}, 1) and s4.summary_version > s3.summary_version
    stored = store.reaction_summary(tenant, conv, seq)
    assert (dict(stored.counts), stored.summary_version) == ({"heart": 1}, s4.summary_version)
    assert store.self_reaction(tenant, conv, seq, alice) == "heart"
    assert store.self_reaction(tenant, conv, seq, bob) is None  # withdrawn
    assert store.self_reaction(tenant, conv, seq, uuid.uuid4()) is None  # never reacted
    s5 = store.unreact(tenant, conv, seq, alice)
    assert dict(s5.counts) == {} and s5.summary_version > s4.summary_version


def test_self_reaction_is_one_point_read(store):
    tenant, conv, seq = message()
    user = uuid.uuid4()
    store.react(tenant, conv, seq, user, "eyes")
    counter = store.connection.counter
    before = (counter.count("message_reaction", "point_read"), counter.reads("message_reaction_summary"),
              counter.reads("message_record"))
    assert store.self_reaction(tenant, conv, seq, user) == "eyes"
    after = (counter.count("message_reaction", "point_read"), counter.reads("message_reaction_summary"),
             counter.reads("message_record"))
    assert tuple(a - b for a, b in zip(after, before)) == (1, 0, 0)


def test_bad_reaction_keys_write_nothing(store):
    tenant, conv, seq = message()
    counter = store.connection.counter
    writes = counter.count("message_reaction", "write")
    for bad in (NO_REACTION, "x" * (REACTION_KEY_MAX_BYTES + 1), None, 7):
        with pytest.raises(ValidationError):
            store.react(tenant, conv, seq, uuid.uuid4(), bad)
    with pytest.raises(ValidationError):
        store.react(tenant, conv, 0, uuid.uuid4(), "+1")
    with pytest.raises(ValidationError):
        store.react(tenant, conv, seq, "not-a-uuid", "+1")
    assert counter.count("message_reaction", "write") == writes
    assert store.reaction_summary(tenant, conv, seq).summary_version == 0


def test_concurrent_reactors_on_two_stores_lose_nothing(store, open_store):
    """Two stores (as two processes: separate in-process locks) race on one message with
    reacts, changes and unreacts; the summary converges to the detail partition and its
    version only grows."""
    tenant, conv, seq = message()
    other = open_store()
    parts = [store, other]
    users = [uuid.uuid4() for _ in range(12)]
    versions: list[int] = []
    lock = threading.Lock()

    def react(i: int) -> None:
        summaries = [parts[i % 2].react(tenant, conv, seq, users[i], "+1" if i % 3 else "party"),
                     parts[(i + 1) % 2].react(tenant, conv, seq, users[i], "party" if i % 3 else "+1")]
        if i % 4 == 0:
            summaries.append(parts[i % 2].unreact(tenant, conv, seq, users[i]))
        with lock:
            versions.extend(s.summary_version for s in summaries)

    threads = [threading.Thread(target=react, args=(i,)) for i in range(len(users))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    final = store.reaction_summary(tenant, conv, seq)
    # users 0, 4, 8 withdrew; of the rest, i % 3 == 0 (3, 6, 9) end on "+1", the others on "party"
    assert dict(final.counts) == {"+1": 3, "party": 6}
    assert all(v > 0 for v in versions) and final.summary_version == max(versions)


def test_reactions_take_no_paxos_round(store):
    """§2.3: client_dedup is the only LWT table. React / unreact issue no conditional statement,
    and the server holds no Paxos state for message_reaction_summary."""
    tenant, conv, seq = message()
    counter = store.connection.counter
    before = counter.snapshot()
    users = [uuid.uuid4() for _ in range(5)]
    for user in users:
        store.react(tenant, conv, seq, user, "+1")
    store.unreact(tenant, conv, seq, users[0])
    after = counter.snapshot()
    per_table = {t: sum(after.get(t, {}).values()) - sum(before.get(t, {}).values())
                 for t in ("message_reaction", "message_reaction_summary")}
    lwt = sum(after.get(t, {}).get("lwt", 0) - before.get(t, {}).get("lwt", 0) for t in per_table)
    print(f"6 reactions: {per_table} requests, {lwt} LWT")
    assert lwt == 0
    table_id = store.connection.execute(
        "SELECT id FROM system_schema.tables WHERE keyspace_name = %s AND table_name = 'message_reaction_summary'",
        (store.keyspace,)).one().id
    paxos = list(store.connection.execute("SELECT row_key FROM system.paxos WHERE cf_id = %s ALLOW FILTERING",
                                          (table_id,)))
    assert paxos == []
    assert dict(store.reaction_summary(tenant, conv, seq).counts) == {"+1": 4}


def test_unreact_leaves_no_tombstones(store, admin):
    """No DELETE (§3): the detail row is overwritten with '' and the summary map is patched
    (counts + {key: 0}), so neither partition holds a tombstone after flushing."""
    tenant, conv, seq = message()
    users = [uuid.uuid4() for _ in range(4)]
    for user in users:
        store.react(tenant, conv, seq, user, "+1")
    store.react(tenant, conv, seq, users[0], "heart")
    for user in users[:3]:
        store.unreact(tenant, conv, seq, user)
    assert dict(store.reaction_summary(tenant, conv, seq).counts) == {"+1": 1}
    admin.flush(store.keyspace)
    detail = store.prepare_raw("SELECT user_id, reaction_key FROM {ks}.message_reaction WHERE tenant_id = ? "
                               "AND conversation_id = ? AND conversation_seq = ?")
    rows, trace = traced(store.connection, detail, (tenant, conv, seq))
    assert sorted(r.reaction_key for r in rows) == ["", "", "", "+1"]
    assert trace.tombstones_read == 0, trace.events
    summary = store.prepare_raw("SELECT counts FROM {ks}.message_reaction_summary WHERE tenant_id = ? "
                                "AND conversation_id = ? AND seq_bucket = ?")
    rows, trace = traced(store.connection, summary, (tenant, conv, 0))
    assert dict(rows[0].counts) == {"+1": 1, "heart": 0}  # dropped keys stay as live zeros
    assert trace.tombstones_read == 0, trace.events




def test_react_async_on_one_hot_message_beside_threads_loses_nothing(store):
    """Reactors of one message at once: 40 futures from this thread (the hand-off lock queues them
    without a thread each) and 20 blocking reacts from 4 threads; then 10 withdrawals as futures.
    Every answer is a settled summary, and the stored one counts exactly the detail rows."""
    tenant, conv, seq = message()
    users = [uuid.uuid4() for _ in range(60)]
    key = {u: "+1" if i % 3 else "party" for i, u in enumerate(users)}
    futures = [store.react_async(tenant, conv, seq, u, key[u]) for u in users[:40]]

    def blocking(part: list) -> None:
        for u in part:
            store.react(tenant, conv, seq, u, key[u])
    threads = [threading.Thread(target=blocking, args=(users[40 + 5 * k:45 + 5 * k],)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    answers = [f.result(timeout=120) for f in futures]
    answers += [f.result(timeout=120) for f in [store.react_async(tenant, conv, seq, u, None) for u in users[:10]]]
    kept = users[10:]
    expected = {k: n for k in ("+1", "party") if (n := sum(key[u] == k for u in kept))}
    final = store.reaction_summary(tenant, conv, seq)
    assert dict(final.counts) == expected
    assert all(a.summary_version > 0 for a in answers) and final.summary_version >= max(a.summary_version
                                                                                        for a in answers)
    assert store.self_reaction(tenant, conv, seq, users[0]) is None and store.self_reaction(
        tenant, conv, seq, users[-1]) == key[users[-1]]


def test_react_async_issues_the_statements_react_issues(store):
    deltas = []
    for react in (store.react, lambda *a: store.react_async(*a).result(timeout=60)):
        tenant, conv, seq = message()
        deltas.append(issued(store, lambda: [react(tenant, conv, seq, user, "+1") for user in
                                             [uuid.uuid4() for _ in range(3)]])[1])
    assert deltas[0] == deltas[1]
    with pytest.raises(ValidationError):
        store.react_async(uuid.uuid4(), uuid.uuid4(), 1, uuid.uuid4(), "x" * (REACTION_KEY_MAX_BYTES + 1))


def test_unreact_and_self_reaction_twins_answer_as_the_sync_calls_with_their_statements(store):
    """Two messages reacted to alike: on one bob withdraws with unreact and three users' own reactions
    are read with self_reaction, on the other with unreact_async and self_reaction_async. The answers
    agree (a version is the overwrite's write time: each only has to grow) and so do the requests."""
    answers, requests = [], []
    for unreact, self_reaction in ((store.unreact, store.self_reaction),
                                   (lambda *a: store.unreact_async(*a).result(timeout=60),
                                    lambda *a: store.self_reaction_async(*a).result(timeout=60))):
        tenant, conv, seq = message()
        alice, bob, carol = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
        store.react(tenant, conv, seq, alice, "+1")
        reacted = store.react(tenant, conv, seq, bob, "heart")
        withdrawn, unreact_requests = issued(store, lambda: unreact(tenant, conv, seq, bob))
        own, read_requests = issued(store, lambda: [self_reaction(tenant, conv, seq, u) for u in (alice, bob, carol)])
        answers.append(((withdrawn.tenant_id, withdrawn.conversation_id, withdrawn.conversation_seq) == (tenant, conv, seq),
                        dict(withdrawn.counts), withdrawn.summary_version > reacted.summary_version, own))
        requests.append((unreact_requests, read_requests))
    assert answers[0] == answers[1] == (True, {"+1": 1}, True, ["+1", None, None])
    assert requests[0] == requests[1]
    assert requests[1][1] == {("message_reaction", "point_read"): 3}  # one point read each, no summary read
    # a bad argument is the call's own error (no future returned), and nothing is issued
    tenant, conv, seq = message()
    before = store.connection.counter.snapshot()
    for call in (store.unreact_async, store.self_reaction_async):
        for args in ((tenant, conv, 0, uuid.uuid4()), (tenant, "not-a-uuid", seq, uuid.uuid4()),
                     (tenant, conv, seq, None)):
            with pytest.raises(ValidationError):
                call(*args)
    assert store.connection.counter.snapshot() == before


def test_a_failed_reaction_releases_its_messages_lock(cluster_config, connection, tmp_path):
    """A step that fails inside the message's lock (here the summary table is gone) raises to the
    caller with the lock already released: the next reaction to that message, sync or async, fails
    the same way instead of waiting forever behind a lock the first one's traceback still held."""
    from lab.errors import LabError
    from lab.results.scratch import scratch_keyspace
    from lab.store import MessageStore

    with scratch_keyspace(connection, "rx", create=False) as ks, \
            MessageStore.open(cluster_config.replace(keyspace=ks), connection=connection, state_dir=tmp_path) as s:
        s.create_schema()
        tenant, conv, seq = message()
        s.react(tenant, conv, seq, uuid.uuid4(), "+1")  # every statement prepared
        connection.execute(f"DROP TABLE {ks}.message_reaction_summary")
        errors: list = []

        def react_twice() -> None:
            for call in (lambda: s.react(tenant, conv, seq, uuid.uuid4(), "+1"),
                         lambda: s.react_async(tenant, conv, seq, uuid.uuid4(), "+1").result(timeout=60),
                         lambda: s.react(tenant, conv, seq, uuid.uuid4(), "+1")):
                try:
                    call()
                except LabError as exc:
                    errors.append(exc)  # the traceback stays alive here, as a caller's would
        worker = threading.Thread(target=react_twice, daemon=True)
        worker.start()
        worker.join(120)
        assert not worker.is_alive(), "a reaction waits for a lock a failed one never released"
        assert len(errors) == 3


def test_a_later_error_of_a_twin_is_the_sync_calls_error(cluster_config, connection, tmp_path):
    """With the detail table gone (dropped after every statement was prepared), unreact_async and
    self_reaction_async fail in their future with the lab error unreact and self_reaction raise."""
    from lab.errors import LabError
    from lab.results.scratch import scratch_keyspace
    from lab.store import MessageStore

    with scratch_keyspace(connection, "rx", create=False) as ks, \
            MessageStore.open(cluster_config.replace(keyspace=ks), connection=connection, state_dir=tmp_path) as s:
        s.create_schema()
        tenant, conv, seq = message()
        user = uuid.uuid4()
        s.react(tenant, conv, seq, user, "+1")
        assert s.self_reaction_async(tenant, conv, seq, user).result(timeout=60) == "+1"  # every statement prepared
        connection.execute(f"DROP TABLE {ks}.message_reaction")
        for sync, twin in ((s.unreact, s.unreact_async), (s.self_reaction, s.self_reaction_async)):
            with pytest.raises(LabError) as raised:
                sync(tenant, conv, seq, user)
            future = twin(tenant, conv, seq, user)
            error = future.exception(timeout=60)
            assert type(error) is type(raised.value) and type(error).__module__ == "lab.errors", (error, raised.value)
