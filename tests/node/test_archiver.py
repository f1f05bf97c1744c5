"""Archiver mode (design §2.1 implementation note): the commit path skips message_record and
the HistoryArchiver writes it (and message_index) from the outbox, idempotently, with the
remaining TTL."""
from __future__ import annotations

import time
import uuid

import pytest

from lab.errors import CrashInjected
from lab.store import (ARCHIVER_GROUP, DedupState, FaultPlan, HeadUpdate, MESSAGE_RECORD_COLUMNS, MessageState,
                       RetentionClass, RetentionPolicy, u128_to_blob)
from store_checks import dedup_row, index_rows, new_request, outbox_messages, record_row, record_rows

pytestmark = pytest.mark.node

DAY_SECONDS = 86_400
ALL = ", ".join(MESSAGE_RECORD_COLUMNS)  # CQL has no "*, TTL(x)"


def _full_rows(store, tenant, conversation, seqs):
    """Rows plus the write time of the payload: what "the same rows" means."""
    rows = [tuple(r) for r in record_rows(store, tenant, conversation, seqs)]
    times = [tuple(r) for r in store.connection.execute(
        f"SELECT conversation_seq, WRITETIME(payload_or_ciphertext) AS wt FROM {store.keyspace}.message_record "
        "WHERE tenant_id = %s AND conversation_id = %s AND seq_bucket = 0", (tenant, conversation))]
    return rows, times


def test_commit_skips_record_and_archiver_writes_it(open_store, store, tmp_path):
    s = open_store(archiver_mode=True, state_dir=tmp_path)
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    reqs = [new_request(tenant_id=tenant, conversation_id=conversation, body=b"m%d" % i,
                        retention_class=RetentionClass.EPHEMERAL_24H) for i in range(3)]
    sent_at_ms = time.time_ns() // 1_000_000
    acks = [s.send(r) for r in reqs]
    seqs = [a.conversation_seq for a in acks]
    # committed and acked, but not in message_record or message_index yet
    assert all(dedup_row(store, r).state == DedupState.COMMITTED for r in reqs)
    assert len(outbox_messages(s, tenant, conversation)) == 3
    assert record_rows(store, tenant, conversation, seqs) == []
    assert index_rows(store, tenant, u128_to_blob(acks[0].message_id)) == []
    assert s.archive_lag() == 3

    time.sleep(1.1)  # so that "remaining" differs visibly from the full period
    assert s.archive_once() == 3
    assert s.archive_lag() == 0
    for req, ack in zip(reqs, acks):
        row = record_row(store, tenant, conversation, ack.conversation_seq,
                         ALL + ", TTL(payload_or_ciphertext) AS ttl_payload")
        msg = s.decode_record(row)
        assert (msg.message_id, msg.body) == (ack.message_id, req.body)
        elapsed = time.time_ns() // 1_000_000 - sent_at_ms
        # remaining TTL: created_at + 24 h - now, not a fresh 24 h
        assert DAY_SECONDS - elapsed / 1000 - 2 <= row.ttl_payload <= DAY_SECONDS - 1
        assert len(index_rows(store, tenant, u128_to_blob(ack.message_id))) == 1
    # the archive's write time is the message's creation time
    wt = store.connection.execute(
        f"SELECT WRITETIME(payload_or_ciphertext) AS wt FROM {store.keyspace}.message_record WHERE tenant_id = %s "
        "AND conversation_id = %s AND seq_bucket = 0 AND conversation_seq = %s", (tenant, conversation, seqs[0])).one().wt
    assert wt == acks[0].created_at_ms * 1000
    # running it again finds nothing new
    assert s.archive_once() == 0


