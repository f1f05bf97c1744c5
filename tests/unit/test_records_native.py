"""decode_rows' compiled path (lab_native, native/) against its Python path: for the same rows, the same
Messages field for field (each field of the same type, enum members and dek_id the same objects), and
for every row the compiled path does not take (an unusual shape, a key that fails, a tampered
ciphertext) no result of its own, so decode_rows raises exactly what the Python path raises. Pure: a
local key store in tmp_path, no node."""
from __future__ import annotations

import dataclasses
import uuid
from collections import namedtuple

import pytest
from message_cases import C, D, S, T, fields_of, message_at

import lab.store.rows.records as records
from lab.errors import DecryptError, KeyDestroyed, KeyNotCached, LabError, ValidationError
from lab.store import MediaMetadata, MentionTargets, MessageState, MessageType, RetentionClass
from lab.store.crypto import Encryptor, LocalKeyStore
from lab.store.rows.records import MESSAGE_RECORD_COLUMNS, PARTITION_ROW_COLUMNS, Message, decode_rows, encode_record

Row = namedtuple("Row", MESSAGE_RECORD_COLUMNS)
PageRow = namedtuple("PageRow", PARTITION_ROW_COLUMNS)
NATIVE = records.NATIVE_DECODER

CASES = {
    "plain": {},
    "e2ee": {"e2ee": True, "body": b"\x01opaque"},
    "empty body": {"body": b""},
    "media and mentions": {"message_type": MessageType.IMAGE, "media": MediaMetadata(object_id="o", mime="image/png",
                                                                                     size_bytes=10, thumbnail=b"t"),
                           "mentions": MentionTargets(user_ids=(S, D), at_all=True), "reply_to_conversation_seq": 1,
                           "custom_type": "x", "retention_class": RetentionClass.COMPLIANCE_HOLD},
    "edited": {"state": MessageState.EDITED, "edited_at_activity_id": (1 << 127) + 99},
    "recalled": {"state": MessageState.RECALLED, "recall_event_conversation_seq": 7},
    "large ids": {"message_id": (1 << 128) - 10, "last_activity_id": 0, "created_at_ms": (1 << 63) - 1},
}


@pytest.fixture
def enc(tmp_path):
    return Encryptor(LocalKeyStore(tmp_path / "k.sqlite"))


def _columns(enc, message, **override):
    return vars(encode_record(message, enc)) | override


def _page(columns):
    """The history page's rows: no partition key, the driver's named tuples."""
    return [PageRow(*(c[name] for name in PARTITION_ROW_COLUMNS)) for c in columns]


def python_path(rows, enc, **kw):
    saved, records.NATIVE_DECODER = records.NATIVE_DECODER, None
    try:
        return decode_rows(rows, enc, **kw)
    finally:
        records.NATIVE_DECODER = saved


def native_path(rows, enc, *, partition=None, wanted=None, skip_partial=False):
    """The compiled path alone: its list, or None where it leaves the page to the Python path."""
    return NATIVE.decode(rows, partition, records._native_keys(enc), wanted, skip_partial)


def assert_same(native, python):
    assert native is not None, "the compiled path left a common page to the Python path"
    assert len(native) == len(python)
    for a, b in zip(native, python):
        if b is None:
            assert a is None
            continue
        assert type(a) is Message and fields_of(a) == fields_of(b) and a == b and repr(a) == repr(b)
        for name in ("message_type", "state", "retention_class", "dek_id", "tenant_id", "conversation_id", "e2ee"):
            assert getattr(a, name) is getattr(b, name), name
        with pytest.raises(dataclasses.FrozenInstanceError):
            a.body = b"x"


def raised(call):
    try:
        call()
    except LabError as exc:
        return type(exc), str(exc), exc.facts
    raise AssertionError("nothing raised")


def test_lab_native_is_installed():
    """`make venv` builds native/: a venv without it would silently measure the Python path."""
    assert NATIVE is not None


