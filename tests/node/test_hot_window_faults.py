"""Recall and edit in archiver mode when the hot window (a Redis of this module's own) stalls
mid-call: the retry or ``recover()`` completes what the first attempt left, and history,
read_bucket and batch_read (body cache cleared) agree."""
from __future__ import annotations

import os
import signal
import socket
import uuid
from contextlib import contextmanager

import pytest

from lab.cluster.embedded.redis_server import EmbeddedRedis, RedisOptions
from lab.errors import HotWindowError
from lab.store import BatchEntry, MessageState
from store_checks import new_request

pytestmark = pytest.mark.node


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def own_redis(tmp_path_factory):
    server = EmbeddedRedis(RedisOptions(home=tmp_path_factory.mktemp("redis"), port=_free_port()))
    state = server.start()
    yield state
    server.stop()


# The Redis timeout of this module's store. A stalled call fails once every attempt of the client's
# retry policy (redis-py's default: 10 retries, a backoff from 10 ms doubling up to 1 s) waited this
# long, so each test waits it out about a dozen times; an answer that is only slow fails a call only
# when every one of those attempts waits this long in a row.
STALL_TIMEOUT_SECONDS = 0.25


@pytest.fixture(scope="module")
def stalling_store(open_store, store, redis_services, own_redis, tmp_path_factory):
    services = redis_services.replace(redis_port=own_redis.port, request_timeout_seconds=STALL_TIMEOUT_SECONDS)
    return open_store(state_dir=tmp_path_factory.mktemp("hot-faults"), archiver_mode=True, services=services)


@contextmanager
def stalled(redis_state):
    """Redis stopped (SIGSTOP) for the block, resumed after it whatever happens."""
    os.kill(redis_state.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(redis_state.pid, signal.SIGCONT)


def views(s, tenant, conversation, ack):
    """(state, body) of one message as history, read_bucket and batch_read (no body cache) see it."""
    page = {m.conversation_seq: m for m in s.history(tenant, conversation, limit=20).messages}
    bucket = {m.conversation_seq: m for m in s.read_bucket(tenant, conversation, 0)}
    s.body_cache.clear()
    batch = s.batch_read(tenant, [BatchEntry(conversation_id=conversation, conversation_seq=ack.conversation_seq,
                                             message_id=ack.message_id)]).messages
    out = {"history": page[ack.conversation_seq], "batch_read": batch[ack.message_id]}
    if ack.conversation_seq in bucket:  # the recall / edit archived the row (unarchived messages have none)
        out["read_bucket"] = bucket[ack.conversation_seq]
    return {k: (m.state, m.body) for k, m in out.items()}


def sent(s):
    tenant, conversation, sender = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    ack = s.send(new_request(tenant_id=tenant, conversation_id=conversation, sender_id=sender, body=b"v1"))
    s.drain()
    return tenant, conversation, sender, ack


@pytest.mark.parametrize("mend", ["retry", "recover"])
def test_a_recall_cut_by_a_redis_stall_converges(stalling_store, own_redis, mend):
    s = stalling_store
    tenant, conversation, sender, ack = sent(s)
    with stalled(own_redis), pytest.raises(HotWindowError):
        s.recall(tenant, conversation, ack.conversation_seq, actor_id=sender)
    if mend == "retry":
        s.recall(tenant, conversation, ack.conversation_seq, actor_id=sender)
    else:
        s.recover()
    seen = views(s, tenant, conversation, ack)
    assert set(seen.values()) == {(MessageState.RECALLED, seen["history"][1])}, seen
    assert "read_bucket" in seen  # the recall archived its row first


@pytest.mark.parametrize("mend", ["retry", "recover"])
def test_an_edit_cut_by_a_redis_stall_converges(stalling_store, own_redis, mend):
    s = stalling_store
    tenant, conversation, sender, ack = sent(s)
    with stalled(own_redis), pytest.raises(HotWindowError):
        s.edit(tenant, conversation, ack.conversation_seq, body=b"v2", actor_id=sender)
    if mend == "retry":
        s.edit(tenant, conversation, ack.conversation_seq, body=b"v3", actor_id=sender)
    else:
        s.recover()
    seen = views(s, tenant, conversation, ack)
    body = b"v3" if mend == "retry" else b"v2"
    assert set(seen.values()) == {(MessageState.EDITED, body)}, seen


def test_a_hot_copy_left_behind_is_mended_by_the_retry_and_recover(stalling_store, own_redis):
    """A row that carries the recall while the hot copy does not (Redis restored from an older
    snapshot, or a writer that wrote the row first and died): the client's retry and
    ``recover()`` each bring the hot copy up to the row."""
    import redis

    client = redis.Redis(host="127.0.0.1", port=own_redis.port)
    for mend in ("retry", "recover"):
        s = stalling_store
        tenant, conversation, sender, ack = sent(s)
        (key,) = list(client.scan_iter(match=f"*{tenant}:{conversation}*"))
        snapshot = client.dump(key)
        s.recall(tenant, conversation, ack.conversation_seq, actor_id=sender)
        client.restore(key, 0, snapshot, replace=True)  # the hot copy as it was before the recall
        assert views(s, tenant, conversation, ack)["batch_read"][0] is MessageState.NORMAL
        if mend == "retry":
            assert s.recall(tenant, conversation, ack.conversation_seq, actor_id=sender).replayed
        else:
            s.recover()
        assert {st for st, _ in views(s, tenant, conversation, ack).values()} == {MessageState.RECALLED}, mend
