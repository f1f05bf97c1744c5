"""The bad-input matrix: every public call of the façade, malformed and
boundary values, a typed error (the most specific lab.errors class) and all six tables plus
the outbox unchanged, read back before and after each call.

tests/test_bad_input.py holds the first send / recall / edit cases; this file adds the other
calls, the remaining send / recall / edit cases, unicode edge cases (lone surrogates, NUL
and other control characters in client_message_id and reaction keys) and key failures
(another store's DEK, no DEK, a crypto-erased conversation).
"""
from __future__ import annotations

import inspect
import uuid
from dataclasses import dataclass, replace
from typing import Any
from collections.abc import Callable

import pytest

from lab.errors import (Bit63Violation, DecryptError, InvalidId, InvalidRequest, InvalidSeq, KeyDestroyed, LabError,
                        NotFound, UnknownEnum, UnknownRetentionClass, ValidationError)
from lab.store import BIT63, BatchEntry, HeadUpdate, MediaMetadata, MentionTargets, MessageState, MessageStore, U128_MAX
from store_checks import new_request, snapshot_tables

pytestmark = pytest.mark.node

# Calls of MessageStore that take no caller data worth a matrix (lifecycle, schema, recovery).
NO_INPUT_CALLS = {"open", "create_schema", "check_schema", "recover", "drain", "close", "advance_earliest_all",
                  "baseline_statements"}
# Covered by tests/test_bad_input.py (and here with the cases it lacks).
ALSO_IN_TEST_BAD_INPUT = {"send", "recall", "edit"}


@dataclass(frozen=True)
class Seeded:
    tenant: uuid.UUID
    conv: uuid.UUID
    seq: int
    message_id: int
    sender: uuid.UUID
    request: Any
    erased_conv: uuid.UUID       # its DEK was destroyed after one message was sent
    erased_seq: int
    erased_message_id: int
    wrong_key: MessageStore      # another state_dir whose key store made its own key for `conv`
    no_key: MessageStore         # another state_dir with no key for `conv` at all


@pytest.fixture(scope="module")
def seeded(store, open_store, tmp_path_factory) -> Seeded:
    req = new_request(body=b"seeded")
    ack = store.send(req)
    store.react(req.tenant_id, req.conversation_id, ack.conversation_seq, req.sender_id, "ok")
    erased_req = new_request(tenant_id=req.tenant_id, body=b"to be erased")
    erased_ack = store.send(erased_req)
    store.drain()
    store.erase_conversation(req.tenant_id, erased_req.conversation_id)
    wrong_key = open_store(state_dir=tmp_path_factory.mktemp("wrong-keys"))
    wrong_key.rotate_key(req.tenant_id, req.conversation_id)  # same name, other material
    no_key = open_store(state_dir=tmp_path_factory.mktemp("no-keys"))
    return Seeded(tenant=req.tenant_id, conv=req.conversation_id, seq=ack.conversation_seq,
                  message_id=ack.message_id, sender=req.sender_id, request=req,
                  erased_conv=erased_req.conversation_id, erased_seq=erased_ack.conversation_seq,
                  erased_message_id=erased_ack.message_id, wrong_key=wrong_key, no_key=no_key)


Call = Callable[[MessageStore, Seeded], Any]
CASES: list[tuple[str, str, Call, type[LabError]]] = []


def cases(call: str, error: type[LabError], table: dict[str, Call]) -> None:
    for name, fn in table.items():
        CASES.append((call, name, fn, error))


BAD_UUIDS = {"malformed str": "not-a-uuid", "None": None, "int": 1234, "raw bytes": uuid.uuid4().bytes,
             "empty str": "", "uuid with trailing junk": f"{uuid.uuid4()}x"}
BAD_SEQS = {"zero": (0, InvalidSeq), "negative": (-1, Bit63Violation), "bit 63": (BIT63, Bit63Violation),
            "beyond u64": (1 << 64, Bit63Violation), "float": (1.0, InvalidSeq), "bool": (True, InvalidSeq),
            "str": ("1", InvalidSeq)}
