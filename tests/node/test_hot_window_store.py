"""Archiver mode with the Redis hot window, through the store (design §2.1 note).

A committed message is readable at once (history and batch reads merge the hot window with
message_record), recalls and edits made before the archiver ran are visible in both, and once
archived the pages read the same. Runs with each outbox (the hot window does not depend on it).
"""
from __future__ import annotations

import uuid

import pytest

from lab.store import BatchEntry, MessageState
from store_checks import new_request

pytestmark = [pytest.mark.node,
              pytest.mark.parametrize("outbox_kind", ("local", "kafka"), indirect=True, scope="module")]


@pytest.fixture(scope="module")
def hot_store(open_store, store, store_options, store_state_dir, redis_services, tmp_path_factory):
    state_dir = tmp_path_factory.mktemp("hot")
    options = store_options(state_dir)
    services = options.get("services", redis_services).replace(hot_window="redis")
    return open_store(state_dir=state_dir, archiver_mode=True, services=services)


def seqs(page) -> list[int]:
    return [m.conversation_seq for m in page.messages]


def test_committed_messages_are_readable_before_the_archiver_runs(hot_store, outbox_kind):
    s = hot_store
    assert s.services.hot_window == "redis" and s.services.outbox == outbox_kind
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    acks = [s.send(new_request(tenant_id=tenant, conversation_id=conversation, body=b"m%d" % i)) for i in range(12)]
    s.drain()
    assert s.read_bucket(tenant, conversation, 0) == []  # message_record holds none of them yet
    page = s.history(tenant, conversation, limit=5)
    assert seqs(page) == [a.conversation_seq for a in acks[::-1][:5]] and page.has_more
    older = s.history(tenant, conversation, anchor=page.next_anchor, limit=50)
    assert seqs(older) == [a.conversation_seq for a in acks[::-1][5:]]
    assert [m.body for m in older.messages][-1] == b"m0"
    got = s.batch_read(tenant, [BatchEntry(conversation_id=conversation, conversation_seq=a.conversation_seq,
                                           message_id=a.message_id) for a in acks])
    assert got.hot_hits == 12 and not got.missing and got.messages[acks[3].message_id].body == b"m3"


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_recall_and_edit_before_archiving_are_visible_in_both(hot_store, driver):
    """Either driver of recall / edit (the asynchronous one reads the log and writes the hot copy in
    blocking steps, off the loop thread) leaves the same rows and hot copies."""
    s = hot_store
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    sender = uuid.uuid4()
    acks = [s.send(new_request(tenant_id=tenant, conversation_id=conversation, sender_id=sender, body=b"v1"))
            for _ in range(3)]
    s.drain()  # conversation_head (history's upper bound) is written asynchronously, step 7
    if driver == "sync":
        s.recall(tenant, conversation, acks[0].conversation_seq, actor_id=sender)
        s.edit(tenant, conversation, acks[1].conversation_seq, body=b"v2", actor_id=sender)
    else:
        s.recall_async(tenant, conversation, acks[0].conversation_seq, actor_id=sender).result(timeout=60)
        s.edit_async(tenant, conversation, acks[1].conversation_seq, body=b"v2", actor_id=sender).result(timeout=60)

    def states():
        page = {m.conversation_seq: m for m in s.history(tenant, conversation, limit=10).messages}
        s.body_cache.clear()
        batch = s.batch_read(tenant, [BatchEntry(conversation_id=conversation, conversation_seq=a.conversation_seq,
                                                 message_id=a.message_id) for a in acks]).messages
        return ([(page[a.conversation_seq].state, page[a.conversation_seq].body) for a in acks],
                [(batch[a.message_id].state, batch[a.message_id].body) for a in acks])

    expected = [MessageState.RECALLED, MessageState.EDITED, MessageState.NORMAL]
    in_history, in_batch = states()
    assert [st for st, _ in in_history] == expected == [st for st, _ in in_batch]
    assert in_history[1][1] == in_batch[1][1] == b"v2"
    s.archive_once()
    assert s.archive_lag() == 0
    archived = {m.conversation_seq: m for m in s.read_bucket(tenant, conversation, 0)}
    assert [archived[a.conversation_seq].state for a in acks] == expected
    assert states() == (in_history, in_batch)  # the same pages once message_record has them


def test_a_replayed_send_keeps_one_hot_copy(hot_store, redis_services):
    from lab.store import HotWindow

    s = hot_store
    req = new_request()
    first = s.send(req)
    again = s.send(req)
    s.drain()
    assert again.replayed and (again.message_id, again.conversation_seq) == (first.message_id, first.conversation_seq)
    page = s.history(req.tenant_id, req.conversation_id)
    assert seqs(page) == [first.conversation_seq]
    window = HotWindow.open(redis_services, namespace=s.keyspace, window_days=7)  # the store's, seen from outside
    assert window.client.zcard(window.key(req.tenant_id, req.conversation_id)) == 1
    assert 7 * 86_400 - 5 <= window.ttl_seconds(req.tenant_id, req.conversation_id) <= 7 * 86_400
    window.close()


def test_the_asynchronous_paths_write_and_read_the_hot_window(hot_store):
    """send_async puts each message in the hot window (a blocking step, off the loop thread);
    history_async and batch_read_async read it back as their synchronous twins do."""
    s = hot_store
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    futures = [s.send_async(new_request(tenant_id=tenant, conversation_id=conversation, body=b"a%d" % i))
               for i in range(12)]
    acks = [f.result(timeout=60) for f in futures]
    s.drain()
    assert s.read_bucket(tenant, conversation, 0) == []  # message_record holds none of them yet
    entries = [BatchEntry(conversation_id=conversation, conversation_seq=a.conversation_seq, message_id=a.message_id)
               for a in acks]
    got = s.batch_read_async(tenant, entries).result(timeout=60)
    assert got.hot_hits == 12 and not got.missing
    assert {mid: m.body for mid, m in got.messages.items()} == {a.message_id: b"a%d" % i for i, a in enumerate(acks)}
    page = s.history_async(tenant, conversation, limit=50).result(timeout=60)
    assert seqs(page) == seqs(s.history(tenant, conversation, limit=50)) == sorted(
        (a.conversation_seq for a in acks), reverse=True)
