"""Grouped batch read (§4.3, §4.4) and S-1, counted by the lab's request accounting AND by
the server's own per-table read counters."""
from __future__ import annotations

import random
import uuid

import pytest

from lab.store import BatchEntry
from lab.constants import load_constants
from lab.errors import ValidationError
from seed import body_of, insert_messages, new_conversation

pytestmark = pytest.mark.node

W = 4096


def entries_of(conversation_id, messages, seqs=None):
    seqs = sorted(messages) if seqs is None else seqs
    return [BatchEntry(conversation_id=conversation_id, conversation_seq=s, message_id=messages[s].message_id)
            for s in seqs]


class Reads:
    """Reads per table between construction and ``done()``: client-side and server-side."""

    TABLES = ("message_record", "message_index", "message_reaction_summary", "message_reaction")

    def __init__(self, store, admin):
        self.store, self.admin = store, admin
        self.counter = store.connection.counter
        self.client = {t: self.counter.reads(t) for t in self.TABLES}
        self.point = self.counter.count("message_record", "point_read")
        self.server = {t: admin.server_counts(store.keyspace, t).reads for t in self.TABLES}

    def done(self):
        self.client = {t: self.counter.reads(t) - v for t, v in self.client.items()}
        self.point = self.counter.count("message_record", "point_read") - self.point
        self.server = {t: self.admin.server_counts(self.store.keyspace, t).reads - v for t, v in self.server.items()}
        return self


def assert_s1(reads, *, record_reads):
    assert reads.client["message_record"] == record_reads
    assert reads.server["message_record"] == record_reads  # the replica saw exactly those reads
    assert reads.point == 0  # never a point read per message_id
    assert reads.client["message_index"] == 0 and reads.server["message_index"] == 0
    assert reads.client["message_reaction"] == 0  # self reactions are not part of a batch


# -- S-1 ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("first_seq, groups", [(1, 1), (W - 100, 2)])
def test_s1_one_group_of_500(store, admin, first_seq, groups):
    """1 big group x 500 backlog messages -> <= 2 reads (2 only when the 500 straddle a bucket edge)."""
    tenant, conv, sent = new_conversation(store, range(first_seq, first_seq + 500), index=True)
    entries = entries_of(conv, sent)
    random.Random(1).shuffle(entries)
    store.body_cache.clear()
    reads = Reads(store, admin)
    result = store.batch_read(tenant, entries)
    reads.done()
    print(f"S-1 1x500 (first seq {first_seq}): client reads {reads.client}, server reads {reads.server}")
    assert_s1(reads, record_reads=groups)
    assert groups <= 2
    assert reads.client["message_reaction_summary"] == reads.server["message_reaction_summary"] == groups
    assert (result.groups, result.requests, result.lru_hits, result.missing) == (groups, 2 * groups, 0, ())
    assert {mid: m.body for mid, m in result.messages.items()} == {m.message_id: body_of(s) for s, m in sent.items()}


def test_s1_twenty_dms_of_5(store, admin):
    """20 DMs x 5 messages -> <= 21 reads (one per conversation partition: 20)."""
    tenant = uuid.uuid4()  # one tenant's mailbox batch over 20 DMs
    dms = []
    for _ in range(20):
        conv = uuid.uuid4()
        dms.append((conv, insert_messages(store, tenant, conv, range(1, 6), index=True)))
    entries = [e for conv, sent in dms for e in entries_of(conv, sent)]
    random.Random(2).shuffle(entries)
    store.body_cache.clear()
    reads = Reads(store, admin)
    result = store.batch_read(tenant, entries)
    reads.done()
    print(f"S-1 20x5: client reads {reads.client}, server reads {reads.server}")
    assert_s1(reads, record_reads=20)
    assert reads.client["message_record"] <= 21
    assert (result.groups, result.requests, len(result.messages), result.decoded) == (20, 40, 100, 100)