BAD_MESSAGE_IDS = {"negative": -1, "over u128": U128_MAX + 1, "str": "1", "float": 1.0, "bool": True, "None": None}
BAD_REACTION_KEYS = {"empty (reserved)": "", "None": None, "int": 7, "65 bytes": "x" * 65,
                     "64 bytes of 4-byte emoji + 1": "\U0001F600" * 16 + "x", "lone surrogate": "\ud800",
                     "NUL": "a\x00b", "escape sequence": "\x1b[31mred", "DEL": "ok\x7f"}


# ---- calls taking (tenant, conversation[, seq[, user]]) -----------------------------------------
SEQ_CALLS: dict[str, Callable[..., Any]] = {
    "recall": lambda s, t, c, q, u: s.recall(t, c, q, actor_id=u),
    "edit": lambda s, t, c, q, u: s.edit(t, c, q, body=b"new", actor_id=u),
    # recall_async and edit_async: every refusal is the future's, raised by result(), of the sync call's type
    "recall_async": lambda s, t, c, q, u: s.recall_async(t, c, q, actor_id=u).result(30),
    "edit_async": lambda s, t, c, q, u: s.edit_async(t, c, q, body=b"new", actor_id=u).result(30),
    "react": lambda s, t, c, q, u: s.react(t, c, q, u, "ok"),
    "react_async": lambda s, t, c, q, u: s.react_async(t, c, q, u, "ok"),  # raised at once, not the future's
    "unreact": lambda s, t, c, q, u: s.unreact(t, c, q, u),
    "unreact_async": lambda s, t, c, q, u: s.unreact_async(t, c, q, u),  # raised at once, not the future's
    "self_reaction": lambda s, t, c, q, u: s.self_reaction(t, c, q, u),
    "self_reaction_async": lambda s, t, c, q, u: s.self_reaction_async(t, c, q, u),  # raised at once
    "reaction_summary": lambda s, t, c, q, u: s.reaction_summary(t, c, q),
}
for _call, _fn in SEQ_CALLS.items():
    for _name, _bad in BAD_UUIDS.items():
        if _name in ("malformed str", "None"):  # the other id shapes run on tenant/conversation below
            cases(_call, InvalidId, {f"tenant {_name}": lambda s, d, f=_fn, b=_bad: f(s, b, d.conv, d.seq, d.sender),
                                     f"conversation {_name}": lambda s, d, f=_fn, b=_bad: f(s, d.tenant, b, d.seq,
                                                                                            d.sender)})
    if _call not in ("reaction_summary",):
        cases(_call, InvalidId, {"user/actor int": lambda s, d, f=_fn: f(s, d.tenant, d.conv, d.seq, 42)})
    for _name, (_bad, _error) in BAD_SEQS.items():
        if _call in ("recall", "edit") and _name in ("zero",):
            continue  # in test_bad_input.py
        cases(_call, _error, {f"seq {_name}": lambda s, d, f=_fn, b=_bad: f(s, d.tenant, d.conv, b, d.sender)})

for _name, _bad in BAD_UUIDS.items():
    cases("history", InvalidId, {f"tenant {_name}": lambda s, d, b=_bad: s.history(b, d.conv)})
    cases("head", InvalidId, {f"conversation {_name}": lambda s, d, b=_bad: s.head(d.tenant, b)})
cases("head", InvalidId, {"tenant None": lambda s, d: s.head(None, d.conv)})
cases("read_bucket", InvalidId, {"conversation malformed": lambda s, d: s.read_bucket(d.tenant, "x", 0)})
cases("erase_conversation", InvalidId, {"tenant malformed": lambda s, d: s.erase_conversation("nope", d.conv),
                                        "conversation None": lambda s, d: s.erase_conversation(d.tenant, None)})
cases("read_bucket", Bit63Violation, {"bucket negative": lambda s, d: s.read_bucket(d.tenant, d.conv, -1)})

