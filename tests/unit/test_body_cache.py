"""BodyCache (lab.store.read.body_cache): the body LRU by (tenant, message_id), and by coordinate for discard_at:
tenants, conversations and extreme ids never alias, eviction drops the coordinate too. Pure: messages built
by the constructor, no node."""
from __future__ import annotations

import uuid

from lab.store import MessageType
from lab.store.read.body_cache import BodyCache
from lab.store.rows.records import Message

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=(1 << 128) - 1)
C1, C2 = uuid.UUID(int=5), uuid.UUID(int=(1 << 127) + 5)


def _message(tenant, conversation, seq, message_id):
    return Message(tenant_id=tenant, conversation_id=conversation, seq_bucket=0, conversation_seq=seq,
                   message_id=message_id, last_activity_id=message_id, sender_id=tenant, sender_device_id=tenant,
                   client_message_id=f"c{seq}", message_type=MessageType.TEXT, body=b"b%d" % seq)


def test_tenants_conversations_and_extreme_ids_never_alias():
    cache = BodyCache(100)
    top = (1 << 128) - 1
    messages = [_message(T1, C1, 1, 7), _message(T2, C1, 1, 7), _message(T1, C2, 1, top), _message(T2, C2, (1 << 63) - 1, 0)]
    cache.put_many(messages)
    assert len(cache) == 4
    assert cache.get(T1, 7) is messages[0] and cache.get(T2, 7) is messages[1]
    assert cache.get(T1, top) is messages[2] and cache.get(T2, 0) is messages[3] and cache.get(T1, 0) is None
    assert cache.get_many(T2, [7, 0, -1, "x", 1 << 130]) == {7: messages[1], 0: messages[3]}
    cache.discard_at(T2, C1, 1)       # T2's message at (C1, 1) only
    assert cache.get(T2, 7) is None and cache.get(T1, 7) is messages[0]
    cache.discard_at(T2, C2, (1 << 63) - 1)
    assert cache.get(T2, 0) is None
    cache.discard(T1, top)
    assert cache.get(T1, top) is None and len(cache) == 1
    assert cache.discard_conversation(T1, C2) == 0 and cache.discard_conversation(T1, C1) == 1 and len(cache) == 0


def test_eviction_drops_the_coordinate_too():
    cache = BodyCache(2)
    a, b, c = _message(T1, C1, 1, 11), _message(T1, C1, 2, 12), _message(T1, C2, 3, 13)
    cache.put_many([a, b])
    assert cache.get(T1, 11) is a       # a is now the most recent: b is evicted next
    cache.put(c)
    assert cache.get(T1, 12) is None and cache.get(T1, 11) is a and cache.get(T1, 13) is c
    assert len(cache._at) == 2          # b's coordinate went with it
    cache.put(_message(T1, C1, 2, 22))  # another message at b's old coordinate: discard_at finds it
    cache.discard_at(T1, C1, 2)
    assert cache.get(T1, 22) is None and len(cache) == 1


def test_zero_entries_caches_nothing():
    cache = BodyCache(0)
    cache.put(_message(T1, C1, 1, 1))
    assert len(cache) == 0 and cache.get(T1, 1) is None


# ---- the coherence rule ---------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _version(message, *, state=None, edited=None, body=None):
    from dataclasses import replace

    from lab.store import MessageState
    return replace(message, state=state or MessageState.NORMAL, edited_at_activity_id=edited,
                   body=body if body is not None else message.body)


def test_a_read_that_began_before_a_change_never_puts_its_rows_back():
    cache = BodyCache(100)
    old = _message(T1, C1, 1, 7)
    token = cache.token()          # the read starts and reads the row ...
    cache.discard(T1, 7)           # ... an edit lands and drops the message (nothing cached yet) ...
    cache.put_many([old], since=token)  # ... the read's pre-edit row arrives late
    assert cache.get(T1, 7) is None
    cache.put_many([old], since=cache.token())  # a read that began after the change caches it
    assert cache.get(T1, 7) is old


def test_a_put_never_replaces_a_newer_version():
    from lab.store import MessageState

    cache = BodyCache(100)
    base = _message(T1, C1, 1, 7)
    recalled = _version(base, state=MessageState.RECALLED)
    edit5 = _version(base, state=MessageState.EDITED, edited=5, body=b"five")
    edit3 = _version(base, state=MessageState.EDITED, edited=3, body=b"three")
    cache.put(edit5)
    cache.put_many([edit3, base])
    assert cache.get(T1, 7) is edit5
    cache.put(recalled)
    cache.put_many([edit5, base])
    assert cache.get(T1, 7) is recalled


def test_entries_expire_after_the_stated_bound():
    clock = Clock()
    cache = BodyCache(100, ttl_seconds=2.0, clock=clock)
    cache.put(_message(T1, C1, 1, 7))
    clock.now += 1.999
    assert cache.get(T1, 7) is not None
    clock.now += 0.001
    assert cache.get(T1, 7) is None and len(cache) == 0  # another process's change is seen from here on


def test_clear_erasure_and_forgotten_discards_drop_the_puts_of_older_reads():
    cache = BodyCache(2)
    m = _message(T1, C1, 1, 7)
    for drop in (cache.clear, lambda: cache.discard_conversation(T1, C1), lambda: cache.discard_at(T1, C1, 9)):
        token = cache.token()
        drop()
        cache.put_many([m], since=token)
        assert cache.get(T1, 7) is None
    token = cache.token()
    for i in range(5000):  # more discards than it remembers: a read older than those cannot be checked
        cache.discard(T2, i)
    cache.put_many([m], since=token)
    assert cache.get(T1, 7) is None


def test_bad_bounds_are_refused():
    import pytest

    from lab.errors import ValidationError
    for ttl in (0, -1, True, "2"):
        with pytest.raises(ValidationError):
            BodyCache(10, ttl_seconds=ttl)
