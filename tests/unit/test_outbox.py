"""The durable local outbox (lab.store.outbox.sqlite_log): idempotent append by key, offsets, consumer groups,
CONTROL lookups, the registry. Pure: SQLite in tmp_path, no node."""
from __future__ import annotations

import threading
import uuid

import pytest

from lab.errors import ValidationError
from lab.store import EditEvent, EncodedRecord, MessagePayload, OutboxRecord, RecallEvent, open_outbox
from lab.store.outbox.sqlite_log import LocalOutbox

T, C = uuid.UUID(int=1), uuid.UUID(int=2)


def _payload(tag: str = "", *, seq: int = 1) -> MessagePayload:
    """A logged message whose client_message_id is ``tag`` (what a test reads back)."""
    return MessagePayload(record=EncodedRecord(
        tenant_id=T, conversation_id=C, seq_bucket=0, conversation_seq=seq, message_id=bytes(16),
        last_activity_id=bytes(16), sender_id=T, sender_device_id=T, client_message_id=tag or f"m-{seq}",
        message_type=1, schema_version=1, state=0, payload_or_ciphertext=b"sealed", dek_id=("conversation", "k", 1),
        retention_class=0, created_at=1))


def _msg(seq, tag=""):
    return OutboxRecord(tenant_id=T, conversation_id=C, conversation_seq=seq, payload=_payload(tag, seq=seq))


def _tag(entry) -> str:
    return entry.record.payload.record.client_message_id


def test_append_is_idempotent_by_key_first_write_wins(tmp_path):
    box = open_outbox("local", path=tmp_path / "o.sqlite")
    first = box.append(_msg(1, "a"))
    again = box.append(_msg(1, "b"))
    assert again.duplicate and not first.duplicate
    assert again.offset == first.offset and _tag(again) == "a" and again.record == first.record
    assert _tag(box.get(T, C, 1)) == "a" and box.get(T, C, 2) is None
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
    recall = RecallEvent(actor_id=T, activity_id=2**100, created_at_ms=5)
    edit = EditEvent(actor_id=C, activity_id=7, created_at_ms=6, payload_or_ciphertext=b"\x00new",
                     dek_id=("conversation", "k", 2))
    box.append(OutboxRecord(tenant_id=T, conversation_id=C, conversation_seq=2, target_seq=1, payload=recall))
    box.append(OutboxRecord(tenant_id=T, conversation_id=C, conversation_seq=3, target_seq=1, payload=edit))
    assert [e.record.conversation_seq for e in box.controls_for(T, C, 1, "recall")] == [2]
    [logged_edit] = box.controls_for(T, C, 1, "edit")
    assert logged_edit.record.conversation_seq == 3 and logged_edit.record.kind == "edit"
    assert logged_edit.record.payload == edit and box.controls_for(T, C, 1, "recall")[0].record.payload == recall
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


@pytest.mark.parametrize("bad", [dict(payload={"columns": {}}), dict(payload=None),
                                 dict(payload=RecallEvent(actor_id=T, activity_id=1, created_at_ms=1)),
                                 dict(target_seq=3), dict(conversation_seq=0)])
def test_bad_records_are_refused(bad):
    fields = dict(tenant_id=T, conversation_id=C, conversation_seq=1, payload=_payload()) | bad
    with pytest.raises(ValidationError):
        OutboxRecord(**fields)


def test_unknown_outbox_name(tmp_path):
    with pytest.raises(ValidationError):
        open_outbox("redpanda", path=tmp_path / "o.sqlite")


def _race(n, work):
    gate = threading.Barrier(n)
    out, errors = [None] * n, []

    def one(i):
        gate.wait()
        try:
            out[i] = work(i)
        except Exception as exc:  # surfaced to the test
            errors.append(exc)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out, errors


def test_group_commit_shares_transactions_and_keeps_first_write_wins(tmp_path, monkeypatch):
    """Concurrent appends share COMMITs (fewer transactions than appends), every one returns a
    stored entry, and racing appends of one key in one group still see first-write-wins."""
    box = LocalOutbox(tmp_path / "o.sqlite")
    commits = []
    group, one = box._append_group, box._append_one

    def counted(conn, items):
        commits.append(len(items))
        return group(conn, items)

    def counted_one(conn, item):
        commits.append(1)
        return one(conn, item)
    monkeypatch.setattr(box._appends, "_work", counted)
    monkeypatch.setattr(box._appends, "_one", counted_one)
    entries, errors = _race(24, lambda i: box.append(_msg(1 + i % 12, f"writer-{i}")))
    assert errors == [] and sum(commits) == 24
    by_seq: dict[int, list] = {}
    for e in entries:
        by_seq.setdefault(e.record.conversation_seq, []).append(e)
    assert sorted(by_seq) == list(range(1, 13))
    for seq, pair in by_seq.items():
        assert sorted(e.duplicate for e in pair) == [False, True]
        assert len({e.offset for e in pair}) == 1 and len({_tag(e) for e in pair}) == 1
        assert box.get(T, C, seq).record.payload == pair[0].record.payload
    reopened = LocalOutbox(tmp_path / "o.sqlite")  # every returned append is on disk
    assert len(reopened.read(0, 100)) == 12


def test_a_failed_group_transaction_fails_every_append_in_it(tmp_path, monkeypatch):
    from lab.errors import OutboxError

    box = LocalOutbox(tmp_path / "o.sqlite")
    group, one = box._append_group, box._append_one

    def failing(conn, items):  # a group transaction that fails after its inserts: rolled back
        group(conn, items)
        raise OutboxError("disk full", path=box.path)

    def failing_one(conn, item):  # a lone autocommit insert fails as a whole statement
        raise OutboxError("disk full", path=box.path)
    monkeypatch.setattr(box._appends, "_work", failing)
    monkeypatch.setattr(box._appends, "_one", failing_one)
    _, errors = _race(8, lambda i: box.append(_msg(i + 1)))
    assert len(errors) == 8 and all(isinstance(e, OutboxError) for e in errors)
    assert all(e.path == box.path for e in errors)
    monkeypatch.setattr(box._appends, "_work", group)
    monkeypatch.setattr(box._appends, "_one", one)
    assert box.read(0, 100) == []  # rolled back: nothing of the failed groups is stored
    assert box.append(_msg(1)).offset >= 1 and len(box.read(0, 100)) == 1
