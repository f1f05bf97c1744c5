"""The body LRU's coherence rule on the node (lab.store.read.body_cache): in the process that
changed a message no older body is served once the change returned; in another process none
after the stated bound (``ttl_seconds``). A second app node is a real process (crash_writers.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from lab.store import BatchEntry, MessageState
from store_checks import new_request

pytestmark = pytest.mark.node
SCRIPT = Path(__file__).with_name("crash_writers.py")


def entries(acks, conversation):
    return [BatchEntry(conversation_id=conversation, conversation_seq=a.conversation_seq, message_id=a.message_id)
            for a in acks]


def stale(result, acks, expected):
    """Messages shown older than the change acknowledged for them."""
    return [a.conversation_seq for a in acks
            if (result.messages[a.message_id].state, result.messages[a.message_id].body) != expected[a.conversation_seq]]


def test_the_changing_process_never_serves_an_older_body_after_the_ack(store):
    """Readers race each edit and recall in threads; every read that began after a change returned
    shows it (the reads in flight may put their older rows back only if the rule is broken)."""
    tenant, conversation, sender = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    acks = [store.send(new_request(tenant_id=tenant, conversation_id=conversation, sender_id=sender, body=b"v0"))
            for _ in range(4)]
    store.drain()
    stop, bad = threading.Event(), []
    acked: dict[int, tuple] = {a.conversation_seq: (MessageState.NORMAL, b"v0") for a in acks}
    lock = threading.Lock()

    def reader():
        while not stop.is_set():
            with lock:
                started = dict(acked)  # what had been acknowledged when this read began
            got = store.batch_read(tenant, entries(acks, conversation))
            for a in acks:
                m = got.messages[a.message_id]
                want = started[a.conversation_seq]
                if want[0] is MessageState.RECALLED and m.state is not MessageState.RECALLED:
                    bad.append((a.conversation_seq, m.state, m.body, want))
                elif want[0] is MessageState.EDITED and m.state is MessageState.EDITED and m.body < want[1]:
                    bad.append((a.conversation_seq, m.state, m.body, want))
                elif want[0] is MessageState.EDITED and m.state is MessageState.NORMAL:
                    bad.append((a.conversation_seq, m.state, m.body, want))

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for round_ in range(1, 6):
            for a in acks[:3]:
                body = b"v%d" % round_
                store.edit(tenant, conversation, a.conversation_seq, body=body, actor_id=sender)
                with lock:
                    acked[a.conversation_seq] = (MessageState.EDITED, body)
        store.recall(tenant, conversation, acks[3].conversation_seq, actor_id=sender)
        with lock:
            acked[acks[3].conversation_seq] = (MessageState.RECALLED, None)
        time.sleep(0.2)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not bad, bad[:5]
    final = store.batch_read(tenant, entries(acks, conversation)).messages
    assert [final[a.message_id].body for a in acks[:3]] == [b"v5"] * 3
    assert final[acks[3].message_id].state is MessageState.RECALLED


def test_another_process_sees_a_change_within_the_stated_bound(store, store_keyspace, store_state_dir, report):
    tenant, conversation, sender = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    acks = [store.send(new_request(tenant_id=tenant, conversation_id=conversation, sender_id=sender, body=b"v0"))
            for _ in range(6)]
    store.drain()
    store.batch_read(tenant, entries(acks, conversation))
    assert store.batch_read(tenant, entries(acks, conversation)).lru_hits == 6  # this node caches them
    changes = [{"conversation_id": str(conversation), "conversation_seq": a.conversation_seq,
                "kind": "recall" if i < 3 else "edit", "body": "elsewhere"} for i, a in enumerate(acks)]
    args = {"keyspace": store_keyspace, "state_dir": str(store_state_dir), "node_id": 2,  # its keys and log
            "tenant_id": str(tenant), "actor_id": str(sender), "changes": changes}
    proc = subprocess.run([sys.executable, str(SCRIPT), "change", json.dumps(args)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    done = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(done) == 6
    expected = {a.conversation_seq: (MessageState.RECALLED if i < 3 else MessageState.EDITED,
                                     b"v0" if i < 3 else b"elsewhere") for i, a in enumerate(acks)}
    bound = store.body_cache.ttl_seconds
    early = store.batch_read(tenant, entries(acks, conversation))
    early_at = time.monotonic()
    within = stale(early, acks, expected)  # allowed: this node has not heard of the change yet
    wait = max(c["acked_at"] for c in done) + bound - time.monotonic()
    time.sleep(max(0.0, wait) + 0.05)
    late = store.batch_read(tenant, entries(acks, conversation))
    after = stale(late, acks, expected)
    report("body_cache_coherence.txt", "body LRU across two app nodes",
           f"bound (ttl_seconds) {bound:.2f} s; stale reads {len(within)} of 6 at "
           f"{early_at - max(c['acked_at'] for c in done):.2f} s after the last ack (within the bound), "
           f"{len(after)} of 6 after it\n")
    assert after == [], after
