"""Archiver-mode reads merge message_record with the hot window (lab.store.hot_window.merge_rows):
each seq once, the copy carrying the later change wins."""
from __future__ import annotations

import uuid

from lab.store.hot_window import _member, _parse, merge_rows
from lab.store.ids import u128_to_blob
from lab.store.model import MessageState, MessageType
from lab.store.records import Message

T, C = uuid.uuid4(), uuid.uuid4()


def msg(seq, *, state=MessageState.NORMAL, edited=None, body=b"x"):
    return Message(tenant_id=T, conversation_id=C, seq_bucket=0, conversation_seq=seq, message_id=seq,
                   last_activity_id=seq, sender_id=T, sender_device_id=T, client_message_id=f"c{seq}", body=body, message_type=MessageType.TEXT,
                   state=state, edited_at_activity_id=edited, created_at_ms=1)


def test_each_seq_once_in_order_with_limit():
    merged = merge_rows([msg(1), msg(3)], [msg(2), msg(3), msg(4)], newest_first=True, limit=3)
    assert [m.conversation_seq for m in merged] == [4, 3, 2]
    assert [m.conversation_seq for m in merge_rows([msg(5)], [msg(1)], newest_first=False)] == [1, 5]


def test_later_change_wins_whichever_side_has_it():
    recalled = msg(1, state=MessageState.RECALLED)
    assert merge_rows([msg(1)], [recalled], newest_first=True)[0].state is MessageState.RECALLED
    assert merge_rows([recalled], [msg(1, state=MessageState.EDITED, edited=9)], newest_first=True)[0] is recalled
    newer = msg(1, state=MessageState.EDITED, edited=9, body=b"v3")
    assert merge_rows([msg(1, state=MessageState.EDITED, edited=5)], [newer], newest_first=True)[0] is newer
    row = msg(1, body=b"archived")
    assert merge_rows([row], [msg(1, body=b"hot")], newest_first=True)[0] is row  # a tie: message_record


def test_member_round_trip_keeps_bytes_and_big_seqs():
    seq = 2**62 + 7
    cols = {"tenant_id": T, "conversation_id": C, "conversation_seq": seq, "created_at": 1234567890123,
            "message_id": u128_to_blob(2**100), "payload_or_ciphertext": b"\x00\xff", "dek_id": ("a", "b", 3)}
    member = _member(cols)
    assert member.startswith(b"%020d|1234567890123|" % seq)
    got_seq, created, back = _parse(member)
    assert (got_seq, created) == (seq, 1234567890123)
    assert back["message_id"] == u128_to_blob(2**100) and back["payload_or_ciphertext"] == b"\x00\xff"
    assert back["dek_id"] == ("a", "b", 3) and back["custom_type"] is None