# ---- history --------------------------------------------------------------------------------------
cases("history", ValidationError, {
    **{f"limit {n}": (lambda s, d, v=v: s.history(d.tenant, d.conv, limit=v))
       for n, v in {"0": 0, "-1": -1, "2**31": 1 << 31, "True": True, "'5'": "5", "None": None, "1.5": 1.5}.items()},
    **{f"direction {n}": (lambda s, d, v=v: s.history(d.tenant, d.conv, direction=v))
       for n, v in {"sideways": "sideways", "None": None, "OLDER": "OLDER", "list": ["older"]}.items()},
})
cases("history", Bit63Violation, {"anchor -1": lambda s, d: s.history(d.tenant, d.conv, anchor=-1),
                                  "anchor bit 63": lambda s, d: s.history(d.tenant, d.conv, anchor=BIT63)})
cases("history", InvalidSeq, {"anchor float": lambda s, d: s.history(d.tenant, d.conv, anchor=1.5),
                              "anchor str": lambda s, d: s.history(d.tenant, d.conv, anchor="3")})
# history_async checks its arguments before anything is issued: the error is raised, not the future's
cases("history_async", InvalidId, {"conversation malformed": lambda s, d: s.history_async(d.tenant, "x"),
                                   "tenant None": lambda s, d: s.history_async(None, d.conv)})
cases("history_async", ValidationError, {"limit 0": lambda s, d: s.history_async(d.tenant, d.conv, limit=0),
                                         "direction sideways": lambda s, d: s.history_async(d.tenant, d.conv,
                                                                                            direction="sideways")})
cases("history_async", Bit63Violation, {"anchor bit 63": lambda s, d: s.history_async(d.tenant, d.conv, anchor=BIT63)})
cases("history_async", InvalidSeq, {"anchor str": lambda s, d: s.history_async(d.tenant, d.conv, anchor="3")})


# ---- batch_read -----------------------------------------------------------------------------------
def _entry(d: Seeded, **kw: Any) -> BatchEntry:
    return BatchEntry(**{"conversation_id": d.conv, "conversation_seq": d.seq, "message_id": d.message_id, **kw})


cases("batch_read", ValidationError, {
    "entries None": lambda s, d: s.batch_read(d.tenant, None),
    "entries int": lambda s, d: s.batch_read(d.tenant, 5),
    "entries str": lambda s, d: s.batch_read(d.tenant, "entries"),
    "entries dict": lambda s, d: s.batch_read(d.tenant, {"a": _entry(d)}),
    "entry of wrong type": lambda s, d: s.batch_read(d.tenant, [_entry(d), (d.conv, d.seq, d.message_id)]),
    "inline body not bytes": lambda s, d: s.batch_read(d.tenant, [_entry(d, inline_body="text")]),
    "one message_id at two coordinates": lambda s, d: s.batch_read(d.tenant, [_entry(d), _entry(d, conversation_seq=d.seq + 1)]),
})
cases("batch_read", InvalidId, {
    "tenant malformed": lambda s, d: s.batch_read("nope", [_entry(d)]),
    "conversation malformed": lambda s, d: s.batch_read(d.tenant, [_entry(d, conversation_id="nope")]),
    "inline entry with malformed conversation": lambda s, d: s.batch_read(
        d.tenant, [_entry(d, conversation_id="nope", inline_body=b"carried")]),
    **{f"message_id {n}": (lambda s, d, v=v: s.batch_read(d.tenant, [_entry(d, message_id=v)]))
       for n, v in BAD_MESSAGE_IDS.items()},
})
for _name, (_bad, _error) in BAD_SEQS.items():
    cases("batch_read", _error, {f"seq {_name}": lambda s, d, b=_bad: s.batch_read(d.tenant, [_entry(d, conversation_seq=b)])})
# batch_read_async checks its entries before anything is issued: the error is raised, not the future's
cases("batch_read_async", ValidationError, {
    "entries None": lambda s, d: s.batch_read_async(d.tenant, None),
    "one message_id at two coordinates": lambda s, d: s.batch_read_async(
        d.tenant, [_entry(d), _entry(d, conversation_seq=d.seq + 1)])})
