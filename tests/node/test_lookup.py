"""Admin lookup by message_id through message_index (§2.2), and the head read."""
from __future__ import annotations

import uuid

import pytest

from lab.errors import InvalidId, NotFound
from seed import body_of, insert_messages, new_conversation

pytestmark = pytest.mark.node


def test_lookup_goes_through_the_index_then_one_point_read(store):
    tenant, conv, sent = new_conversation(store, [5, 6], index=True)
    counter = store.connection.counter
    before = (counter.count("message_index", "point_read"), counter.count("message_record", "point_read"),
              counter.reads("message_record"))
    found = store.lookup(tenant, sent[6].message_id)
    after = (counter.count("message_index", "point_read"), counter.count("message_record", "point_read"),
             counter.reads("message_record"))
    assert tuple(a - b for a, b in zip(after, before)) == (1, 1, 1)
    assert (found.conversation_id, found.conversation_seq, found.body) == (conv, 6, body_of(6))


def test_lookup_not_found(store):
    tenant, conv, sent = new_conversation(store, [1])  # no index entry written
    with pytest.raises(NotFound) as info:
        store.lookup(tenant, sent[1].message_id)
    assert info.value.table == "message_index"
    with pytest.raises(NotFound):
        store.lookup(uuid.uuid4(), 1)  # other tenant
    with pytest.raises(InvalidId):
        store.lookup(tenant, -1)


def test_lookup_of_an_index_entry_whose_record_is_gone(store):
    tenant, conv = uuid.uuid4(), uuid.uuid4()
    sent = insert_messages(store, tenant, conv, [3], index=True)
    # the same slot later holds another message (the index entry is stale): not a wrong answer
    insert_messages(store, tenant, conv, [3])
    with pytest.raises(NotFound) as info:
        store.lookup(tenant, sent[3].message_id)
    assert info.value.table == "message_record"


def test_lookup_and_head_of_a_sent_message(store):
    from lab.store import SendRequest

    tenant, conv, sender = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    assert store.head(tenant, conv) is None
    ack = store.send(SendRequest(tenant_id=tenant, conversation_id=conv, sender_id=sender, sender_device_id=sender,
                                 client_message_id="lookup-1", body=b"find me"))
    store.drain()
    assert store.lookup(tenant, ack.message_id).body == b"find me"
    head = store.head(tenant, conv)
    assert head.latest_conversation_seq == ack.conversation_seq and head.last_message_id == ack.message_id
    page = store.history(tenant, conv)
    assert [m.message_id for m in page.messages] == [ack.message_id]
