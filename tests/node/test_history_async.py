"""history_async against the real node: the page history() returns, field by field, for every
shape of conversation; many pages in flight from one thread without a thread per call; errors
(the driver's, the walk's own) in the future, of the type history() raises (lab.store.plumbing.steps)."""
from __future__ import annotations

import threading
import uuid

import pytest

from lab.constants import load_constants
from lab.errors import BucketOverflow, InvalidRequest, RequestTimeout, ValidationError
from seed import insert_messages, new_conversation

pytestmark = pytest.mark.node

NARROW_W = 16
EMPTY_LIMIT = load_constants().history_max_empty_bucket_scan


@pytest.fixture(scope="module")
def narrow(cluster_config, connection, tmp_path_factory):
    """Two stores on one keyspace of 16-seq buckets and one state_dir (their keys): a sync and an
    async reader, each with its own memory of the H it saw."""
    from lab.store import MessageStore

    name = f"a_{uuid.uuid4().hex[:10]}"
    constants = load_constants().replace(message_seq_bucket_width=NARROW_W)
    state_dir = tmp_path_factory.mktemp("async")
    stores = [MessageStore.open(cluster_config.replace(keyspace=name), connection=connection, constants=constants,
                                state_dir=state_dir) for _ in range(2)]
    stores[0].create_schema()
    yield stores
    for s in stores:
        s.close()
    connection.execute(f"DROP KEYSPACE IF EXISTS {name}")


def shapes(store) -> dict[str, tuple[uuid.UUID, uuid.UUID]]:
    """Conversations of every shape a page walk meets (W = 16)."""
    hole = (EMPTY_LIMIT - 2) * NARROW_W  # a hole of empty buckets the walk crosses
    far = (EMPTY_LIMIT + 3) * NARROW_W   # one it stops in
    out = {name: new_conversation(store, seqs, **kw)[:2] for name, seqs, kw in (
        ("one_bucket", range(1, 11), {}),
        ("several_buckets", range(1, 61), {}),
        ("crossed_hole", [1, 2, 3, hole + 5, hole + 6], {}),
        ("stopped_hole", [1, far], {}),
        ("head_lags", range(1, 31), {"latest": 25}),          # rows above H take places in the LIMIT
        ("earliest_inside", range(1, 61), {"earliest": 20}),  # E inside bucket 1
        ("bucket_edge", range(1, 33), {}),                     # H = 32, first seq of bucket 2
    )}
    out["no_head"] = (uuid.uuid4(), uuid.uuid4())
    headless = (uuid.uuid4(), uuid.uuid4())  # rows but no conversation_head row
    insert_messages(store, *headless, range(1, 5))
    out["rows_without_head"] = headless
    return out


QUERIES = (
    {}, {"limit": 5}, {"limit": 20}, {"limit": 100}, {"limit": 1},
    {"anchor": 40, "limit": 5}, {"anchor": 17, "limit": 30}, {"anchor": 100, "limit": 3}, {"anchor": 1},
    {"anchor": 2 ** 63 - 1, "limit": 4},
    {"direction": "newer"}, {"direction": "newer", "anchor": 0, "limit": 25},
    {"direction": "newer", "anchor": 10, "limit": 20}, {"direction": "newer", "anchor": 3, "limit": 2},
)
FIELDS = ("messages", "has_more", "next_anchor", "buckets_scanned", "empty_buckets_scanned", "requests",
          "stopped_on_empty")


def fields(page) -> dict:
    return {f: getattr(page, f) for f in FIELDS}


def reads(store) -> tuple[int, int]:
    counter = store.connection.counter
    return counter.reads("conversation_head"), counter.reads("message_record")


def test_every_shape_reads_the_same_page_as_history(narrow):
    """Each call is made on both stores in the same order, so both readers are cold or warm alike
    (the first latest page of a conversation reads the head first, the next ones one round trip)."""
    sync, asynchronous = narrow
    conversations = shapes(sync)
    compared = 0
    for _round in range(2):
        for name, (tenant, conv) in conversations.items():
            for query in QUERIES:
                before = reads(sync)
                want = sync.history(tenant, conv, **query)
                sync_reads = [b - a for a, b in zip(before, reads(sync))]
                before = reads(asynchronous)
                got = asynchronous.history_async(tenant, conv, **query).result(timeout=30)
                async_reads = [b - a for a, b in zip(before, reads(asynchronous))]
                assert fields(got) == fields(want), (name, query)
                assert async_reads == sync_reads, (name, query)
                compared += 1
    assert compared == 2 * len(conversations) * len(QUERIES)
    assert asynchronous.alerts.empty_bucket_stops == sync.alerts.empty_bucket_stops > 0


def test_a_thousand_pages_in_flight_from_one_thread(narrow):
    sync, asynchronous = narrow
    conversations = [new_conversation(sync, range(1, 1 + size))[:2] for size in (1, 7, 16, 17, 40, 75) * 5]
    # both readers warm (the H each last saw): every latest page starts with one round trip on both
    for tenant, conv in conversations:
        asynchronous.history(tenant, conv)
        sync.history(tenant, conv)
    want = {key: fields(sync.history(*key)) for key in conversations}
    calls = [conversations[i % len(conversations)] for i in range(1000)]
    threads_before = threading.active_count()
    futures = [asynchronous.history_async(tenant, conv) for tenant, conv in calls]
    threads_in_flight = threading.active_count()
    pending = sum(not f.done() for f in futures)
    pages = [f.result(timeout=120) for f in futures]
    threads_after = threading.active_count()
    print(f"threads {threads_before} -> {threads_in_flight} (all submitted, {pending} pending) -> {threads_after}")
    assert max(threads_in_flight, threads_after) - threads_before <= 3, (threads_before, threads_in_flight)
    assert all(fields(page) == want[key] for key, page in zip(calls, pages))
    assert sum(page.requests for page in pages) == sum(want[key]["requests"] for key in calls)