cases("batch_read_async", InvalidId, {"tenant malformed": lambda s, d: s.batch_read_async("nope", [_entry(d)])})
cases("batch_read_async", DecryptError, {"wrong DEK": lambda s, d: d.wrong_key.batch_read_async(
    d.tenant, [_entry(d)]).result(30)})

# ---- lookup ----------------------------------------------------------------------------------------
cases("lookup", InvalidId, {f"message_id {n}": (lambda s, d, v=v: s.lookup(d.tenant, v)) for n, v in BAD_MESSAGE_IDS.items()})
cases("lookup", InvalidId, {"tenant malformed": lambda s, d: s.lookup("nope", d.message_id)})
cases("lookup", NotFound, {"unknown message_id": lambda s, d: s.lookup(d.tenant, d.message_id + 1),
                           "max u128": lambda s, d: s.lookup(d.tenant, U128_MAX),
                           "another tenant's message": lambda s, d: s.lookup(uuid.uuid4(), d.message_id)})

# ---- react / unreact: keys ---------------------------------------------------------------------------
cases("react", ValidationError, {f"key {n}": (lambda s, d, k=k: s.react(d.tenant, d.conv, d.seq, d.sender, k))
                                 for n, k in BAD_REACTION_KEYS.items()})


# react_async checks its arguments before anything is issued: the error is raised, not the future's
cases("react_async", ValidationError, {f"key {n}": (lambda s, d, k=k: s.react_async(d.tenant, d.conv, d.seq, d.sender, k))
                                       for n, k in BAD_REACTION_KEYS.items() if k is not None})


# ---- send / recall / edit: what test_bad_input.py does not cover ------------------------------------
def _send(**changes: Any) -> Call:
    return lambda s, d: s.send(replace(d.request, **{"client_message_id": f"bad-{uuid.uuid4().hex[:8]}", **changes}))


cases("send", InvalidId, {
    "client_message_id with NUL": _send(client_message_id="c-\x00-1"),
    "client_message_id with newline": _send(client_message_id="c-1\nforged log line"),
    "client_message_id with escape": _send(client_message_id="\x1b[2Jc-1"),
    "client_message_id lone low surrogate": _send(client_message_id="c-\udc00"),
    "client_message_id of 129 emoji": _send(client_message_id="\U0001F600" * 129),
    "tenant with a non-hex digit": _send(tenant_id="00000000-0000-0000-0000-00000000000g"),
    # the typed value refuses it at construction, so a send can never carry it
    "mention with malformed uuid": lambda s, d: s.send(replace(d.request, mentions=MentionTargets(user_ids=("x",)))),
})
cases("send", ValidationError, {
    "body None": _send(body=None),
    "custom_type empty": _send(custom_type=""),
    "custom_type 129 chars": _send(custom_type="t" * 129),
    "custom_type lone surrogate": _send(custom_type="\ud800"),
    "e2ee int": _send(e2ee=1),
    "media negative size": lambda s, d: s.send(replace(d.request, media=MediaMetadata(object_id="o", size_bytes=-1))),
    "media thumbnail not bytes": lambda s, d: s.send(replace(d.request, media=MediaMetadata(object_id="o",
                                                                                            thumbnail="png"))),
})
cases("send", UnknownEnum, {"message_type None": _send(message_type=None), "message_type True": _send(message_type=True),
                            "message_type 0": _send(message_type=0),
                            "message_type of another enum": _send(message_type=MessageState.EDITED)})
cases("send", UnknownRetentionClass, {"retention_class None": _send(retention_class=None),
                                      "retention_class -1": _send(retention_class=-1)})
cases("send", InvalidSeq, {"reply_to float": _send(reply_to_conversation_seq=5.0)})
cases("send", Bit63Violation, {"reply_to bit 63 - the first bad value": _send(reply_to_conversation_seq=BIT63)})
cases("send", KeyDestroyed, {"to a crypto-erased conversation": lambda s, d: s.send(replace(
    d.request, client_message_id=f"bad-{uuid.uuid4().hex}", conversation_id=d.erased_conv))})