@pytest.mark.parametrize("case", CASES)
def test_a_page_of_each_case_decodes_the_same(enc, case):
    message = message_at(5, **CASES[case])
    columns = [_columns(enc, dataclasses.replace(message, conversation_seq=s, message_id=message.message_id + s))
               for s in range(5, 9)]
    rows, partition = _page(columns), (T, C, 0)
    expected = python_path(rows, enc, partition=partition, skip_partial=True)
    assert_same(native_path(rows, enc, partition=partition, skip_partial=True), expected)
    assert_same(decode_rows(rows, enc, partition=partition, skip_partial=True), expected)
    assert expected[0] == dataclasses.replace(message, message_id=message.message_id + 5, dek_id=expected[0].dek_id)
    whole = [Row(**c) for c in columns]  # rows with their partition key (the store's SELECT *)
    records._columns(whole[0])  # the row class known as ordered (what the Python path does on first sight)
    assert_same(native_path(whole, enc), python_path(whole, enc))


def test_none_columns_decode_the_same(enc):
    base = _columns(enc, message_at(3))
    nones = {"sender_id": None, "sender_device_id": None, "client_message_id": None, "custom_type": None,
             "schema_version": None, "media_metadata": None, "reply_to_conversation_seq": None,
             "mention_targets": None, "state": None, "recall_event_conversation_seq": None,
             "edited_at_activity_id": None, "created_at": None, "retention_class": None}
    for name, value in nones.items():
        rows = _page([base | {name: value}])
        expected = python_path(rows, enc, partition=(T, C, 0))
        assert_same(native_path(rows, enc, partition=(T, C, 0)), expected)
    rows = _page([base | nones | {"client_message_id": ""}])
    expected = python_path(rows, enc, partition=(T, C, 0))
    assert_same(native_path(rows, enc, partition=(T, C, 0)), expected)
    assert (expected[0].client_message_id, expected[0].schema_version, expected[0].created_at_ms,
            expected[0].state, expected[0].retention_class) == ("", 1, 0, MessageState.NORMAL, RetentionClass.DEFAULT)


def test_partial_rows_wanted_and_two_keys(enc):
    columns = [_columns(enc, message_at(s)) for s in range(1, 4)]
    rotated = enc.rotate(T, C)
    columns += [_columns(enc, message_at(s)) for s in range(4, 6)]  # a second key version in the same page
    partial = {name: None for name in MESSAGE_RECORD_COLUMNS} | {"tenant_id": T, "conversation_id": C,
                                                                   "seq_bucket": 0, "conversation_seq": 9,
                                                                   "state": 2}
    rows = _page(columns[:2] + [partial] + columns[2:])
    expected = python_path(rows, enc, partition=(T, C, 0), skip_partial=True)
    assert [m.conversation_seq for m in expected] == [1, 2, 3, 4, 5] and expected[-1].dek_id == rotated
    assert_same(native_path(rows, enc, partition=(T, C, 0), skip_partial=True), expected)
    # without skip_partial the partial row is refused: the compiled path leaves it to the Python one
    assert native_path(rows, enc, partition=(T, C, 0)) is None
    assert raised(lambda: decode_rows(rows, enc, partition=(T, C, 0))) \
        == raised(lambda: python_path(rows, enc, partition=(T, C, 0)))
    # the batch read's group: rows not asked for (another message at the coordinate, or no entry) are None
    wanted = {1: 1 << 70, 2: 12345, 4: 4 << 70, 5: 5 << 70}
    good = _page(columns)
    expected = python_path(good, enc, partition=(T, C, 0), wanted=wanted)
    assert [m and m.conversation_seq for m in expected] == [1, None, None, 4, 5]
    assert_same(native_path(good, enc, partition=(T, C, 0), wanted=wanted), expected)
    assert_same(decode_rows(good, enc, partition=(T, C, 0), wanted=wanted, skip_destroyed=True), expected)


