"""The durable local outbox (lab.outbox): idempotent append by key, offsets, consumer groups,
CONTROL lookups, the registry. Pure: SQLite in tmp_path, no node."""
from __future__ import annotations

import threading
import uuid

import pytest

from lab.errors import ValidationError
from lab.store.outbox import LocalOutbox, OutboxRecord, open_outbox

T, C = uuid.UUID(int=1), uuid.UUID(int=2)


def _msg(seq, **payload):
    return OutboxRecord(tenant_id=T, conversation_id=C, conversation_seq=seq, kind="message", payload=payload)


def test_append_is_idempotent_by_key_first_write_wins(tmp_path):
    box = open_outbox("local", path=tmp_path / "o.sqlite")
    first = box.append(_msg(1, body="a"))
    again = box.append(_msg(1, body="b"))
    assert again.duplicate and not first.duplicate
    assert again.offset == first.offset and again.record.payload == {"body": "a"}
    assert box.get(T, C, 1).record.payload == {"body": "a"} and box.get(T, C, 2) is None
    assert box.end_offset() == first.offset + 1


def test_read_from_offset_and_groups_only_move_forward(tmp_path):
    box = LocalOutbox(tmp_path / "o.sqlite")
    offsets = [box.append(_msg(s)).offset for s in range(1, 6)]
    assert [e.record.conversation_seq for e in box.read(offsets[2])] == [3, 4, 5]
    assert [e.offset for e in box.read(0, limit=2)] == offsets[:2]
    assert box.committed("g") == 0
    assert box.commit("g", offsets[3]) == offsets[3]
    assert box.commit("g", offsets[1]) == offsets[3]  # a late commit of an older batch
    assert box.committed("other") == 0
    reopened = LocalOutbox(tmp_path / "o.sqlite")  # durable
    assert reopened.committed("g") == offsets[3] and len(reopened.read(0)) == 5


def test_controls_for_finds_events_of_one_target(tmp_path):
    box = LocalOutbox(tmp_path / "o.sqlite")
    box.append(_msg(1))
    box.append(OutboxRecord(tenant_id=T, conversation_id=C, conversation_seq=2, kind="recall", target_seq=1))
    box.append(OutboxRecord(tenant_id=T, conversation_id=C, conversation_seq=3, kind="edit", target_seq=1))
    assert [e.record.conversation_seq for e in box.controls_for(T, C, 1, "recall")] == [2]
    assert [e.record.conversation_seq for e in box.controls_for(T, C, 1, "edit")] == [3]
    assert box.controls_for(T, C, 2, "recall") == []


def test_concurrent_appends_from_threads(tmp_path):
    box = LocalOutbox(tmp_path / "o.sqlite")
    threads = [threading.Thread(target=lambda n=n: [box.append(_msg(n * 100 + i)) for i in range(1, 21)])
               for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    entries = box.read(0, 1000)
    assert len(entries) == 80 and len({e.offset for e in entries}) == 80


@pytest.mark.parametrize("bad", [dict(kind="nope"), dict(kind="recall"), dict(kind="message", target_seq=3),
                                 dict(kind="message", conversation_seq=0)])
def test_bad_records_are_refused(bad):
    fields = dict(tenant_id=T, conversation_id=C, conversation_seq=1, kind="message") | bad
    with pytest.raises(ValidationError):
        OutboxRecord(**fields)


def test_unknown_outbox_name(tmp_path):
    with pytest.raises(ValidationError):
        open_outbox("redpanda", path=tmp_path / "o.sqlite")
