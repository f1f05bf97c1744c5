"""The top of the conversation_seq range (design §1's bit-63 rule, S-2).

Sends at 2**63 - 4097 and at 2**63 - 1 are legal (bit 63 clear). History pages (the latest one,
from any store, anchored ones in both directions), batch reads (range and IN forms) and the E
advancer must work there: no bound computed past 2**63 - 1 reaches the driver (it raised an
untyped TypeError), and exhausting the range is a typed error before any write.
"""
from __future__ import annotations

import uuid

import pytest

from lab.errors import Bit63Violation
from lab.store import BatchEntry
from store_checks import new_request

pytestmark = pytest.mark.node

TOP = 2**63 - 1


@pytest.fixture(scope="module")
def at_top(open_store, store):
    """A conversation with messages at TOP - 4097 (the bucket below the top one), TOP - 1 and TOP."""
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    writer = open_store(node_id=71)
    acks = []
    for floor in (TOP - 4097, TOP - 1):
        writer.advance_seq(tenant, conversation, floor)
        acks.append(writer.send(new_request(tenant_id=tenant, conversation_id=conversation, body=b"at %d" % floor)))
    acks.append(writer.send(new_request(tenant_id=tenant, conversation_id=conversation, body=b"top")))
    writer.drain()
    assert [a.conversation_seq for a in acks] == [TOP - 4097, TOP - 1, TOP]
    return writer, tenant, conversation, acks


def _seqs(page):
    return [m.conversation_seq for m in page.messages]


def test_latest_page_at_the_top(open_store, at_top):
    writer, tenant, conversation, acks = at_top
    fresh = open_store(node_id=72)  # a reader that never saw the conversation (head read first)
    for reader in (writer, fresh, writer):  # the writer guesses the top bucket; then from its hint again
        page = reader.history(tenant, conversation)
        assert _seqs(page) == [TOP, TOP - 1, TOP - 4097] and not page.has_more


def test_anchored_pages_at_the_top(at_top):
    writer, tenant, conversation, acks = at_top
    assert _seqs(writer.history(tenant, conversation, anchor=TOP)) == [TOP - 1, TOP - 4097]
    page = writer.history(tenant, conversation, limit=1)
    assert _seqs(page) == [TOP] and page.has_more and page.next_anchor == TOP
    assert _seqs(writer.history(tenant, conversation, direction="newer", anchor=TOP - 4097)) == [TOP - 1, TOP]
    assert _seqs(writer.history(tenant, conversation, direction="newer", anchor=TOP)) == []
    assert _seqs(writer.history(tenant, conversation, direction="newer", anchor=TOP - 1)) == [TOP]


def test_batch_reads_at_the_top(at_top):
    writer, tenant, conversation, acks = at_top
    writer.body_cache.clear()
    entries = [BatchEntry(conversation_id=conversation, conversation_seq=a.conversation_seq, message_id=a.message_id)
               for a in acks]
    result = writer.batch_read(tenant, entries)
    assert sorted(m.conversation_seq for m in result.messages.values()) == [TOP - 4097, TOP - 1, TOP]
    assert not result.missing


def test_sequence_exhaustion_is_typed_and_writes_nothing(at_top):
    writer, tenant, conversation, _ = at_top
    with pytest.raises(Bit63Violation):
        writer.send(new_request(tenant_id=tenant, conversation_id=conversation))


def test_earliest_advancer_at_the_top(open_store, store):
    """Every row gone (none ever written below H here) with H = 2**63 - 1: E cannot become
    H + 1 = 2**63; it stops at the top, typed and correct, and history ends there."""
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    s = open_store(node_id=73)
    s.connection.execute(
        f"UPDATE {s.keyspace}.conversation_head SET latest_conversation_seq = %s, earliest_available_conversation_seq "
        "= %s, updated_at = 0, fencing_epoch = 0, head_version = %s WHERE tenant_id = %s AND conversation_id = %s",
        (TOP, TOP - 5000, TOP, tenant, conversation))
    advance = s.advance_earliest(tenant, conversation)
    assert advance.complete and advance.settled
    assert advance.earliest == TOP
    assert s.head(tenant, conversation).earliest_available_conversation_seq == TOP
    page = s.history(tenant, conversation)
    assert page.messages == () and not page.has_more and not page.stopped_on_empty


def test_hot_window_pages_at_the_top(open_store, store, redis_services):
    """Archiver mode: messages committed but not archived come from the Redis hot window, whose
    scores are doubles (2**63 - 12 .. 2**63 - 1 all round to 2**63): pages must still be exact."""
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    writer = open_store(node_id=74, archiver_mode=True, services=redis_services)
    writer.advance_seq(tenant, conversation, TOP - 11)
    acks = [writer.send(new_request(tenant_id=tenant, conversation_id=conversation, body=b"h%d" % i))
            for i in range(12)]
    writer.drain()
    assert acks[-1].conversation_seq == TOP
    seqs, anchor = [], None
    while True:
        page = writer.history(tenant, conversation, anchor=anchor, limit=5)
        seqs += _seqs(page)
        if not page.has_more:
            break
        anchor = page.next_anchor
    assert seqs == [a.conversation_seq for a in reversed(acks)]
    newer = writer.history(tenant, conversation, direction="newer", anchor=TOP - 11, limit=4)
    assert _seqs(newer) == [TOP - 10, TOP - 9, TOP - 8, TOP - 7]
    entries = [BatchEntry(conversation_id=conversation, conversation_seq=a.conversation_seq, message_id=a.message_id)
               for a in acks]
    assert len(writer.batch_read(tenant, entries).messages) == 12
