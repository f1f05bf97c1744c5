"""History paging (§4.1), the empty-bucket stop (S-3), the per-partition bound (S-4) and
tombstone-free partitions (S-6), against the real node."""
from __future__ import annotations

import uuid

import pytest

from lab.constants import load_constants
from lab.errors import BucketOverflow, ValidationError
from lab.cluster.tracing import traced
from seed import body_of, new_conversation, set_head

pytestmark = pytest.mark.node

W = 4096  # the design's width; the default store uses it
NARROW_W = 16  # a width that makes multi-bucket paging cheap to set up


@pytest.fixture(scope="module")
def narrow_store(cluster_config, connection, tmp_path_factory):
    """A store of its own keyspace created with 16-seq buckets."""
    from lab.store import MessageStore

    name = f"n_{uuid.uuid4().hex[:10]}"
    store = MessageStore.open(cluster_config.replace(keyspace=name), connection=connection,
                              constants=load_constants().replace(message_seq_bucket_width=NARROW_W),
                              state_dir=tmp_path_factory.mktemp("narrow"))
    store.create_schema()
    yield store
    store.close()
    connection.execute(f"DROP KEYSPACE IF EXISTS {name}")


def seqs_of(page) -> list[int]:
    return [m.conversation_seq for m in page.messages]


def record_reads(store) -> int:
    return store.connection.counter.reads("message_record")


def walk(store, tenant, conv, *, direction, anchor, limit):
    pages = []
    while True:
        page = store.history(tenant, conv, direction=direction, anchor=anchor, limit=limit)
        pages.append(page)
        if not page.has_more:
            return pages
        anchor = page.next_anchor


# -- paging ------------------------------------------------------------------------------------

def test_latest_page_includes_head_and_decodes(store):
    tenant, conv, sent = new_conversation(store, range(1, 11))
    before = record_reads(store)
    page = store.history(tenant, conv)
    assert seqs_of(page) == list(range(10, 0, -1))
    assert [m.body for m in page.messages] == [body_of(s) for s in range(10, 0, -1)]
    assert page.messages[0].message_id == sent[10].message_id
    assert (page.has_more, page.next_anchor, page.stopped_on_empty) == (False, None, False)
    # one bucket holds all ten and it reaches E: one partition read plus the head read
    assert (page.buckets_scanned, page.empty_buckets_scanned, page.requests) == (1, 0, 2)
    assert record_reads(store) - before == 1


def test_limit_and_older_anchors(store):
    tenant, conv, _ = new_conversation(store, range(1, 11))
    first = store.history(tenant, conv, limit=4)
    assert seqs_of(first) == [10, 9, 8, 7] and first.has_more and first.next_anchor == 7
    second = store.history(tenant, conv, anchor=first.next_anchor, limit=4)
    assert seqs_of(second) == [6, 5, 4, 3] and second.has_more
    last = store.history(tenant, conv, anchor=second.next_anchor, limit=4)
    assert seqs_of(last) == [2, 1] and not last.has_more and last.next_anchor is None
    assert store.history(tenant, conv, anchor=1).messages == ()


def test_older_paging_across_buckets(narrow_store):
    tenant, conv, _ = new_conversation(narrow_store, range(1, 61))
    first = narrow_store.history(tenant, conv, limit=20)
    # bucket 3 holds 48..60 (13 rows), bucket 2 gives the remaining 7 with LIMIT 7
    assert seqs_of(first) == list(range(60, 40, -1))
    assert (first.buckets_scanned, first.has_more, first.next_anchor) == (2, True, 41)
    pages = walk(narrow_store, tenant, conv, direction="older", anchor=None, limit=20)
    assert [s for p in pages for s in seqs_of(p)] == list(range(60, 0, -1))
    assert [p.has_more for p in pages] == [True, True, False]


