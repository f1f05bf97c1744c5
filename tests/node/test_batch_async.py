"""batch_read_async against the real node: the result batch_read gives, field by field, for every
shape of batch (S-1's 1 x 500 and 20 x 5, dense ranges with holes, IN lists, LRU hits, inline
entries, missing and crypto-erased messages, summaries); many batches in flight from one thread
without a thread per batch; errors typed as batch_read's (lab.store.plumbing.steps)."""
from __future__ import annotations

import threading
import uuid

import pytest

from lab.errors import ValidationError
from lab.store import BatchEntry
from seed import insert_messages

pytestmark = pytest.mark.node

FIELDS = ("groups", "requests", "lru_hits", "inline_skipped", "missing", "decoded", "hot_hits")


def entries_of(conversation_id, messages, seqs=None):
    return [BatchEntry(conversation_id=conversation_id, conversation_seq=s, message_id=messages[s].message_id)
            for s in (sorted(messages) if seqs is None else seqs)]


def view(result) -> dict:
    out = {f: getattr(result, f) for f in FIELDS}
    out["messages"] = {mid: (m.conversation_seq, m.body, m.state) for mid, m in result.messages.items()}
    out["summaries"] = {mid: (dict(s.counts), s.summary_version) for mid, s in result.summaries.items()}
    return out


def new_conversation(store, seqs, *, tenant_id):
    conversation_id = uuid.uuid4()
    return tenant_id, conversation_id, insert_messages(store, tenant_id, conversation_id, list(seqs))


@pytest.fixture(scope="module")
def shapes(store):
    tenant = uuid.uuid4()
    step = int(1 / store.constants.batch_read_range_min_density) + 1
    one_group = new_conversation(store, range(1, 501), tenant_id=tenant)
    dms = [new_conversation(store, range(1, 6), tenant_id=tenant) for _ in range(20)]
    sparse = new_conversation(store, list(range(1, step * 250, step)), tenant_id=tenant)
    erased = new_conversation(store, [1, 2], tenant_id=tenant)
    store.react(tenant, one_group[1], 7, uuid.uuid4(), "+1")
    store.erase_conversation(tenant, erased[1])
    holes = [s for s in range(1, 501) if s % 10]
    batches = {
        "1x500": entries_of(one_group[1], one_group[2]),
        "20x5": [e for _, conv, sent in dms for e in entries_of(conv, sent)],
        "dense with holes": entries_of(one_group[1], one_group[2], holes),
        "in lists": entries_of(sparse[1], sparse[2]),
        "missing, erased, inline": entries_of(one_group[1], one_group[2], [1, 2]) + entries_of(erased[1], erased[2]) + [
            BatchEntry(conversation_id=one_group[1], conversation_seq=999, message_id=12345),
            BatchEntry(conversation_id=one_group[1], conversation_seq=3, message_id=one_group[2][3].message_id,
                       inline_body=b"inline")],
    }
    return tenant, batches


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "lru"])
def test_every_shape_reads_what_batch_read_reads(store, shapes, warm):
    tenant, batches = shapes
    for name, entries in batches.items():
        store.body_cache.clear()
        if warm:
            store.batch_read(tenant, entries[::3])  # a third of them in the LRU
        sync = view(store.batch_read(tenant, entries))
        store.body_cache.clear()
        if warm:
            store.batch_read(tenant, entries[::3])
        assert view(store.batch_read_async(tenant, entries).result(timeout=60)) == sync, name


def test_many_batches_in_flight_from_one_thread(store, shapes):
    tenant, batches = shapes
    entries = batches["20x5"]
    expected = view(store.batch_read(tenant, entries))["messages"]
    store.body_cache.clear()
    threads = threading.active_count()
    futures = [store.batch_read_async(tenant, entries) for _ in range(200)]
    assert threading.active_count() - threads <= 4, "a thread per batch in flight"
    results = [f.result(timeout=120) for f in futures]
    assert all(view(r)["messages"] == expected for r in results)
    assert results[0].requests == 40, "the first batch in flight read the table"


def test_bad_entries_raise_at_once_and_a_later_error_is_the_futures(store, shapes):
    tenant, batches = shapes
    with pytest.raises(ValidationError):
        store.batch_read_async(tenant, [BatchEntry(conversation_id="not-a-uuid", conversation_seq=1, message_id=1)])
    with pytest.raises(ValidationError):
        store.batch_read_async(tenant, "not entries")
    other = uuid.uuid4()
    kept = insert_messages(store, tenant, other, [1])
    result = store.batch_read_async(tenant, entries_of(other, kept)).result(timeout=60)
    assert set(result.messages) == {kept[1].message_id}