@pytest.mark.parametrize("path", ["native", "python"])
def test_cached_only_decodes_from_the_cache_and_reports_a_key_it_does_not_hold(enc, tmp_path, path):
    """A read on the driver's loop decodes with keys from the cache only: a key the cache does not
    hold raises KeyNotCached naming it (no key store read); a held one decodes the same as ever."""
    columns = [_columns(enc, message_at(s)) for s in range(1, 3)]
    rotated = enc.rotate(T, C)
    columns += [_columns(enc, message_at(s)) for s in range(3, 5)]  # two key versions in one page
    rows, partition = _page(columns), (T, C, 0)
    decode = decode_rows if path == "native" else python_path
    expected = python_path(rows, enc, partition=partition)
    cold = Encryptor(LocalKeyStore(tmp_path / "k.sqlite"))  # the same key store, nothing cached
    reads: list = []
    get = cold.keystore.get
    cold.keystore.get = lambda dek_id: reads.append(dek_id) or get(dek_id)
    with pytest.raises(KeyNotCached) as missed:
        decode(rows, cold, partition=partition, cached_only=True)
    assert missed.value.dek_id.key_version == 1 and reads == []
    cold.load_keys(cold.unready_keys({row.dek_id for row in rows}))
    assert {d.key_version for d in reads} == {1, rotated.key_version}
    assert_same(decode(rows, cold, partition=partition, cached_only=True), expected)
    assert len(reads) == 2  # the cache answered
    with pytest.raises(KeyNotCached):  # a key whose cache entry was dropped is missed again
        cold.invalidate(T, C)
        decode(rows, cold, partition=partition, cached_only=True)


def _tampered(blob: bytes, at: int) -> bytes:
    return blob[:at] + bytes([blob[at] ^ 1]) + blob[at + 1:]


@pytest.mark.parametrize("where", ["nonce", "ciphertext", "tag", "moved row", "short blob", "bytearray blob",
                                   "bad flag", "no flag", "unknown type", "unknown state", "bad message_id",
                                   "bad seq", "no dek_id", "destroyed key", "other conversation's key",
                                   "no payload", "str ids"])
def test_an_unusual_or_bad_row_raises_or_decodes_exactly_as_the_python_path(enc, where):
    columns = [_columns(enc, message_at(s)) for s in range(1, 4)]
    bad = dict(columns[1])
    blob = bad["payload_or_ciphertext"]
    partition = (T, C, 0)
    if where == "nonce":
        bad["payload_or_ciphertext"] = _tampered(blob, 3)
    elif where == "ciphertext":
        bad["payload_or_ciphertext"] = _tampered(blob, 13)
    elif where == "tag":
        bad["payload_or_ciphertext"] = _tampered(blob, len(blob) - 1)
    elif where == "moved row":
        bad["conversation_seq"] = 7
    elif where == "short blob":
        bad["payload_or_ciphertext"] = blob[:20]
    elif where == "bytearray blob":
        bad["payload_or_ciphertext"] = bytearray(blob)
    elif where in ("bad flag", "no flag"):
        sealed = enc.encrypt(b"\x07body" if where == "bad flag" else b"", tenant_id=T, conversation_id=C,
                             conversation_seq=2)
        bad["payload_or_ciphertext"] = sealed.blob
    elif where == "unknown type":
        bad["message_type"] = 999
    elif where == "unknown state":
        bad["state"] = 999
    elif where == "bad message_id":
        bad["message_id"] = b"\x01" * 15
    elif where == "bad seq":
        bad["conversation_seq"] = -2
    elif where == "no dek_id":
        bad["dek_id"] = None
    elif where == "destroyed key":
        enc.destroy(T, C)
    elif where == "other conversation's key":
        bad["dek_id"] = ("conversation", f"{T}:{uuid.UUID(int=9)}", 1)
    elif where == "no payload":
        bad["payload_or_ciphertext"] = None
    elif where == "str ids":
        partition = (str(T), str(C), 0)
    rows = _page([columns[0], bad, columns[2]])
    assert native_path(rows, enc, partition=partition) is None  # left to the Python path
    for kw in ({}, {"skip_destroyed": True}, {"skip_partial": True}):
        try:
            expected = python_path(rows, enc, partition=partition, **kw)
        except LabError:
            assert raised(lambda: decode_rows(rows, enc, partition=partition, **kw)) \
                == raised(lambda: python_path(rows, enc, partition=partition, **kw))
            continue
        got = decode_rows(rows, enc, partition=partition, **kw)
        assert [m and fields_of(m) for m in got] == [m and fields_of(m) for m in expected]
    if where in ("nonce", "ciphertext", "tag", "moved row"):
        exc_type, _, facts = raised(lambda: decode_rows(rows, enc, partition=partition))
        assert exc_type is DecryptError and facts["conversation_seq"] == bad["conversation_seq"] \
            and facts["tenant_id"] == T and facts["conversation_id"] == C
    if where == "destroyed key":
        assert raised(lambda: decode_rows(rows, enc, partition=partition))[0] is KeyDestroyed
        assert decode_rows(rows, enc, partition=partition, skip_destroyed=True) == [None, None, None]
    if where in ("bad flag", "no flag"):
        assert raised(lambda: decode_rows(rows, enc, partition=partition))[0] is ValidationError


