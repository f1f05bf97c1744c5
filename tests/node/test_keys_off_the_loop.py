"""A DEK the cache does not hold is read from the key store in a blocking step of the walk, never
on the driver's event-loop thread (lab.store.plumbing.steps): a fresh store's first
send_async, edit_async, history_async and batch_read_async each miss the cache."""
from __future__ import annotations

import threading
import uuid

import pytest

from lab.store import BatchEntry
from lab.store.crypto.keystores import LocalKeyStore
from store_checks import new_request

pytestmark = pytest.mark.node

WAIT_SECONDS = 60
LOOP_THREAD = "event_loop"  # the driver's libev reactor thread (cassandra/io/libevreactor.py)


@pytest.fixture
def key_reads(monkeypatch):
    """The names of the threads that read the local key store (the store's own key store, spied on)."""
    threads: list[str] = []
    for name in ("current", "get"):
        original = getattr(LocalKeyStore, name)

        def spy(self, *args, _original=original, **kwargs):
            threads.append(threading.current_thread().name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(LocalKeyStore, name, spy)
    return threads


def test_keys_missing_from_the_cache_are_read_off_the_loop(store, open_store, tmp_path, key_reads):
    writer = open_store(state_dir=tmp_path)
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    acks = [writer.send_async(new_request(tenant_id=tenant, conversation_id=conversation)).result(WAIT_SECONDS)
            for _ in range(3)]
    writer.drain(60)
    assert key_reads, "the first send read no key: the cache was not cold"
    reads = len(key_reads)
    editor = open_store(state_dir=tmp_path)  # same key store, empty cache
    editor.edit_async(tenant, conversation, acks[0].conversation_seq, body=b"v2",
                      actor_id=uuid.uuid4()).result(WAIT_SECONDS)
    assert len(key_reads) > reads
    reads = len(key_reads)
    reader = open_store(state_dir=tmp_path)
    page = reader.history_async(tenant, conversation).result(WAIT_SECONDS)
    assert len(page.messages) == 3 and len(key_reads) > reads
    reads = len(key_reads)
    batch_reader = open_store(state_dir=tmp_path)
    got = batch_reader.batch_read_async(tenant, [BatchEntry(conversation_id=conversation,
                                                            conversation_seq=a.conversation_seq,
                                                            message_id=a.message_id) for a in acks]).result(WAIT_SECONDS)
    assert len(got.messages) == 3 and len(key_reads) > reads
    assert LOOP_THREAD not in key_reads, f"key store reads on the loop thread: {key_reads}"
