"""decode_row builds Messages without the dataclass constructor (lab.store.rows.records.decode_rows): the
result must equal what the constructor builds, field for field, for every kind of row. Pure:
a local key store in tmp_path, no node."""
from __future__ import annotations

import dataclasses
import uuid
from collections import namedtuple

import pytest

from lab.store.crypto import Encryptor, LocalKeyStore
from lab.store import MediaMetadata, MentionTargets, MessageState, MessageType, RetentionClass
from lab.store.rows.records import MESSAGE_RECORD_COLUMNS, Message, decode_row, encode_record
from message_cases import C, S, T, fields_of, message_at

Row = namedtuple("Row", MESSAGE_RECORD_COLUMNS)


CASES = {
    "plain": {},
    "e2ee": {"e2ee": True, "body": b"\x01opaque"},
    "media and mentions": {"message_type": MessageType.IMAGE, "media": MediaMetadata(object_id="o", mime="image/png",
                                                                                     size_bytes=10, thumbnail=b"t"),
                           "mentions": MentionTargets(user_ids=(S,), at_all=False), "reply_to_conversation_seq": 1,
                           "custom_type": "x", "retention_class": RetentionClass.COMPLIANCE_HOLD},
    "edited": {"state": MessageState.EDITED, "edited_at_activity_id": 99},
    "recalled": {"state": MessageState.RECALLED, "recall_event_conversation_seq": 7},
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("form", ["named tuple", "dict", "object"])
def test_decode_equals_the_constructor(tmp_path, case, form):
    enc = Encryptor(LocalKeyStore(tmp_path / "k.sqlite"))
    message = message_at(5, **CASES[case])
    columns = vars(encode_record(message, enc))
    row = {"named tuple": lambda: Row(**columns), "dict": lambda: dict(columns),
           "object": lambda: type("R", (), dict(columns))()}[form]()
    decoded = decode_row(row, enc)
    expected = dataclasses.replace(message, dek_id=decoded.dek_id)  # the key that sealed it
    assert fields_of(decoded) == fields_of(expected)  # every field set, of the constructor's type
    assert decoded == expected and type(decoded) is Message
    assert hash(decoded.dek_id) == hash(expected.dek_id) and repr(decoded) == repr(expected)
    with pytest.raises(dataclasses.FrozenInstanceError):
        decoded.body = b"x"


def test_decode_rows_opens_each_key_once_and_can_skip_an_erased_conversation(tmp_path):
    from lab.errors import DecryptError, KeyDestroyed
    from lab.store.rows.records import decode_rows

    enc = Encryptor(LocalKeyStore(tmp_path / "k.sqlite"))
    other = uuid.UUID(int=9)
    kept = [vars(encode_record(message_at(s), enc)) for s in range(1, 4)]
    erased = [vars(encode_record(dataclasses.replace(message_at(s), conversation_id=other), enc)) for s in range(1, 3)]
    rotated = enc.rotate(T, C)
    kept.append(vars(encode_record(message_at(4), enc)))  # a second key version of the same conversation
    rows = [Row(**c) for c in kept[:2] + erased[:1] + kept[2:] + erased[1:]]
    assert [m.body for m in decode_rows(rows, enc)] == [decode_row(r, enc).body for r in rows]
    assert decode_rows(rows[-2:-1], enc)[0].dek_id == rotated
    enc.destroy(T, other)
    with pytest.raises(KeyDestroyed):
        decode_rows(rows, enc)
    out = decode_rows(rows, enc, skip_destroyed=True)
    assert [None if m is None else m.conversation_seq for m in out] == [1, 2, None, 3, 4, None]
    moved = Row(**(kept[0] | {"conversation_seq": 2}))  # a ciphertext copied to another row
    with pytest.raises(DecryptError):
        decode_rows([moved], enc)
