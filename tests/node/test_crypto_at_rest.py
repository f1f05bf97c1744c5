"""Encryption at rest on the real node (design §3, §6).

- Crypto-erasure: after ``erase_conversation`` the conversation is unreadable through every
  read of the store (typed: KeyDestroyed, or "missing" in a batch), also for another store
  sharing the key store, while its rows are still in message_record, read raw with CQL,
  with their ciphertext and their TTL: nothing is deleted (§3 forbids DELETE).
- AAD: a ciphertext copied with CQL into another row (same conversation, or another
  conversation) fails to decrypt when read through the store (DecryptError).
"""
from __future__ import annotations

import uuid

import pytest

from lab.errors import DecryptError, KeyDestroyed
from lab.store import BatchEntry, RetentionClass, seq_bucket
from store_checks import new_request, snapshot_tables

pytestmark = pytest.mark.node

DAY_SECONDS = 86_400


def raw_rows(store, tenant, conversation):
    return list(store.connection.execute(
        f"SELECT conversation_seq, payload_or_ciphertext, dek_id, TTL(payload_or_ciphertext) AS ttl "
        f"FROM {store.keyspace}.message_record WHERE tenant_id = %s AND conversation_id = %s AND seq_bucket = 0",
        (tenant, conversation)))


def entry(conversation, ack):
    return BatchEntry(conversation_id=conversation, conversation_seq=ack.conversation_seq, message_id=ack.message_id)


def test_erased_conversation_is_unreadable_while_its_rows_remain(store, open_store):
    tenant, erased, kept = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    classes = [RetentionClass.DEFAULT, RetentionClass.EPHEMERAL_24H, RetentionClass.COMPLIANCE_HOLD]
    acks = [store.send(new_request(tenant_id=tenant, conversation_id=erased, body=b"secret %d" % i,
                                   retention_class=c)) for i, c in enumerate(classes)]
    kept_ack = store.send(new_request(tenant_id=tenant, conversation_id=kept, body=b"kept"))
    store.drain()
    warm = store.batch_read(tenant, [entry(erased, a) for a in acks])  # the LRU now holds the bodies
    assert len(warm.messages) == 3
    before = raw_rows(store, tenant, erased)

    store.erase_conversation(tenant, erased)

    # every read of the store: typed, never the old bodies (the LRU was dropped as well)
    with pytest.raises(KeyDestroyed):
        store.history(tenant, erased)
    with pytest.raises(KeyDestroyed):
        store.lookup(tenant, acks[0].message_id)
    with pytest.raises(KeyDestroyed):
        store.read_bucket(tenant, erased, 0)
    result = store.batch_read(tenant, [entry(erased, a) for a in acks] + [entry(kept, kept_ack)])
    assert set(result.missing) == {a.message_id for a in acks}
    assert [m.body for m in result.messages.values()] == [b"kept"]  # one erasure does not fail the batch
    head = store.head(tenant, erased)
    assert head.latest_conversation_seq == acks[-1].conversation_seq and head.preview is None
    # another writer on the same key store (another process) cannot read it either
    other = open_store()
    with pytest.raises(KeyDestroyed):
        other.history(tenant, erased)
    # and nothing new can be written under it
    tables = snapshot_tables(store)
    with pytest.raises(KeyDestroyed):
        store.send(new_request(tenant_id=tenant, conversation_id=erased))
    assert snapshot_tables(store) == tables

    # the rows are all still there, ciphertext and TTL untouched: they go by TTL, never DELETE
    after = raw_rows(store, tenant, erased)
    assert [(r.conversation_seq, r.payload_or_ciphertext, r.dek_id) for r in after] == \
           [(r.conversation_seq, r.payload_or_ciphertext, r.dek_id) for r in before]
    ttl = {r.conversation_seq: r.ttl for r in after}
    by_class = dict(zip(classes, (a.conversation_seq for a in acks)))
    assert 30 * DAY_SECONDS - 60 < ttl[by_class[RetentionClass.DEFAULT]] <= 30 * DAY_SECONDS
    assert DAY_SECONDS - 60 < ttl[by_class[RetentionClass.EPHEMERAL_24H]] <= DAY_SECONDS
    assert ttl[by_class[RetentionClass.COMPLIANCE_HOLD]] is None  # kept forever, unreadable forever
    assert all(b"secret" not in r.payload_or_ciphertext for r in after)
    assert store.history(tenant, kept).messages[0].body == b"kept"


def test_a_ciphertext_moved_to_another_row_fails_to_decrypt(store):
    tenant, conversation, other_conversation = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    source, target = (store.send(new_request(tenant_id=tenant, conversation_id=conversation, body=b)) for b in
                      (b"the original", b"the victim"))
    foreign = store.send(new_request(tenant_id=tenant, conversation_id=other_conversation, body=b"elsewhere"))
    store.drain()
    [row] = [r for r in raw_rows(store, tenant, conversation) if r.conversation_seq == source.conversation_seq]
    [foreign_row] = raw_rows(store, tenant, other_conversation)
    move = store.connection.prepare(
        f"UPDATE {store.keyspace}.message_record SET payload_or_ciphertext = ?, dek_id = ? WHERE tenant_id = ? "
        "AND conversation_id = ? AND seq_bucket = ? AND conversation_seq = ?")
    # same conversation, same key: only the AAD (conversation_seq) differs
    store.connection.execute(move, (row.payload_or_ciphertext, row.dek_id, tenant, conversation,
                                    seq_bucket(target.conversation_seq), target.conversation_seq))
    # another conversation: once with the source's dek_id (names another conversation's key),
    # once keeping the row's own dek_id (right key name, wrong key and AAD)
    store.connection.execute(move, (row.payload_or_ciphertext, foreign_row.dek_id, tenant, other_conversation,
                                    0, foreign.conversation_seq))
    store.body_cache.clear()

    with pytest.raises(DecryptError):
        store.history(tenant, conversation)
    with pytest.raises(DecryptError):
        store.batch_read(tenant, [entry(conversation, target)])
    with pytest.raises(DecryptError):
        store.lookup(tenant, target.message_id)
    with pytest.raises(DecryptError):
        store.lookup(tenant, foreign.message_id)
    store.connection.execute(move, (row.payload_or_ciphertext, row.dek_id, tenant, other_conversation, 0,
                                    foreign.conversation_seq))
    with pytest.raises(DecryptError, match="another conversation's key"):
        store.history(tenant, other_conversation)
    # the source row itself still opens: the failure is the move, not the key
    assert store.lookup(tenant, source.message_id).body == b"the original"
