"""decode_rows (the read paths' batch decode) equals decode_row row by row, whatever a batch mixes:
conversations, key versions, E2EE, media, recalled and edited rows, driver rows beside mappings;
and its errors are decode_row's (the batch path keeps per-row work out of the
loop, it must not change a result or an error). Pure: a key store in tmp_path, no node."""
from __future__ import annotations

import dataclasses
import random
import uuid
from collections import namedtuple

import pytest

from lab.errors import DecryptError, KeyDestroyed, ValidationError
from lab.store import MediaMetadata, MentionTargets, MessageState, MessageType, RetentionClass
from lab.store.crypto import Encryptor, LocalKeyStore
from lab.store.rows.records import (MESSAGE_RECORD_COLUMNS, PARTITION_ROW_COLUMNS, Message, decode_row, decode_rows,
                                    encode_record)

T = uuid.UUID(int=11)
CONVERSATIONS = (uuid.UUID(int=21), uuid.UUID(int=22), uuid.UUID(int=23))
Row = namedtuple("Row", MESSAGE_RECORD_COLUMNS)
KeylessRow = namedtuple("KeylessRow", PARTITION_ROW_COLUMNS)  # the batch read's SELECT: its partition's key left out


def _message(conversation: uuid.UUID, seq: int, rng: random.Random) -> Message:
    kind = rng.choice(("plain", "plain", "e2ee", "media", "edited", "recalled", "empty"))
    extra: dict = {}
    if kind == "e2ee":
        extra = {"e2ee": True, "body": bytes(rng.randrange(256) for _ in range(20))}
    elif kind == "media":
        extra = {"message_type": MessageType.IMAGE, "custom_type": "x", "reply_to_conversation_seq": 1,
                 "media": MediaMetadata(object_id="o", mime="image/png", size_bytes=9, thumbnail=b"t"),
                 "mentions": MentionTargets(user_ids=(T,), at_all=True),
                 "retention_class": RetentionClass.COMPLIANCE_HOLD}
    elif kind == "edited":
        extra = {"state": MessageState.EDITED, "edited_at_activity_id": seq << 3}
    elif kind == "recalled":
        extra = {"state": MessageState.RECALLED, "recall_event_conversation_seq": seq + 1000}
    elif kind == "empty":
        extra = {"body": b""}
    fields = dict(tenant_id=T, conversation_id=conversation, seq_bucket=0, conversation_seq=seq,
                  message_id=(seq << 70) + conversation.int, last_activity_id=(seq << 70) + 1, sender_id=T,
                  sender_device_id=T, client_message_id=f"c-{seq}", message_type=MessageType.TEXT,
                  body=b"body %d" % seq, created_at_ms=1_700_000_000_000 + seq)
    return Message(**(fields | extra))


def fields_of(message: Message) -> list:
    return [(f.name, type(getattr(message, f.name)), getattr(message, f.name)) for f in dataclasses.fields(message)]


def _fresh_uuids(columns: dict) -> dict:
    # the driver builds new UUID objects for every row: equal, never identical
    return columns | {k: uuid.UUID(bytes=columns[k].bytes) for k in ("tenant_id", "conversation_id", "sender_id")}


@pytest.fixture
def enc(tmp_path):
    return Encryptor(LocalKeyStore(tmp_path / "k.sqlite"))


@pytest.mark.parametrize("seed", range(6))
def test_a_mixed_batch_decodes_as_its_rows_do_one_by_one(enc, seed):
    rng = random.Random(seed)
    rows = []
    for seq in range(1, 41):
        if seq == 20:
            enc.rotate(T, CONVERSATIONS[0])  # rows of two key versions in one batch
        columns = _fresh_uuids(vars(encode_record(_message(rng.choice(CONVERSATIONS), seq, rng), enc)))
        rows.append(Row(**columns) if rng.random() < 0.8 else dict(columns))
    rng.shuffle(rows)
    batch = decode_rows(rows, enc)
    one_by_one = [decode_row(r, enc) for r in rows]
    assert batch == one_by_one
    assert all(type(m) is Message and fields_of(m) == fields_of(o) for m, o in zip(batch, one_by_one))


def test_the_batch_raises_what_the_row_raises(enc):
    good = [vars(encode_record(_message(CONVERSATIONS[0], s, random.Random(s)), enc)) for s in range(1, 4)]
    moved = Row(**(good[0] | {"conversation_seq": 9}))               # a ciphertext copied to another row
    tampered = Row(**(good[1] | {"payload_or_ciphertext": good[1]["payload_or_ciphertext"][:-1] + b"\0"}))
    other_key = Row(**(good[2] | {"conversation_id": CONVERSATIONS[1]}))   # dek_id of another conversation
    partial = Row(**(good[0] | {"message_id": None}))
    no_dek = Row(**(good[0] | {"dek_id": None}))
    for bad, error in ((moved, DecryptError), (tampered, DecryptError), (other_key, DecryptError),
                       (partial, ValidationError), (no_dek, ValidationError)):
        with pytest.raises(error) as one:
            decode_row(bad, enc)
        with pytest.raises(error) as batch:
            decode_rows([Row(**good[0]), bad], enc)
        assert type(batch.value) is type(one.value) and batch.value.facts == one.value.facts


