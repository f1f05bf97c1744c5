"""The hot window's member encoding (lab.store.hot.redis_window): the seq prefix keeps seqs beyond a
double's 2^53 exact, the columns round-trip byte for byte."""
from __future__ import annotations

import uuid

from lab.store.hot.redis_window import _member, _parse
from lab.store import u128_to_blob

T, C = uuid.uuid4(), uuid.uuid4()


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


def test_same_columns_same_member():
    cols = {"tenant_id": T, "conversation_id": C, "conversation_seq": 9, "created_at": 5, "state": 0}
    assert _member(cols) == _member(dict(reversed(list(cols.items()))))