def test_archiver_rerun_after_crash_writes_the_same_rows(open_store, store, tmp_path):
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    plan = FaultPlan().arm("archiver_after_write")
    s = open_store(archiver_mode=True, state_dir=tmp_path, faults=plan)
    acks = [s.send(new_request(tenant_id=tenant, conversation_id=conversation)) for _ in range(4)]
    seqs = [a.conversation_seq for a in acks]
    with pytest.raises(CrashInjected):
        s.archive_once()
    first = _full_rows(store, tenant, conversation, seqs)
    assert len(first[0]) == 4
    assert s.log.committed(ARCHIVER_GROUP) == 0  # died before committing its offset
    restarted = open_store(archiver_mode=True, state_dir=tmp_path)
    assert restarted.archive_once() == 4  # at-least-once: the batch is written again
    assert _full_rows(store, tenant, conversation, seqs) == first
    # a second consumer group replaying the whole log also leaves the rows as they are
    assert restarted.archive_once(group="replay") == 4
    assert _full_rows(store, tenant, conversation, seqs) == first


def test_expired_messages_are_skipped_and_counted(open_store, store, tmp_path):
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    s = open_store(archiver_mode=True, state_dir=tmp_path,
                   retention=RetentionPolicy(tenant_default_ttl_seconds={tenant: 1}))
    short = s.send(new_request(tenant_id=tenant, conversation_id=conversation))
    held = s.send(new_request(tenant_id=tenant, conversation_id=conversation,
                              retention_class=RetentionClass.COMPLIANCE_HOLD))
    time.sleep(1.2)
    assert s.archive_once() == 1
    assert s.alerts.archiver_expired_skipped == 1
    assert [r.conversation_seq for r in record_rows(store, tenant, conversation, [short.conversation_seq])] == \
           [held.conversation_seq]
    assert record_row(store, tenant, conversation, held.conversation_seq, "TTL(created_at) AS ttl").ttl is None


def test_recall_before_archive_survives_the_late_archive(open_store, store, tmp_path):
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    s = open_store(archiver_mode=True, state_dir=tmp_path)
    req = new_request(tenant_id=tenant, conversation_id=conversation, retention_class=RetentionClass.EPHEMERAL_24H)
    ack = s.send(req)
    recall = s.recall(tenant, conversation, ack.conversation_seq, actor_id=req.sender_id)
    assert s.archive_once() == 1
    row = record_row(store, tenant, conversation, ack.conversation_seq,
                     ALL + ", TTL(state) AS ttl_state, TTL(payload_or_ciphertext) AS ttl_payload")
    msg = s.decode_record(row)
    assert msg.state is MessageState.RECALLED
    assert msg.recall_event_conversation_seq == recall.recall_event_conversation_seq
    assert msg.body == req.body and msg.message_id == ack.message_id
    assert abs(row.ttl_state - row.ttl_payload) <= 2 and row.ttl_state <= DAY_SECONDS


def test_archived_rows_carry_no_tombstones(open_store, store, tmp_path):
    """S-6 for the archiver's writes: optional columns left empty must not become tombstone
    cells (a bound null would), so reading the partition scans none."""
    from lab.cluster.tracing import traced

    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    s = open_store(archiver_mode=True, state_dir=tmp_path)
    for _ in range(5):
        s.send(new_request(tenant_id=tenant, conversation_id=conversation))
    assert s.archive_once() == 5
    rows, trace = traced(store.connection, f"SELECT * FROM {store.keyspace}.message_record WHERE tenant_id = %s "
                         "AND conversation_id = %s AND seq_bucket = 0", (tenant, conversation))
    assert len(rows) == trace.rows_read == 5
    assert trace.tombstones_read == 0, trace.events


def _partial_rows(store, tenant, conversation) -> list:
    """message_record rows of bucket 0 without a message_id: cells of a row nobody wrote whole."""
    return [r for r in store.connection.execute(
        f"SELECT conversation_seq, message_id FROM {store.keyspace}.message_record WHERE tenant_id = %s "
        "AND conversation_id = %s AND seq_bucket = 0", (tenant, conversation)) if r.message_id is None]