def test_newer_paging_ascending_to_head(narrow_store):
    tenant, conv, _ = new_conversation(narrow_store, range(1, 61))
    page = narrow_store.history(tenant, conv, direction="newer", anchor=10, limit=20)
    assert seqs_of(page) == list(range(11, 31))
    # bucket 0 (11..15), bucket 1 (16..31, LIMIT 15)
    assert (page.buckets_scanned, page.has_more, page.next_anchor) == (2, True, 30)
    pages = walk(narrow_store, tenant, conv, direction="newer", anchor=0, limit=25)
    assert [s for p in pages for s in seqs_of(p)] == list(range(1, 61))
    assert not pages[-1].has_more
    # nothing is newer than the head: the latest anchor of the newer direction is H itself
    assert narrow_store.history(tenant, conv, direction="newer").messages == ()


def test_bounds_at_earliest_available_and_head(narrow_store):
    tenant, conv, _ = new_conversation(narrow_store, range(1, 63), latest=60, earliest=20)
    # 61, 62 exist but the (asynchronous) head has not reached them: the latest page starts at H
    latest = narrow_store.history(tenant, conv, limit=100)
    assert seqs_of(latest) == list(range(60, 19, -1)) and not latest.has_more
    # E=20 sits in bucket 1: the walk stops there (has_more=false) and never returns 1..19
    assert latest.buckets_scanned == 3  # buckets 3, 2, 1
    older = narrow_store.history(tenant, conv, anchor=30, limit=100)
    assert seqs_of(older) == list(range(29, 19, -1))
    assert (older.buckets_scanned, older.has_more) == (1, False)
    newer = narrow_store.history(tenant, conv, direction="newer", anchor=5, limit=100)
    assert seqs_of(newer) == list(range(20, 61))  # clamped to E, stops at H
    assert narrow_store.history(tenant, conv, anchor=20).messages == ()


# -- one round trip: the head read and the page's first bucket read together ---------

def test_a_warm_latest_page_is_one_round_trip_and_counts_every_read(narrow_store):
    """Once the store saw a conversation's H, its latest page reads the head and H's bucket at
    once. Rows above a lagging H that took places in the LIMIT cost one more read of the same
    bucket; H moved to another bucket spends the guessed read (a request and a bucket scanned,
    never an empty one) and the walk reads H's bucket."""
    from seed import insert_messages

    tenant, conv, _ = new_conversation(narrow_store, range(1, 31), latest=25)  # 26..30 above the head
    cold = narrow_store.history(tenant, conv, limit=5)
    assert seqs_of(cold) == [25, 24, 23, 22, 21]
    assert (cold.requests, cold.buckets_scanned) == (2, 1)  # head, then bucket 1 (16..31)
    before = record_reads(narrow_store)
    warm = narrow_store.history(tenant, conv, limit=5)  # guessed bucket 1: 30..26 fill the LIMIT, then 25..21
    assert seqs_of(warm) == [25, 24, 23, 22, 21] and warm.has_more and warm.next_anchor == 21
    assert (warm.requests, warm.buckets_scanned, warm.empty_buckets_scanned) == (3, 2, 0)
    assert record_reads(narrow_store) - before == 2
    insert_messages(narrow_store, tenant, conv, range(31, 41))
    set_head(narrow_store, tenant, conv, latest=40)  # H moved to bucket 2 (32..47)
    before = record_reads(narrow_store)
    moved = narrow_store.history(tenant, conv, limit=5)
    assert seqs_of(moved) == [40, 39, 38, 37, 36]
    assert (moved.requests, moved.buckets_scanned, moved.empty_buckets_scanned) == (3, 2, 0)
    assert record_reads(narrow_store) - before == 2
    again = narrow_store.history(tenant, conv, limit=20)  # the guess is bucket 2 now: one round trip
    assert seqs_of(again) == list(range(40, 20, -1))
    assert (again.requests, again.buckets_scanned) == (3, 2)  # head + bucket 2 (together) + bucket 1


