"""The head writer's grouped requests (lab.store.write.head_writer): the updates of one
batch read their heads with one ``conversation_id IN ?`` per tenant and up to
HEAD_GROUP_PARTITIONS conversations, and write with one unlogged batch per group; each update is
still judged on its own head (written, unchanged, dropped, fenced), and a group that fails is
retried update by update; a group the server refuses as too long (an IN limit below the group)
makes the writer's groups smaller for its later batches. Batches are made deterministic by holding the writer's thread at
``before_head`` (a FaultPlan interleave) while the updates queue behind it.
"""
from __future__ import annotations

import contextlib
import threading
import uuid

import pytest

from lab.errors import Fenced, ValidationError
from lab.store import FaultPlan, HeadUpdate
from lab.cluster.admin.cassandra import CassandraAdmin
from lab.store.write.head_writer import HEAD_GROUP_PARTITIONS, HEAD_WRITE_CQL
from secure_node import secure_node
from store_checks import Replicas, new_request

pytestmark = pytest.mark.node


def _update(tenant, conversation, seq, preview=None):
    return HeadUpdate(tenant_id=tenant, conversation_id=conversation, conversation_seq=seq, message_id=seq,
                      last_activity_id=seq, sender_id=uuid.uuid4(), preview=b"p%d" % seq if preview is None else preview)


def _head_requests(store):
    return dict(store.connection.counter.snapshot().get("conversation_head", {}))


def _delta(after, before):
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def _one_batch(store, plan, updates, *, then=None):
    """Submit ``updates`` so that the head writer takes them as ONE batch: its thread is held at
    ``before_head`` (the head update of a send to a conversation of its own) until every one of them
    is queued. ``then``: run at the batch's first ``before_head``, before its reads. Returns their
    verdicts and the head requests of that batch."""
    gate, held = threading.Event(), threading.Event()

    def hold():
        held.set()
        assert gate.wait(60), "the test never released the head writer"

    plan.interleave("before_head", hold)
    store.send(new_request())  # its head update holds the writer's thread
    assert held.wait(60)
    futures = [store.submit_head(u) for u in updates]
    if then is not None:
        plan.interleave("before_head", then)
    before = _head_requests(store)
    gate.set()
    verdicts = [f.result(timeout=120) for f in futures]
    store.drain()
    requests = _delta(_head_requests(store), before)
    for kind in ("point_read", "write"):  # the holding update's own read and write (a batch of one)
        requests[kind] = requests.get(kind, 0) - 1
    return verdicts, {k: v for k, v in requests.items() if v}


def _keys(store, tenant, conversations):
    for conversation in conversations:  # each conversation's key (the preview is sealed with it)
        store.send(new_request(tenant_id=tenant, conversation_id=conversation))
    store.drain()


def test_a_batch_judges_each_conversation_on_its_own_head(open_store, tmp_path):
    plan = FaultPlan()
    s = open_store(state_dir=tmp_path / "normal", faults=plan)
    s.create_schema()
    tenant, other_tenant = uuid.uuid4(), uuid.uuid4()
    names = ("fresh", "behind", "ahead", "same", "taken")
    conv = {name: uuid.uuid4() for name in names}
    others = [uuid.uuid4() for _ in range(3)]
    _keys(s, tenant, conv.values())
    _keys(s, other_tenant, others)
    # the heads as they stand before the batch ("fresh" keeps the head its one send left: seq 1)
    for name, seq in (("behind", 5), ("ahead", 50), ("same", 7), ("taken", 20)):
        assert s.submit_head(_update(tenant, conv[name], seq)).result(timeout=60) == "written"
    owner = open_store(state_dir=tmp_path / "owner", node_id=2, fencing_epoch=1, head_failover=True)
    owner.submit_head(_update(tenant, conv["taken"], 3)).result(timeout=60)  # below the head: the epoch alone
    assert (s.head(tenant, conv["taken"]).fencing_epoch, s.head(tenant, conv["taken"]).latest_conversation_seq) == (1, 20)
    s.drain()
    dropped_before = s.alerts.head_regressions_dropped

    updates = [_update(tenant, conv["fresh"], 9), _update(tenant, conv["behind"], 10),
               _update(tenant, conv["ahead"], 10), _update(tenant, conv["same"], 7),
               _update(tenant, conv["taken"], 30), *(_update(other_tenant, c, 40 + i) for i, c in enumerate(others))]
    verdicts, requests = _one_batch(s, plan, updates)

    assert verdicts == ["written", "written", "dropped", "unchanged", "dropped", "written", "written", "written"]
    assert {name: s.head(tenant, c).latest_conversation_seq for name, c in conv.items()} == {
        "fresh": 9, "behind": 10, "ahead": 50, "same": 7, "taken": 20}
    assert s.head(tenant, conv["taken"]).fencing_epoch == 1, "a head of a higher epoch was overwritten"
    assert [s.head(other_tenant, c).latest_conversation_seq for c in others] == [40, 41, 42]
    assert s.alerts.head_regressions_dropped == dropped_before + 2
    # one IN read per tenant, one unlogged batch per group of writes (5 writes <= one group)
    assert requests == {"in_read": 2, "write": 1}, requests
    with pytest.raises(Fenced):  # the writer learnt the takeover from the grouped read
        s.send(new_request(tenant_id=tenant, conversation_id=conv["taken"]))


