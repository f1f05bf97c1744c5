"""merge_rows (lab.store.hot): one bucket's rows from message_record and a hot layer."""
from __future__ import annotations

import uuid

from lab.store.hot import merge_rows
from lab.store import Message, MessageType

T, C = uuid.uuid4(), uuid.uuid4()


def m(seq: int, body: bytes = b"") -> Message:
    return Message(tenant_id=T, conversation_id=C, seq_bucket=0, conversation_seq=seq, message_id=seq,
                   last_activity_id=seq, sender_id=T, sender_device_id=T, client_message_id=f"c{seq}",
                   message_type=MessageType.TEXT, body=body)


def test_union_in_scan_order_cut_at_the_limit():
    merged = merge_rows([m(9), m(5)], [m(7), m(3)], descending=True, limit=3)
    assert [x.conversation_seq for x in merged] == [9, 7, 5]
    merged = merge_rows([m(9), m(5)], [m(7), m(3)], descending=False, limit=10)
    assert [x.conversation_seq for x in merged] == [3, 5, 7, 9]


def test_message_record_wins_on_the_same_seq():
    merged = merge_rows([m(4, b"recalled in message_record")], [m(4, b"hot copy")], descending=True, limit=5)
    assert [x.body for x in merged] == [b"recalled in message_record"]