# send_async: every refusal is the future's, raised by result(), of the type send() raises
cases("send_async", ValidationError, {
    "not a request": lambda s, d: s.send_async({"body": b"x"}).result(30),
    "body over the limit": lambda s, d: s.send_async(replace(d.request, client_message_id=f"bad-{uuid.uuid4().hex}",
                                                             body=b"x" * (s.constants.payload_max_bytes + 1))).result(30)})
cases("send_async", KeyDestroyed, {"to a crypto-erased conversation": lambda s, d: s.send_async(replace(
    d.request, client_message_id=f"bad-{uuid.uuid4().hex}", conversation_id=d.erased_conv)).result(30)})
cases("edit", ValidationError, {"e2ee str": lambda s, d: s.edit(d.tenant, d.conv, d.seq, body=b"x", actor_id=d.sender,
                                                                e2ee="no"),
                                "body None": lambda s, d: s.edit(d.tenant, d.conv, d.seq, body=None, actor_id=d.sender)})
cases("edit", NotFound, {"no message at seq": lambda s, d: s.edit(d.tenant, d.conv, d.seq + 500, body=b"x",
                                                                  actor_id=d.sender)})
cases("edit", KeyDestroyed, {"in a crypto-erased conversation": lambda s, d: s.edit(
    d.tenant, d.erased_conv, d.erased_seq, body=b"x", actor_id=d.sender)})
cases("recall", NotFound, {"another tenant": lambda s, d: s.recall(uuid.uuid4(), d.conv, d.seq, actor_id=d.sender)})
cases("edit_async", ValidationError, {
    "e2ee str": lambda s, d: s.edit_async(d.tenant, d.conv, d.seq, body=b"x", actor_id=d.sender, e2ee="no").result(30),
    "body None": lambda s, d: s.edit_async(d.tenant, d.conv, d.seq, body=None, actor_id=d.sender).result(30),
    "body over the limit": lambda s, d: s.edit_async(d.tenant, d.conv, d.seq, actor_id=d.sender,
                                                     body=b"x" * (s.constants.payload_max_bytes + 1)).result(30)})
cases("edit_async", NotFound, {"no message at seq": lambda s, d: s.edit_async(d.tenant, d.conv, d.seq + 500, body=b"x",
                                                                              actor_id=d.sender).result(30)})
cases("edit_async", KeyDestroyed, {"in a crypto-erased conversation": lambda s, d: s.edit_async(
    d.tenant, d.erased_conv, d.erased_seq, body=b"x", actor_id=d.sender).result(30)})
cases("recall_async", NotFound, {"another tenant": lambda s, d: s.recall_async(uuid.uuid4(), d.conv, d.seq,
                                                                                actor_id=d.sender).result(30)})

# ---- keys: another store's DEK, no DEK, a destroyed DEK -------------------------------------------------
cases("history", DecryptError, {"wrong DEK": lambda s, d: d.wrong_key.history(d.tenant, d.conv),
                                "no DEK": lambda s, d: d.no_key.history(d.tenant, d.conv)})
cases("history", KeyDestroyed, {"destroyed DEK": lambda s, d: s.history(d.tenant, d.erased_conv)})
# ... and a key failure while decoding (on the driver's callback thread) is the future's, typed as history()'s
cases("history_async", DecryptError, {"wrong DEK": lambda s, d: d.wrong_key.history_async(d.tenant, d.conv).result(30),
                                      "no DEK": lambda s, d: d.no_key.history_async(d.tenant, d.conv).result(30)})
cases("history_async", KeyDestroyed, {"destroyed DEK": lambda s, d: s.history_async(d.tenant, d.erased_conv).result(30)})
cases("batch_read", DecryptError, {"wrong DEK": lambda s, d: d.wrong_key.batch_read(d.tenant, [_entry(d)]),
                                   "no DEK": lambda s, d: d.no_key.batch_read(d.tenant, [_entry(d)])})