def test_groups_hold_at_most_head_group_partitions(open_store, tmp_path):
    plan = FaultPlan()
    s = open_store(state_dir=tmp_path, faults=plan)
    s.create_schema()
    tenant = uuid.uuid4()
    n = 2 * HEAD_GROUP_PARTITIONS + 3
    conversations = [uuid.uuid4() for _ in range(n)]
    _keys(s, tenant, conversations)
    lone_tenant = uuid.uuid4()
    lone = uuid.uuid4()
    _keys(s, lone_tenant, [lone])
    updates = [_update(tenant, c, 100 + i) for i, c in enumerate(conversations)] + [_update(lone_tenant, lone, 5)]
    verdicts, requests = _one_batch(s, plan, updates)
    assert verdicts == ["written"] * (n + 1)
    assert [s.head(tenant, c).latest_conversation_seq for c in conversations] == [100 + i for i in range(n)]
    assert s.head(lone_tenant, lone).latest_conversation_seq == 5
    groups = -(-n // HEAD_GROUP_PARTITIONS)
    # the tenant's 23 in 3 IN reads, the lone conversation's by its key; writes: 24 in 3 batches
    assert requests == {"in_read": groups, "point_read": 1, "write": -(-(n + 1) // HEAD_GROUP_PARTITIONS)}, requests


def test_a_failed_group_is_retried_update_by_update(open_store, store, tmp_path):
    plan = FaultPlan()
    s = open_store(state_dir=tmp_path, faults=plan)
    tenant = uuid.uuid4()
    conversations = [uuid.uuid4() for _ in range(4)]
    _keys(s, tenant, conversations)
    with Replicas(store) as replicas:
        # the cluster fails the group's read (Unavailable); it recovers before the first lone retry
        plan.interleave("head_retry", replicas.restore)
        verdicts, requests = _one_batch(s, plan, [_update(tenant, c, 60 + i) for i, c in enumerate(conversations)],
                                        then=replicas.fail)
    assert verdicts == ["written"] * 4
    assert [s.head(tenant, c).latest_conversation_seq for c in conversations] == [60, 61, 62, 63]
    assert s.alerts.head_update_failures == 0 and s.alerts.head_update_retries == 4
    # the failed IN read, then each update alone: its read and its write
    assert requests == {"in_read": 1, "point_read": 4, "write": 4}, requests


# ---- a server IN limit below the group ------------------------------------------------------
# Cassandra's guardrails spare superusers, and with AllowAllAuthenticator (the shared node) every
# client is one: the refusal needs a node with PasswordAuthenticator and a login role without
# superuser rights (`lab node start --secure`, as tests/node/test_security.py starts it).
GUARDED_ADDRESS = "127.0.0.33"
GUARDED_JMX_PORT = 7833
GUARDED_ROLE = "headrole"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory, lab_home):
    """A config for a node of its own where guardrails apply (a role, not a superuser); the node
    is stopped by its recorded PID afterwards."""
    with secure_node(tmp_path_factory.mktemp("guarded"), lab_home, address=GUARDED_ADDRESS,
                     jmx_port=GUARDED_JMX_PORT, role=GUARDED_ROLE, throwaway=True) as node:
        yield node.config(connect_timeout_seconds=None, keyspace="head_groups")


@contextlib.contextmanager
def _partition_keys_in_select_fail_threshold(admin, fail: int):
    """Cassandra's guardrail partition_keys_in_select_fail_threshold at ``fail`` (set live over
    JMX) for the block; the thresholds as they were afterwards."""
    before = admin.guardrail_thresholds("PartitionKeysInSelect")
    (warn_before, fail_before), = set(before.values())
    try:
        admin.guardrail_thresholds("PartitionKeysInSelect", warn=-1, fail=fail)
        yield
    finally:
        admin.guardrail_thresholds("PartitionKeysInSelect", warn=warn_before, fail=fail_before)


def test_a_group_refused_as_too_long_shrinks_the_writers_groups(guarded, tmp_path, caplog):
    """An IN limit below HEAD_GROUP_PARTITIONS (Cassandra's guardrail; ScyllaDB's
    max_partition_key_restrictions_per_query): the first grouped read is refused (InListTooLong),
    its updates are applied one by one, not counted as transient retries, and the writer reads
    in groups of the server's limit from then on: one refusal per writer, not one per batch."""
    from lab.cluster.admin import admin_for
    from lab.store import MessageStore

    limit = 4
    n = HEAD_GROUP_PARTITIONS - 1  # one group at the default size, over the limit
    plan = FaultPlan()
    with MessageStore.open(guarded, state_dir=tmp_path, faults=plan) as s:
        s.create_schema()
        admin = admin_for(guarded, s.connection)
        try:
            assert isinstance(admin, CassandraAdmin)
            tenant = uuid.uuid4()
            conversations = [uuid.uuid4() for _ in range(n)]
            _keys(s, tenant, conversations)
            alerts_before = s.alerts.snapshot()
            with _partition_keys_in_select_fail_threshold(admin, limit):
                first, first_requests = _one_batch(s, plan, [_update(tenant, c, 100 + i)
                                                             for i, c in enumerate(conversations)])
                second, second_requests = _one_batch(s, plan, [_update(tenant, c, 200 + i)
                                                               for i, c in enumerate(conversations)])
            assert first == second == ["written"] * n
            assert [s.head(tenant, c).latest_conversation_seq for c in conversations] == [200 + i for i in range(n)]
            # the refused IN read, then each update alone (its read and its write)
            assert first_requests == {"in_read": 1, "point_read": n, "write": n}, first_requests
            # later batches read in groups of the limit: 4 + 4 in IN reads, the ninth by its key
            assert second_requests == {"in_read": n // limit, "point_read": n % limit, "write": 1}, second_requests
            alerts = {k: v - alerts_before[k] for k, v in s.alerts.snapshot().items() if v != alerts_before[k]}
            assert alerts == {"head_group_shrinks": 1}, alerts
        finally:
            admin.close()
    shrinks = [r.getMessage() for r in caplog.records if "groups of" in r.getMessage()]
    assert len(shrinks) == 1 and f"limit {limit}" in shrinks[0] and f"groups of {limit}" in shrinks[0], shrinks


def test_a_full_group_of_the_largest_head_writes_draws_no_server_warning(store):
    """HEAD_GROUP_PARTITIONS head writes with the largest preview the writer seals, in one unlogged
    batch: the server accepts it without a warning (Cassandra warns over 10 partitions or 5 KiB)."""
    conn = store.connection
    stmt = store.prepare_raw(HEAD_WRITE_CQL)
    tenant = uuid.uuid4()
    preview = b"x" * (4 + 12 + 1 + 16 + 128)  # key version, nonce, flag, tag, 128 bytes of preview
    items = [(stmt, (2**62, bytes(16), bytes(16), uuid.uuid4(), preview, 2**62, 2**62, 2**62, tenant, uuid.uuid4()))
             for _ in range(HEAD_GROUP_PARTITIONS)]
    future = conn.batch_async(items)
    future.result()
    assert not future.warnings, future.warnings
    # one more partition draws Cassandra's warning: the check above can fail
    if conn.server_kind() == "cassandra":
        over = conn.batch_async(items + [(stmt, (*items[0][1][:-1], uuid.uuid4()))])
        over.result()
        assert over.warnings and any("partitions" in w or "size" in w.lower() for w in over.warnings), over.warnings


def test_a_batch_takes_only_prepared_writes_without_conditions(store):
    conn = store.connection
    with pytest.raises(ValidationError):
        conn.batch_async([])
    with pytest.raises(ValidationError):  # a CQL text, not a prepared statement
        conn.batch_async([("UPDATE {ks}.conversation_head SET fencing_epoch = 1 WHERE tenant_id = ? "
                           "AND conversation_id = ?", (uuid.uuid4(), uuid.uuid4()))])
    lwt = store.prepare_raw("INSERT INTO {ks}.conversation_head (tenant_id, conversation_id, fencing_epoch) "
                            "VALUES (?, ?, ?) IF NOT EXISTS")
    with pytest.raises(ValidationError):
        conn.batch_async([(lwt, (uuid.uuid4(), uuid.uuid4(), 1))])
    read = store.prepare_raw("SELECT fencing_epoch FROM {ks}.conversation_head WHERE tenant_id = ? AND conversation_id = ?")
    with pytest.raises(ValidationError):
        conn.batch_async([(read, (uuid.uuid4(), uuid.uuid4()))])
