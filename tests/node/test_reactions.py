"""Reactions (§2.5): per-user rows, absolute summaries with a monotonic summary_version,
unreact without DELETE or tombstones, self reactions by point read only."""
from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pytest

from lab.errors import ValidationError
from lab.store.reactions import NO_REACTION, REACTION_KEY_MAX_BYTES
from lab.cluster.tracing import traced

pytestmark = pytest.mark.node

SOURCE = Path(__file__).resolve().parents[2] / "lab" / "store" / "reactions.py"


def message():
    """A fresh message coordinate; reactions do not need the message row itself."""
    return uuid.uuid4(), uuid.uuid4(), 42


def test_react_change_unreact_and_versions(store):
    tenant, conv, seq = message()
    alice, bob = uuid.uuid4(), uuid.uuid4()
    assert store.reaction_summary(tenant, conv, seq).summary_version == 0
    s1 = store.react(tenant, conv, seq, alice, "+1")
    assert (dict(s1.counts), s1.summary_version) == ({"+1": 1}, 1)
    s2 = store.react(tenant, conv, seq, bob, "+1")
    assert (dict(s2.counts), s2.summary_version) == ({"+1": 2}, 2)
    s3 = store.react(tenant, conv, seq, alice, "heart")  # one reaction per user: replaces "+1"
    assert (dict(s3.counts), s3.summary_version) == ({"+1": 1, "heart": 1}, 3)
    s4 = store.unreact(tenant, conv, seq, bob)
    assert (dict(s4.counts), s4.summary_version, s4.total) == ({"heart": 1}, 4, 1)
    stored = store.reaction_summary(tenant, conv, seq)
    assert (dict(stored.counts), stored.summary_version) == ({"heart": 1}, 4)
    assert store.self_reaction(tenant, conv, seq, alice) == "heart"
    assert store.self_reaction(tenant, conv, seq, bob) is None  # withdrawn
    assert store.self_reaction(tenant, conv, seq, uuid.uuid4()) is None  # never reacted
    s5 = store.unreact(tenant, conv, seq, alice)
    assert (dict(s5.counts), s5.summary_version) == ({}, 5)


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
    """Two stores (as two processes: separate in-process locks) race on one message;
    every reaction lands in the final summary and each applied overwrite has its own version."""
    tenant, conv, seq = message()
    other = open_store()
    parts = [store, other]
    users = [uuid.uuid4() for _ in range(12)]
    versions: list[int] = []
    lock = threading.Lock()

    def react(i: int) -> None:
        summary = parts[i % 2].react(tenant, conv, seq, users[i], "+1" if i % 3 else "party")
        with lock:
            versions.append(summary.summary_version)

    threads = [threading.Thread(target=react, args=(i,)) for i in range(len(users))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    final = store.reaction_summary(tenant, conv, seq)
    assert dict(final.counts) == {"+1": 8, "party": 4}
    # one applied compare-and-set per call: versions 1..12, each handed out once
    assert sorted(versions) == list(range(1, 13)) and final.summary_version == 12


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