def test_anchored_older_pages_read_their_bucket_with_the_head(narrow_store):
    tenant, conv, _ = new_conversation(narrow_store, range(1, 61), latest=60, earliest=5)
    page = narrow_store.history(tenant, conv, anchor=40, limit=5)
    assert seqs_of(page) == [39, 38, 37, 36, 35] and (page.requests, page.buckets_scanned) == (2, 1)
    edge = narrow_store.history(tenant, conv, anchor=10, limit=50)  # bucket 0 read whole, clamped to E=5
    assert seqs_of(edge) == [9, 8, 7, 6, 5] and not edge.has_more and edge.requests == 2
    above = narrow_store.history(tenant, conv, anchor=100, limit=3)  # clamped to H + 1: another bucket
    assert seqs_of(above) == [60, 59, 58] and (above.requests, above.buckets_scanned) == (3, 2)
    assert narrow_store.history(tenant, conv, anchor=5).messages == ()  # at E: nothing older


def test_the_head_a_store_wrote_places_its_first_latest_page(open_store):
    from store_checks import new_request

    s = open_store()
    tenant, conv = uuid.uuid4(), uuid.uuid4()
    acks = [s.send(new_request(tenant_id=tenant, conversation_id=conv)) for _ in range(3)]
    s.drain()
    before = record_reads(s)
    page = s.history(tenant, conv)
    assert seqs_of(page) == [a.conversation_seq for a in reversed(acks)]
    assert (page.requests, page.buckets_scanned) == (2, 1) and record_reads(s) - before == 1


def test_no_head_and_bad_input(store):
    page = store.history(uuid.uuid4(), uuid.uuid4())
    assert page.messages == () and not page.has_more and page.buckets_scanned == 0
    for bad in ({"limit": 0}, {"limit": True}, {"direction": "sideways"}, {"anchor": -1}):
        with pytest.raises(ValidationError):
            store.history(uuid.uuid4(), uuid.uuid4(), **bad)


# -- S-3: holes ------------------------------------------------------------------------------

def test_s3_jump_from_1_to_100000_stops_after_the_empty_limit(store):
    tenant, conv, _ = new_conversation(store, [1, 100_000])
    limit_buckets = store.constants.history_max_empty_bucket_scan
    alerts_before = store.alerts.empty_bucket_stops
    reads_before = record_reads(store)
    page = store.history(tenant, conv, limit=50)
    assert seqs_of(page) == [100_000]
    assert (page.has_more, page.stopped_on_empty, page.next_anchor) == (False, True, None)
    # S-3: at most history_max_empty_bucket_scan (8) empty buckets: buckets 24 (1 row), 23..16 (empty)
    assert page.empty_buckets_scanned == limit_buckets == 8
    assert page.buckets_scanned == 1 + limit_buckets == 9
    assert page.requests == 10
    assert record_reads(store) - reads_before == 9  # no unbounded scan of the 23 empty buckets
    assert store.alerts.empty_bucket_stops == alerts_before + 1
    # paging on from the stop point is the client's call; the next page stops the same way
    again = store.history(tenant, conv, anchor=100_000, limit=50)
    assert again.messages == () and again.stopped_on_empty and again.empty_buckets_scanned == 8
    assert store.alerts.empty_bucket_stops == alerts_before + 2


@pytest.mark.parametrize("empty_between, crossed", [(7, True), (8, False)])
def test_s3_a_hole_shorter_than_the_limit_is_crossed(store, empty_between, crossed):
    """A page may scan 8 empty buckets, so it crosses a hole of 7 and reads the bucket behind it;
    a hole of 8 uses the whole allowance and the page stops without a 9th (possibly empty) read."""
    top = (empty_between + 1) * W + 5  # rows in bucket 0 and bucket empty_between+1
    tenant, conv, _ = new_conversation(store, [1, top])
    page = store.history(tenant, conv, limit=10)
    assert seqs_of(page) == ([top, 1] if crossed else [top])
    assert page.stopped_on_empty is (not crossed)
    assert page.empty_buckets_scanned == empty_between <= store.constants.history_max_empty_bucket_scan


def test_s3_newer_direction_stops_too(store):
    tenant, conv, _ = new_conversation(store, [1, 100_000])
    alerts_before = store.alerts.empty_bucket_stops
    page = store.history(tenant, conv, direction="newer", anchor=1, limit=50)
    assert page.messages == () and page.stopped_on_empty and not page.has_more
    assert (page.buckets_scanned, page.empty_buckets_scanned) == (8, 8)  # buckets 0..7, all empty
    assert store.alerts.empty_bucket_stops == alerts_before + 1