def test_bad_arguments_raise_at_once(narrow):
    _, asynchronous = narrow
    for bad in ({"limit": 0}, {"limit": True}, {"direction": "sideways"}, {"anchor": -1}, {"anchor": 2 ** 63}):
        with pytest.raises(ValidationError):
            asynchronous.history_async(uuid.uuid4(), uuid.uuid4(), **bad)
    with pytest.raises(ValidationError):
        asynchronous.history_async("not a uuid", uuid.uuid4())


def test_the_walks_own_error_reaches_the_future(narrow):
    """S-4: rows seeded with 64-seq buckets, read with 16-seq ones, over-fill a partition: the
    check raises in the driver's callback, and the future holds it."""
    sync, asynchronous = narrow
    wide = load_constants().replace(message_seq_bucket_width=64)
    from lab.store import MessageStore

    seeder = MessageStore.open(sync.connection.config.replace(keyspace=sync.keyspace), connection=sync.connection,
                               constants=wide, state_dir=sync.state_dir)
    try:
        tenant, conv, _ = new_conversation(seeder, range(1, 41))
    finally:
        seeder.close()
    # an older read is bounded by its bucket's seqs (15 rows at most here); a newer one by H: 40 rows
    for query in ({"direction": "newer", "anchor": 0, "limit": 100}, {"direction": "newer", "anchor": 5}):
        with pytest.raises(BucketOverflow) as raised:
            sync.history(tenant, conv, **query)
        with pytest.raises(BucketOverflow) as in_future:
            asynchronous.history_async(tenant, conv, **query).result(timeout=30)
        assert (in_future.value.rows, in_future.value.seq_bucket) == (raised.value.rows, raised.value.seq_bucket)


def test_a_missing_table_is_the_futures_error_of_historys_type(cluster_config, connection, scratch_keyspace,
                                                                tmp_path):
    from lab.store import MessageStore

    with MessageStore.open(cluster_config.replace(keyspace=scratch_keyspace), connection=connection,
                           state_dir=tmp_path) as empty:  # a keyspace without the store's tables
        with pytest.raises(InvalidRequest):
            empty.history(uuid.uuid4(), uuid.uuid4())
        future = empty.history_async(uuid.uuid4(), uuid.uuid4())
        with pytest.raises(InvalidRequest):
            future.result(timeout=30)


def test_a_request_timeout_is_the_futures_error_of_historys_type(cluster_config, narrow, tmp_path):
    """A connection whose requests time out at once (the node never answers within 1 µs): the
    driver's OperationTimedOut is RequestTimeout on both paths."""
    from lab.cluster.connection import connect
    from lab.store import MessageStore

    sync, _ = narrow
    tenant, conv, _ = new_conversation(sync, range(1, 5))
    config = cluster_config.replace(keyspace=sync.keyspace, request_timeout_seconds=1e-6)
    with connect(config) as hasty, MessageStore.open(config, connection=hasty, state_dir=tmp_path,
                                                      constants=sync.constants) as store:
        with pytest.raises(RequestTimeout):
            store.history(tenant, conv)
        with pytest.raises(RequestTimeout):
            store.history_async(tenant, conv).result(timeout=30)
        with pytest.raises(RequestTimeout):
            store.history_async(tenant, conv, anchor=3).result(timeout=30)  # two statements together


def test_a_page_of_several_result_pages_is_historys_page(cluster_config, narrow):
    """A connection whose session fetches 7 rows per result page: history() reads on with the
    ResultSet, history_async from the callback of each page."""
    from lab.cluster.connection import connect
    from lab.store import MessageStore

    sync, _ = narrow
    tenant, conv, _ = new_conversation(sync, range(1, 61))
    config = cluster_config.replace(keyspace=sync.keyspace)
    with connect(config) as paged, MessageStore.open(config, connection=paged, state_dir=sync.state_dir,
                                                      constants=sync.constants) as store:
        paged.session.default_fetch_size = 7
        for query in ({"limit": 40}, {"anchor": 33, "limit": 30}, {"direction": "newer", "anchor": 0, "limit": 50}):
            want = store.history(tenant, conv, **query)
            assert len(want.messages) >= 30
            assert fields(store.history_async(tenant, conv, **query).result(timeout=30)) == fields(want), query


def test_a_hot_window_page_is_historys_page(open_store, store, redis_services, tmp_path_factory):
    """Archiver mode: half the messages archived, half only in the Redis hot window. The hot
    layer's read runs in the reader's pool, never on the driver's loop thread."""
    from store_checks import new_request

    state_dir = tmp_path_factory.mktemp("hot")
    hot = open_store(state_dir=state_dir, archiver_mode=True, services=redis_services.replace(hot_window="redis"))
    tenant, conv = uuid.uuid4(), uuid.uuid4()
    for i in range(12):
        hot.send(new_request(tenant_id=tenant, conversation_id=conv, body=b"m%d" % i))
        if i == 5:
            hot.archive_once()
    hot.drain()
    twin = open_store(state_dir=state_dir, archiver_mode=True, services=redis_services.replace(hot_window="redis"))
    for query in ({}, {"limit": 5}, {"anchor": 8, "limit": 4}, {"direction": "newer", "anchor": 2, "limit": 6}):
        want = hot.history(tenant, conv, **query)
        got = twin.history_async(tenant, conv, **query).result(timeout=30)
        assert fields(got) == fields(want), query
    assert len(hot.history(tenant, conv).messages) == 12
    assert any(t.name.startswith("lab-history-blocking") for t in threading.enumerate())