def test_recall_and_edit_before_archive_leave_no_partial_row(open_store, store, tmp_path):
    """Recall / edit of a committed, not yet archived message. Neither may leave
    a row without message_id; history and batch reads of the conversation work before and after
    the archiver runs; the archiver's late whole-row INSERT does not undo what came first."""
    from lab.store import BatchEntry

    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    s = open_store(archiver_mode=True, state_dir=tmp_path)
    reqs = [new_request(tenant_id=tenant, conversation_id=conversation, body=b"m%d" % i) for i in range(3)]
    acks = [s.send(r) for r in reqs]
    s.drain()
    recalled = s.recall(tenant, conversation, acks[1].conversation_seq, actor_id=reqs[1].sender_id)
    s.edit(tenant, conversation, acks[2].conversation_seq, body=b"edited", actor_id=reqs[2].sender_id)
    partial = _partial_rows(store, tenant, conversation)
    print(f"before archive: {len(partial)} rows without message_id")
    assert partial == []
    entries = [BatchEntry(conversation_id=conversation, conversation_seq=a.conversation_seq, message_id=a.message_id)
               for a in acks]

    def check(page_seqs: list[int]) -> None:
        page = s.history(tenant, conversation, limit=10)
        assert [m.conversation_seq for m in page.messages] == page_seqs
        by_seq = {m.conversation_seq: m for m in page.messages}
        assert by_seq[acks[1].conversation_seq].state is MessageState.RECALLED
        assert by_seq[acks[1].conversation_seq].recall_event_conversation_seq == recalled.recall_event_conversation_seq
        assert by_seq[acks[2].conversation_seq].body == b"edited"
        s.body_cache.clear()
        batch = s.batch_read(tenant, entries)
        assert {m.conversation_seq for m in batch.messages.values()} == set(page_seqs)

    # not archived yet: the changed messages are whole rows, the untouched one waits for the archiver
    check([acks[2].conversation_seq, acks[1].conversation_seq])
    assert s.archive_once() == 3
    assert _partial_rows(store, tenant, conversation) == []
    check([a.conversation_seq for a in reversed(acks)])
    rows = {r.conversation_seq: r for r in record_rows(store, tenant, conversation, [a.conversation_seq for a in acks])}
    for req, ack in zip(reqs, acks):  # every column of a whole row, whichever write came first
        msg = s.decode_record(rows[ack.conversation_seq])
        assert (msg.message_id, msg.client_message_id, msg.sender_id) == (ack.message_id, req.client_message_id,
                                                                           req.sender_id)
    assert s.decode_record(rows[acks[0].conversation_seq]).body == b"m0"


def test_reads_skip_a_partial_row_and_count_it(open_store, store, tmp_path):
    """A row holding only a few cells (an UPDATE of a row that was never written whole, or whose
    other cells expired a moment earlier) is not a message: history and batch reads skip it,
    count it (``partial_rows_skipped``) and return the rest of the conversation."""
    from lab.store import BatchEntry

    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    s = open_store(state_dir=tmp_path)
    acks = [s.send(new_request(tenant_id=tenant, conversation_id=conversation)) for _ in range(3)]
    s.drain()
    husk = acks[-1].conversation_seq + 1
    s.connection.execute(s.prepare_raw("UPDATE {ks}.message_record SET state = 1, recall_event_conversation_seq = 99 "
                                       "WHERE tenant_id = ? AND conversation_id = ? AND seq_bucket = 0 "
                                       "AND conversation_seq = ?"), (tenant, conversation, husk))
    s.apply_head(HeadUpdate(tenant_id=tenant, conversation_id=conversation, conversation_seq=husk, message_id=1,
                            last_activity_id=1, sender_id=uuid.uuid4()))
    before = s.alerts.partial_rows_skipped
    page = s.history(tenant, conversation)
    assert [m.conversation_seq for m in page.messages] == [a.conversation_seq for a in reversed(acks)]
    # a page whose LIMIT the husk took a slot of: the bucket is read on, the page is still full
    short = s.history(tenant, conversation, limit=2)
    assert [m.conversation_seq for m in short.messages] == [acks[2].conversation_seq, acks[1].conversation_seq]
    assert short.has_more and short.buckets_scanned == 2 and short.empty_buckets_scanned == 0
    s.body_cache.clear()
    batch = s.batch_read(tenant, [BatchEntry(conversation_id=conversation, conversation_seq=seq, message_id=mid)
                                  for seq, mid in [(a.conversation_seq, a.message_id) for a in acks] + [(husk, 7)]])
    assert len(batch.messages) == 3 and batch.missing == (7,)
    assert s.alerts.partial_rows_skipped == before + 3