# -- S-4: one partition never holds more than W rows -----------------------------------------

def test_s4_bucket_overflow(store, open_store):
    tenant, conv, _ = new_conversation(store, range(1, 41))  # 40 rows in bucket 0 at W=4096
    assert [m.conversation_seq for m in store.read_bucket(tenant, conv, 0)] == list(range(40, 0, -1))
    # The same rows read by a store whose width was changed to 16 (the bug §4.2 guards against)
    narrow = open_store(constants=load_constants().replace(message_seq_bucket_width=NARROW_W))
    with pytest.raises(BucketOverflow) as info:
        narrow.read_bucket(tenant, conv, 0)
    assert (info.value.rows, info.value.width, info.value.seq_bucket) == (NARROW_W + 1, NARROW_W, 0)
    assert info.value.table == "message_record"
    with pytest.raises(BucketOverflow) as info:
        narrow.history(tenant, conv, direction="newer", anchor=0, limit=100)
    assert info.value.rows == 40


# -- S-6: no tombstones in message_record -----------------------------------------------------

def test_s6_sampled_partitions_scan_no_tombstones(store, admin):
    tenant, conv, _ = new_conversation(store, list(range(1, 31)) + list(range(W, W + 30)))
    sender = uuid.uuid4()
    for seq in (3, 5, W + 2):
        store.react(tenant, conv, seq, sender, "+1")
        store.react(tenant, conv, seq, uuid.uuid4(), "heart")
        store.unreact(tenant, conv, seq, sender)
    assert len(store.history(tenant, conv, limit=100).messages) == 60
    admin.flush(store.keyspace)
    for bucket in (0, 1):
        rows, trace = traced(store.connection, *store.bucket_read_statement(tenant, conv, bucket))
        assert len(rows) >= 30
        assert trace.rows_read == len(rows), trace.events
        assert trace.tombstones_read == 0, trace.events