def _store_backlog(open_store, tenant, conv, n, *, restart_at=None, retry_every=None, recall_every=None):
    """``n`` messages sent through the store as a client would: every ``retry_every``-th send is
    retried (a replayed ack burns a seq), every ``recall_every``-th message recalls an earlier one
    (its CONTROL event takes a seq), and the writer restarts before message ``restart_at`` (the
    rest of its reservation window is a hole). Returns the batch entries of the n messages."""
    from store_checks import new_request

    writer, acks = open_store(), []
    for i in range(n):
        if i == restart_at:
            writer = open_store()  # a new writer process: a fresh seq window
        req = new_request(tenant_id=tenant, conversation_id=conv, body=b"m%d" % i)
        acks.append(writer.send(req))
        if retry_every and i % retry_every == 0:
            assert writer.send(req).replayed
        if recall_every and i % recall_every == recall_every - 1:
            writer.recall(tenant, conv, acks[i - 1].conversation_seq, actor_id=req.sender_id)
    writer.drain()
    return [BatchEntry(conversation_id=conv, conversation_seq=a.conversation_seq, message_id=a.message_id)
            for a in acks]


def test_s1_one_group_of_500_written_through_the_store(store, open_store, admin):
    """S-1 (a) on a realistic backlog: 500 messages of one group sent through the store with
    retries, recalls and a writer restart, so their seqs have holes and straddle two buckets:
    still <= 2 message_record reads (range vs IN by density)."""
    tenant, conv = uuid.uuid4(), uuid.uuid4()
    entries = _store_backlog(open_store, tenant, conv, 500, restart_at=250, retry_every=20, recall_every=25)
    seqs = sorted(e.conversation_seq for e in entries)
    buckets = {s // W for s in seqs}
    holes = (seqs[-1] - seqs[0] + 1) - len(seqs)
    random.Random(5).shuffle(entries)
    reader = open_store()  # a fresh node: empty body LRU
    reads = Reads(reader, admin)
    result = reader.batch_read(tenant, entries)
    reads.done()
    print(f"S-1 1x500 through the store: seqs {seqs[0]}..{seqs[-1]} over buckets {sorted(buckets)}, "
          f"{holes} missing seqs in the span; message_record reads {reads.client['message_record']}, "
          f"groups {result.groups}")
    assert len(buckets) == 2 and result.groups == 2
    assert len(result.messages) == 500 and result.missing == ()
    assert_s1(reads, record_reads=2)


def test_s1_twenty_dms_of_5_written_through_the_store(store, open_store, admin):
    """S-1 (b) the same way: 20 DMs x 5 with a retry and a recall in each, one DM across a writer
    restart (two partitions): <= 21 reads."""
    tenant = uuid.uuid4()
    entries = []
    for k in range(20):
        entries += _store_backlog(open_store, tenant, uuid.uuid4(), 5, restart_at=3 if k == 0 else None,
                                  retry_every=4, recall_every=5)
    random.Random(6).shuffle(entries)
    reader = open_store()
    reads = Reads(reader, admin)
    result = reader.batch_read(tenant, entries)
    reads.done()
    assert result.groups == 21 and len(result.messages) == 100
    assert_s1(reads, record_reads=21)


# -- grouping ----------------------------------------------------------------------------------

def test_contiguous_group_is_one_range_read(store):
    tenant, conv, sent = new_conversation(store, range(1, 301))  # 300 > the IN limit, but contiguous
    store.body_cache.clear()
    counter = store.connection.counter
    before = (counter.count("message_record", "range_read"), counter.count("message_record", "in_read"))
    result = store.batch_read(tenant, entries_of(conv, sent))
    after = (counter.count("message_record", "range_read"), counter.count("message_record", "in_read"))
    assert (after[0] - before[0], after[1] - before[1]) == (1, 0)
    assert len(result.messages) == 300


def sparse_step(store) -> int:
    """A seq spacing whose density (1 / step) is below the store's range threshold: IN lists."""
    return int(1 / store.constants.batch_read_range_min_density) + 1


def test_a_group_with_holes_is_one_range_read_while_dense(store):
    """Seqs with holes (retries, recalls) but dense in their span: one range read, which returns
    only the rows that exist; the rows it meets that were not asked for are skipped."""
    tenant, conv, sent = new_conversation(store, range(1, 301))
    asked = [s for s in range(1, 301) if s % 10]  # 270 of 300: density 0.9
    store.body_cache.clear()
    counter = store.connection.counter
    before = (counter.count("message_record", "range_read"), counter.count("message_record", "in_read"))
    result = store.batch_read(tenant, entries_of(conv, sent, asked))
    after = (counter.count("message_record", "range_read"), counter.count("message_record", "in_read"))
    assert (after[0] - before[0], after[1] - before[1]) == (1, 0)
    assert sorted(m.conversation_seq for m in result.messages.values()) == asked and result.decoded == 270


@pytest.mark.parametrize("count, expected_in_reads", [(100, 1), (101, 2), (250, 3)])
def test_sparse_group_splits_in_lists_at_the_limit(store, count, expected_in_reads):
    step = sparse_step(store)
    seqs = list(range(1, step * count, step))  # below the density threshold: IN lists
    tenant, conv, sent = new_conversation(store, seqs)
    store.body_cache.clear()
    counter = store.connection.counter
    before = (counter.count("message_record", "in_read"), counter.count("message_record", "range_read"))
    result = store.batch_read(tenant, entries_of(conv, sent))
    after = (counter.count("message_record", "in_read"), counter.count("message_record", "range_read"))
    assert (after[0] - before[0], after[1] - before[1]) == (expected_in_reads, 0)
    assert result.groups == 1 and result.requests == 2 * expected_in_reads
    assert sorted(m.conversation_seq for m in result.messages.values()) == seqs


def test_in_list_limit_comes_from_the_constants(store, open_store):
    small = open_store(constants=load_constants().replace(batch_read_in_list_limit=7))
    tenant, conv, sent = new_conversation(store, range(1, 20 * sparse_step(store), sparse_step(store)))  # 20 sparse
    counter = store.connection.counter
    before = counter.count("message_record", "in_read")
    result = small.batch_read(tenant, entries_of(conv, sent))
    assert counter.count("message_record", "in_read") - before == 3  # 7 + 7 + 6
    assert len(result.messages) == 20


def test_groups_by_conversation_and_bucket(store):
    tenant, conv, sent = new_conversation(store, [1, 2, W - 1, W, W + 1, 3 * W + 7])
    other = uuid.uuid4()
    sent_other = insert_messages(store, tenant, other, [1, 2])
    store.body_cache.clear()
    result = store.batch_read(tenant, entries_of(conv, sent) + entries_of(other, sent_other))
    # (conv, 0): 1, 2, 4095 / (conv, 1): 4096, 4097 / (conv, 3) / (other, 0)
    assert result.groups == 4 and len(result.messages) == 8


# -- LRU, inline, decode once ------------------------------------------------------------------

def test_lru_hits_skip_reads(store, admin):
    tenant, conv, sent = new_conversation(store, range(1, 21))
    store.body_cache.clear()
    first = store.batch_read(tenant, entries_of(conv, sent))
    assert first.lru_hits == 0 and first.requests == 2
    reads = Reads(store, admin)
    again = store.batch_read(tenant, entries_of(conv, sent))
    reads.done()
    assert (again.lru_hits, again.requests, again.groups, again.decoded) == (20, 0, 0, 0)
    assert reads.client["message_record"] == reads.server["message_record"] == 0
    assert again.messages == first.messages
    # half cached: only the other half is read, as one group
    for seq in range(11, 21):
        store.body_cache.discard_at(tenant, conv, seq)
    half = store.batch_read(tenant, entries_of(conv, sent))
    assert (half.lru_hits, half.groups, half.decoded) == (10, 1, 10)
    store.body_cache.clear()
    assert store.batch_read(tenant, entries_of(conv, sent)).lru_hits == 0


def test_lru_is_bounded_and_least_recently_used_goes_first(store, open_store):
    tenant, conv, sent = new_conversation(store, range(1, 6))
    reader = open_store(constants=store.constants.replace(body_lru_entries=3))
    reader.batch_read(tenant, entries_of(conv, sent, [1, 2, 3]))
    reader.batch_read(tenant, entries_of(conv, sent, [1]))  # 1 becomes the most recent
    reader.batch_read(tenant, entries_of(conv, sent, [4]))  # evicts 2
    result = reader.batch_read(tenant, entries_of(conv, sent, [1, 2, 3, 4]))
    assert len(reader.body_cache) == 3
    assert (result.lru_hits, result.decoded) == (3, 1)


def test_inline_entries_are_skipped(store):
    tenant, conv, sent = new_conversation(store, range(1, 6))
    store.body_cache.clear()
    inline = [BatchEntry(conversation_id=conv, conversation_seq=s, message_id=sent[s].message_id,
                         inline_body=b"carried") for s in (1, 2, 3)]
    before = store.connection.counter.reads("message_record")
    only_inline = store.batch_read(tenant, inline)
    assert (only_inline.inline_skipped, only_inline.requests, only_inline.messages) == (3, 0, {})
    assert store.connection.counter.reads("message_record") == before
    mixed = store.batch_read(tenant, inline + entries_of(conv, sent, [4, 5]))
    assert mixed.inline_skipped == 3 and sorted(m.conversation_seq for m in mixed.messages.values()) == [4, 5]


def test_each_message_id_is_decoded_once_per_batch(store, open_store):
    tenant, conv, sent = new_conversation(store, [1, 2, 3, 10, 20])
    reader = open_store(constants=store.constants.replace(body_lru_entries=0))  # no LRU: every batch reads
    entries = entries_of(conv, sent) * 3
    random.Random(3).shuffle(entries)
    result = reader.batch_read(tenant, entries)
    assert sorted(m.conversation_seq for m in result.messages.values()) == [1, 2, 3, 10, 20]
    assert result.decoded == 5
    assert result.groups == 1 and result.requests == 2  # one IN list: duplicates never widen it


def test_summaries_come_with_the_bodies(store):
    tenant, conv, sent = new_conversation(store, range(1, 11))
    store.react(tenant, conv, 2, uuid.uuid4(), "+1")
    store.react(tenant, conv, 2, uuid.uuid4(), "+1")
    store.react(tenant, conv, 7, uuid.uuid4(), "heart")
    store.body_cache.clear()
    before = store.connection.counter.reads("message_reaction_summary")
    result = store.batch_read(tenant, entries_of(conv, sent))
    assert store.connection.counter.reads("message_reaction_summary") - before == 1  # same step, same partition
    assert {sent[s].message_id: dict(c) for s, c in ((2, {"+1": 2}), (7, {"heart": 1}))} == \
        {mid: dict(s.counts) for mid, s in result.summaries.items()}
    assert all(s.summary_version > 0 for s in result.summaries.values())


def test_missing_and_mismatched_ids(store):
    tenant, conv, sent = new_conversation(store, range(1, 4))
    store.body_cache.clear()
    wrong = BatchEntry(conversation_id=conv, conversation_seq=2, message_id=sent[2].message_id + 1)
    absent = BatchEntry(conversation_id=conv, conversation_seq=99, message_id=12345)
    result = store.batch_read(tenant, entries_of(conv, sent, [1]) + [wrong, absent])
    assert set(result.messages) == {sent[1].message_id}
    assert set(result.missing) == {wrong.message_id, absent.message_id}
    with pytest.raises(ValidationError):  # one message_id at two coordinates is a caller bug
        store.batch_read(tenant, entries_of(conv, sent, [1]) + [BatchEntry(
            conversation_id=conv, conversation_seq=3, message_id=sent[1].message_id)])
    with pytest.raises(ValidationError):
        store.batch_read(tenant, [BatchEntry(conversation_id="not-a-uuid", conversation_seq=1, message_id=1)])


def test_crypto_erased_conversation_reads_as_missing(store):
    tenant, conv, sent = new_conversation(store, [1, 2])
    other = uuid.uuid4()
    kept = insert_messages(store, tenant, other, [1])
    store.erase_conversation(tenant, conv)  # destroys the DEK and drops the LRU bodies
    result = store.batch_read(tenant, entries_of(conv, sent) + entries_of(other, kept))
    assert set(result.messages) == {kept[1].message_id}  # one erased conversation does not fail the batch
    assert set(result.missing) == {sent[1].message_id, sent[2].message_id}
