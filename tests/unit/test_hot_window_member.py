"""The hot window's member encoding (lab.store.hot.redis_window): the seq prefix keeps seqs beyond a
double's 2^53 exact, the columns round-trip byte for byte."""
from __future__ import annotations

import uuid

from lab.store.hot.redis_window import _member, _parse
from lab.store import EncodedRecord, u128_to_blob

T, C = uuid.uuid4(), uuid.uuid4()


def _record(seq: int, **changes) -> EncodedRecord:
    return EncodedRecord(tenant_id=T, conversation_id=C, seq_bucket=seq // 4096, conversation_seq=seq,
                         message_id=u128_to_blob(2**100), last_activity_id=u128_to_blob(1), sender_id=T,
                         sender_device_id=T, client_message_id="c", message_type=1, schema_version=1, state=0,
                         payload_or_ciphertext=b"\x00\xff", dek_id=("a", "b", 3), retention_class=0,
                         created_at=1234567890123).replace(**changes)


def test_member_round_trip_keeps_bytes_and_big_seqs():
    seq = 2**62 + 7
    member = _member(_record(seq))
    assert member.startswith(b"%020d|1234567890123|" % seq)
    got_seq, created, back = _parse(member)
    assert (got_seq, created) == (seq, 1234567890123)
    assert back == _record(seq)
    assert back.message_id == u128_to_blob(2**100) and back.payload_or_ciphertext == b"\x00\xff"
    assert back.dek_id == ("a", "b", 3) and back.custom_type is None


def test_same_record_same_member():
    assert _member(_record(9, created_at=5)) == _member(_record(9).replace(created_at=5))