cases("lookup", DecryptError, {"wrong DEK": lambda s, d: d.wrong_key.lookup(d.tenant, d.message_id)})
cases("lookup", KeyDestroyed, {"destroyed DEK": lambda s, d: s.lookup(d.tenant, d.erased_message_id)})
cases("read_bucket", DecryptError, {"wrong DEK": lambda s, d: d.wrong_key.read_bucket(d.tenant, d.conv, 0)})
cases("read_bucket", KeyDestroyed, {"destroyed DEK": lambda s, d: s.read_bucket(d.tenant, d.erased_conv, 0)})


# ---- head updates, seq floors, archiver runs, keys, baselines (the seeding / verification API) --------
def _head(d: Seeded, **kw: Any) -> HeadUpdate:
    return HeadUpdate(**{"tenant_id": d.tenant, "conversation_id": d.conv, "conversation_seq": d.seq + 1000,
                         "message_id": 1, "last_activity_id": 1, "sender_id": d.sender, **kw})


def _stored_row(s: MessageStore, d: Seeded) -> Any:
    return s.connection.execute(f"SELECT * FROM {s.keyspace}.message_record WHERE tenant_id = %s AND "
                                "conversation_id = %s AND seq_bucket = 0 AND conversation_seq = %s",
                                (d.tenant, d.conv, d.seq)).one()


cases("apply_head", ValidationError, {"not a HeadUpdate": lambda s, d: s.apply_head({"conversation_seq": 1}),
                                      "preview str": lambda s, d: s.apply_head(_head(d, preview="text")),
                                      "e2ee int": lambda s, d: s.apply_head(_head(d, e2ee=1))})
cases("apply_head", InvalidSeq, {"seq 0": lambda s, d: s.apply_head(_head(d, conversation_seq=0))})
cases("apply_head", InvalidId, {"tenant malformed": lambda s, d: s.apply_head(_head(d, tenant_id="nope")),
                                "sender None": lambda s, d: s.apply_head(_head(d, sender_id=None)),
                                "message_id negative": lambda s, d: s.apply_head(_head(d, message_id=-1))})
cases("submit_head", ValidationError, {"None": lambda s, d: s.submit_head(None)})
cases("submit_head", Bit63Violation, {"seq bit 63": lambda s, d: s.submit_head(_head(d, conversation_seq=BIT63))})
cases("advance_seq", InvalidId, {"tenant malformed": lambda s, d: s.advance_seq("nope", d.conv, 5)})
cases("advance_seq", InvalidSeq, {"next_seq 0": lambda s, d: s.advance_seq(d.tenant, d.conv, 0),
                                  "next_seq str": lambda s, d: s.advance_seq(d.tenant, d.conv, "5")})
cases("advance_seq", Bit63Violation, {"next_seq bit 63": lambda s, d: s.advance_seq(d.tenant, d.conv, BIT63)})
cases("archive_once", ValidationError, {"max_batches 0": lambda s, d: s.archive_once(max_batches=0),
                                        "max_batches True": lambda s, d: s.archive_once(max_batches=True),
                                        "group empty": lambda s, d: s.archive_once(group=""),
                                        "group int": lambda s, d: s.archive_once(group=5)})
cases("archive_lag", ValidationError, {"group empty": lambda s, d: s.archive_lag(group="")})
cases("advance_earliest", InvalidId, {"tenant malformed": lambda s, d: s.advance_earliest("nope", d.conv),
                                      "conversation int": lambda s, d: s.advance_earliest(d.tenant, 7)})
cases("rotate_key", InvalidId, {"tenant malformed": lambda s, d: s.rotate_key("nope", d.conv),
                                "conversation None": lambda s, d: s.rotate_key(d.tenant, None)})
cases("prepare_raw", ValidationError, {"cql None": lambda s, d: s.prepare_raw(None),
                                       "cql blank": lambda s, d: s.prepare_raw("  "),
                                       "a placeholder other than ks": lambda s, d: s.prepare_raw(
                                           "SELECT * FROM {ks}.message_record WHERE tenant_id = {t}")})