def test_rows_the_compiled_path_does_not_take_decode_as_before(enc):
    """Mappings, unknown row classes, a generator, a partition not given as a tuple: the Python path."""
    columns = [_columns(enc, message_at(s, **case)) for s, case in enumerate(CASES.values(), start=1)]
    expected = python_path([Row(**c) for c in columns], enc)
    Other = namedtuple("Other", MESSAGE_RECORD_COLUMNS[::-1])
    for rows in ([dict(c) for c in columns], [Other(**c) for c in columns], (Row(**c) for c in columns)):
        assert [fields_of(m) for m in decode_rows(rows, enc)] == [fields_of(m) for m in expected]
    page = _page(columns)
    assert native_path(page, enc, partition=[T, C, 0]) is None
    assert [fields_of(m) for m in decode_rows(page, enc, partition=[T, C, 0])] == [fields_of(m) for m in expected]


def test_the_native_key_opens_what_the_cipher_seals_and_nothing_else(enc):
    from lab_native import AesGcmKey

    with pytest.raises(ValueError):
        AesGcmKey(b"short")
    sealed = enc.encrypt(b"\x00hi", tenant_id=T, conversation_id=C, conversation_seq=1)
    native, prefix, version, dek_id = enc.native_opening_key(tenant_id=T, conversation_id=C, dek_id=sealed.dek_id)
    aad = prefix + (1).to_bytes(8, "big") + version
    assert native.open(sealed.blob, aad) == b"\x00hi" and dek_id == sealed.dek_id
    assert native.open(sealed.blob, prefix + (2).to_bytes(8, "big") + version) is None
    assert native.open(sealed.blob[:27], aad) is None
    assert "key" not in repr(native).lower().replace("aesgcmkey", "")


@pytest.mark.spawns
def test_the_repo_venv_decodes_through_the_compiled_path_and_says_so(tmp_path):
    """`make venv` builds native/: a venv without it would measure the Python path's reads while
    the results claim today's figures; the environment block names the decode a run used."""
    from lab.cluster.config import load_config
    from lab.results.environment import environment, row_decode

    assert NATIVE is not None, "lab_native is not installed: run `make venv` (it builds native/)"
    assert row_decode().startswith("compiled: lab_native ") and row_decode().endswith("; UUID cells compiled")
    env = environment(load_config(flags={"lab_home": str(tmp_path)}, env={})).to_json()
    assert env["machine"]["row_decode"] == row_decode()


@pytest.mark.parametrize("case", CASES)
def test_the_safe_slot_path_builds_the_same_messages(enc, case):
    """The measured alternative (`lab bench decode`): slots set through PyO3's safe calls, not written
    at their offsets, give the very same Messages, and refuse what the raw path refuses."""
    message = message_at(5, **CASES[case])
    rows = _page([_columns(enc, dataclasses.replace(message, conversation_seq=s, message_id=message.message_id + s))
                  for s in range(5, 9)])
    safe = NATIVE.decode(rows, (T, C, 0), records._native_keys(enc), None, True, True)
    assert_same(safe, native_path(rows, enc, partition=(T, C, 0), skip_partial=True))
    base = _columns(enc, message_at(3))
    nones = _page([base | {"client_message_id": None, "media_metadata": None, "edited_at_activity_id": None}])
    assert_same(NATIVE.decode(nones, (T, C, 0), records._native_keys(enc), None, False, True),
                python_path(nones, enc, partition=(T, C, 0)))
    bad = _page([base | {"message_type": 999}])
    assert NATIVE.decode(bad, (T, C, 0), records._native_keys(enc), None, False, True) is None