def test_an_erased_conversation_in_a_batch(enc):
    rng = random.Random(1)
    rows = [Row(**vars(encode_record(_message(CONVERSATIONS[i % 2], i + 1, rng), enc))) for i in range(6)]
    enc.destroy(T, CONVERSATIONS[1])
    with pytest.raises(KeyDestroyed):
        decode_rows(rows, enc)
    out = decode_rows(rows, enc, skip_destroyed=True)
    assert [m is None for m in out] == [False, True] * 3
    assert [m for m in out if m is not None] == [decode_row(r, enc) for r in rows[::2]]


def test_a_recall_coordinate_wins_over_a_racing_state_cell(enc):
    """A row carrying the recall coordinate reads RECALLED whatever its state cell says."""
    columns = vars(encode_record(dataclasses.replace(_message(CONVERSATIONS[0], 3, random.Random(0)),
                                                     recall_event_conversation_seq=99, state=MessageState.EDITED), enc))
    [m] = decode_rows([Row(**columns)], enc)
    assert m.state is MessageState.RECALLED and m == decode_row(Row(**columns), enc)


@pytest.mark.parametrize("seed", range(3))
def test_one_partition_read_without_its_key_decodes_as_its_whole_rows(enc, seed):
    """decode_rows(partition=...) (the batch read selects every column but the partition key): the
    same Messages as the whole rows, field by field; the errors are the whole row's."""
    rng = random.Random(seed)
    whole = []
    for seq in range(1, 31):
        if seq == 15:
            enc.rotate(T, CONVERSATIONS[0])  # two key versions in one partition
        whole.append(Row(**_fresh_uuids(vars(encode_record(_message(CONVERSATIONS[0], seq, rng), enc)))))
    keyless = [KeylessRow(*row[3:]) for row in whole]
    partition = (T, CONVERSATIONS[0], 0)
    out = decode_rows(keyless, enc, partition=partition)
    expected = [decode_row(r, enc) for r in whole]
    assert out == expected and all(fields_of(m) == fields_of(o) for m, o in zip(out, expected))
    moved = keyless[0]._replace(conversation_seq=99)
    with pytest.raises(DecryptError):  # a ciphertext at another seq: the AAD has the partition's key and the seq
        decode_rows([moved], enc, partition=partition)
    with pytest.raises(DecryptError):  # the right rows named with another partition's key
        decode_rows(keyless[:1], enc, partition=(T, CONVERSATIONS[1], 0))
    with pytest.raises(ValidationError):  # a row without message_id is not a message
        decode_rows([keyless[0]._replace(message_id=None)], enc, partition=partition)
    # a history page leaves such rows out in the same pass (skip_partial) and decodes the rest alike
    husks = [row._replace(message_id=None) if i % 7 == 3 else row for i, row in enumerate(keyless)]
    kept = decode_rows(husks, enc, partition=partition, skip_partial=True)
    assert kept == [m for i, m in enumerate(expected) if i % 7 != 3] and len(kept) == len(husks) - 4
    with pytest.raises(ValidationError):
        decode_rows(keyless[:1], enc, partition=(T, None, 0))
    enc.destroy(T, CONVERSATIONS[0])
    assert decode_rows(keyless[:2], enc, partition=partition, skip_destroyed=True) == [None, None]


def test_rows_not_wanted_decode_as_none_unopened(enc):
    """decode_rows(wanted=...) (the batch read's group: seq -> message_id): a row at a seq not asked for,
    or another message at a wanted seq, decodes as None without being opened (a tampered one raises
    nothing); the wanted rows decode as without it."""
    rng = random.Random(7)
    whole = [Row(**vars(encode_record(_message(CONVERSATIONS[0], seq, rng), enc))) for seq in range(1, 9)]
    keyless = [KeylessRow(*row[3:]) for row in whole]
    keyless[5] = keyless[5]._replace(payload_or_ciphertext=b"\0" * 40)  # tampered, not asked for
    partition = (T, CONVERSATIONS[0], 0)
    expected = decode_rows(keyless[:5], enc, partition=partition)
    wanted = {m.conversation_seq: m.message_id for m in expected if m.conversation_seq != 2}
    wanted[3] += 1  # another message at seq 3: the row there is not the one asked for
    out = decode_rows(keyless, enc, partition=partition, wanted=wanted)
    assert [m is None for m in out] == [False, True, True, False, False, True, True, True]
    assert [m for m in out if m is not None] == [expected[0], expected[3], expected[4]]
    with pytest.raises(DecryptError):
        decode_rows(keyless[5:6], enc, partition=partition, wanted={6: int.from_bytes(whole[5].message_id, "big")})