cases("prepare_raw", InvalidRequest, {"not CQL": lambda s, d: s.prepare_raw("SELEKT * FROM {ks}.message_record")})
cases("decode_record", ValidationError, {"None": lambda s, d: s.decode_record(None),
                                         "a row of another table": lambda s, d: s.decode_record({"conversation_seq": 1})})
cases("decode_record", DecryptError, {"a row moved to another seq": lambda s, d: s.decode_record(
    {**_stored_row(s, d)._asdict(), "conversation_seq": d.seq + 1})})
cases("bucket_read_statement", InvalidId, {"conversation malformed": lambda s, d: s.bucket_read_statement(
    d.tenant, "x", 0)})
cases("bucket_read_statement", Bit63Violation, {"bucket negative": lambda s, d: s.bucket_read_statement(
    d.tenant, d.conv, -1)})

IDS = [f"{call}: {name}" for call, name, _, _ in CASES]
assert len(IDS) == len(set(IDS)), "case names must be unique per call"


@pytest.mark.parametrize("call, name, fn, error", CASES, ids=IDS)
def test_bad_input_is_refused_with_a_typed_error_and_writes_nothing(store, seeded, call, name, fn, error):
    before = snapshot_tables(store)
    with pytest.raises(error) as info:
        fn(store, seeded)
    assert type(info.value).__module__ == "lab.errors"  # typed: a lab error, not a driver's or Python's
    store.drain()
    assert snapshot_tables(store) == before


def test_the_matrix_covers_every_public_call():
    public = {name for name, member in inspect.getmembers(MessageStore, inspect.isfunction)
              if not name.startswith("_")} | {"open"}
    covered = {call for call, _, _, _ in CASES}
    assert public - NO_INPUT_CALLS - covered == set(), "a public call has no bad-input case"
    assert ALSO_IN_TEST_BAD_INPUT <= covered


def test_erased_conversation_reads_as_missing_in_a_batch_and_head_keeps_its_bounds(store, seeded):
    before = snapshot_tables(store)
    store.body_cache.clear()
    result = store.batch_read(seeded.tenant, [_entry(seeded), BatchEntry(
        conversation_id=seeded.erased_conv, conversation_seq=seeded.erased_seq, message_id=seeded.erased_message_id)])
    assert set(result.messages) == {seeded.message_id} and result.missing == (seeded.erased_message_id,)
    head = store.head(seeded.tenant, seeded.erased_conv)
    assert head.latest_conversation_seq == seeded.erased_seq and head.preview is None  # preview unreadable
    assert snapshot_tables(store) == before


def test_boundary_values_inside_the_limits_are_accepted(store, seeded):
    """The refusals above are not over-eager: the largest and oddest valid values pass."""
    emoji_key = "\U0001F44D\U0001F3FD" * 8  # 64 bytes exactly: thumbs up, skin tone
    assert len(emoji_key.encode()) == 64
    summary = store.react(seeded.tenant, seeded.conv, seeded.seq, uuid.uuid4(), emoji_key)
    assert summary.counts[emoji_key] == 1
    odd_ids = ["\u202eRTL-override", "zero\u200bwidth", "\U0001F468\u200d\U0001F469\u200d\U0001F467",
               "é" * 128, " leading and trailing spaces "]
    for client_message_id in odd_ids:
        req = new_request(tenant_id=seeded.tenant, client_message_id=client_message_id,
                          reply_to_conversation_seq=BIT63 - 1, media=MediaMetadata(object_id="o", size_bytes=(1 << 64) - 1))
        ack = store.send(req)
        assert store.send(req).message_id == ack.message_id  # and dedup holds on the odd key
        assert store.lookup(seeded.tenant, ack.message_id).client_message_id == client_message_id
    assert store.history(seeded.tenant, seeded.conv, anchor=BIT63 - 1, limit=(1 << 31) - 1).messages