def test_s6_after_send_recall_edit_and_reactions(store, admin):
    """S-6 on rows the write path made: sent, recalled, edited, reacted to, flushed."""
    from lab.store import SendRequest

    tenant, conv, sender = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    acks = [store.send(SendRequest(tenant_id=tenant, conversation_id=conv, sender_id=sender, sender_device_id=sender,
                                   client_message_id=f"s6-{i}", body=f"hello {i}".encode()))
            for i in range(20)]
    store.recall(tenant, conv, acks[3].conversation_seq, actor_id=sender)
    store.edit(tenant, conv, acks[5].conversation_seq, body=b"edited", actor_id=sender)
    store.react(tenant, conv, acks[7].conversation_seq, sender, "+1")
    store.unreact(tenant, conv, acks[7].conversation_seq, sender)
    store.drain()
    page = store.history(tenant, conv, limit=100)
    by_seq = {m.conversation_seq: m for m in page.messages}
    assert {a.conversation_seq for a in acks} <= set(by_seq)
    assert by_seq[acks[3].conversation_seq].recalled and by_seq[acks[5].conversation_seq].body == b"edited"
    admin.flush(store.keyspace)
    for bucket in sorted({seq // W for seq in by_seq}):
        rows, trace = traced(store.connection, *store.bucket_read_statement(tenant, conv, bucket))
        assert trace.rows_read == len(rows) > 0, trace.events
        assert trace.tombstones_read == 0, trace.events


# -- E: the earliest_available advancer (§9) ---------------------------------------------------

def test_older_paging_ends_at_the_retention_edge_once_e_is_advanced(store, open_store):
    """Ten old messages (ephemeral, TTL 2 s here), one per bucket 0..9 (the
    store's seq floor leaves the holes), then five recent ones in bucket 10. Once the old ones
    expired, an older page with E = 1 walks into the expired buckets and ends on the empty-bucket
    stop with an alert; the advancer moves E to the first available row, and the same page ends
    there: has_more=false, one partition read, no alert."""
    from lab.store import RetentionClass, RetentionPolicy
    from store_checks import new_request

    # the settle window (client_dedup_ttl_seconds) shortened to 1 s so that rows 3 s old count as settled
    s = open_store(constants=load_constants().replace(client_dedup_ttl_seconds=1),
                   retention=RetentionPolicy(ephemeral_ttl_seconds=2))
    tenant, conv = uuid.uuid4(), uuid.uuid4()
    for bucket in range(10):
        s.advance_seq(tenant, conv, bucket * W + 1)
        s.send(new_request(tenant_id=tenant, conversation_id=conv, retention_class=RetentionClass.EPHEMERAL_24H))
    s.advance_seq(tenant, conv, 10 * W + 1)
    recent = [s.send(new_request(tenant_id=tenant, conversation_id=conv)).conversation_seq for _ in range(5)]
    s.drain()
    import time
    time.sleep(3)  # the ephemeral rows expire; the recent ones are 3 s old, older than the 1 s settle window
    assert s.head(tenant, conv).earliest_available_conversation_seq == 1
    alerts = s.alerts.empty_bucket_stops
    before = s.history(tenant, conv, limit=50)
    print(f"E=1: buckets {before.buckets_scanned}, empty {before.empty_buckets_scanned}, "
          f"stopped_on_empty {before.stopped_on_empty}, alerts +{s.alerts.empty_bucket_stops - alerts}")
    assert seqs_of(before) == recent[::-1] and before.stopped_on_empty

    # a store with the default 2 h settle window does not move E past rows this young
    young = open_store().advance_earliest(tenant, conv)
    assert (young.settled, young.advanced, young.earliest) == (False, False, 1)

    advance = s.advance_earliest(tenant, conv)
    assert (advance.previous, advance.earliest, advance.settled, advance.complete) == (1, recent[0], True, True)
    assert advance.buckets_scanned == 11  # buckets 0..9 expired, bucket 10 holds the first row
    assert s.head(tenant, conv).earliest_available_conversation_seq == recent[0]
    alerts = s.alerts.empty_bucket_stops
    after = s.history(tenant, conv, limit=50)
    print(f"E={recent[0]}: buckets {after.buckets_scanned}, empty {after.empty_buckets_scanned}, "
          f"stopped_on_empty {after.stopped_on_empty}, alerts +{s.alerts.empty_bucket_stops - alerts}")
    assert seqs_of(after) == recent[::-1]
    assert (after.has_more, after.stopped_on_empty, after.buckets_scanned, after.empty_buckets_scanned) == \
        (False, False, 1, 0)
    assert s.alerts.empty_bucket_stops == alerts
    again = s.advance_earliest(tenant, conv)  # E only moves forward; nothing more to do
    assert (again.advanced, again.earliest, again.buckets_scanned) == (False, recent[0], 1)


def test_the_advancer_over_every_head_and_its_bounds(store, open_store):
    """advance_earliest_all walks conversation_head; E moves to H + 1 when nothing is left, and a
    walk capped by max_buckets that found nothing leaves E alone (S-2-sized jumps stay cheap)."""
    s = open_store(constants=load_constants().replace(client_dedup_ttl_seconds=1))
    tenant, gone, jumped = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    set_head(s, tenant, gone, latest=3 * W)       # no row at all up to H (all expired): E -> H + 1
    set_head(s, tenant, jumped, latest=1 << 62)   # 2**50 buckets: capped, E stays
    summary = s.advance_earliest_all()
    assert summary.conversations >= 2 and summary.advanced >= 1
    assert s.head(tenant, gone).earliest_available_conversation_seq == 3 * W + 1
    assert s.head(tenant, jumped).earliest_available_conversation_seq == 1
    capped = s.advance_earliest(tenant, jumped)
    assert (capped.complete, capped.advanced, capped.buckets_scanned) == (False, False, 1024)
    assert s.history(tenant, gone).messages == () and s.advance_earliest(uuid.uuid4(), uuid.uuid4()) is None
