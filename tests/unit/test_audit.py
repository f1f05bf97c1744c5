"""The audit's core: every acked send found exactly once; losses and duplicates classified."""
from __future__ import annotations

import uuid

from lab.load.audit import Ack, StoredRow, audit_rows

MS = 1_000_000  # ns
S = 1_000_000_000

T, C = uuid.uuid4(), uuid.uuid4()
U = uuid.uuid4()


def _ack(seq: int, mid: int, cmid: str, replayed: bool = False, phase: str = "measured") -> Ack:
    return Ack(phase=phase, tenant_id=T, conversation_id=C, conversation_seq=seq, message_id=mid,
               client_message_id=cmid, sender_id=U, replayed=replayed)


def _row(seq: int, mid: int, cmid: str, control: bool = False) -> StoredRow:
    return StoredRow(conversation_seq=seq, message_id=mid, client_message_id=cmid, sender_id=U, control=control)


def test_audit_clean_run():
    acks = [_ack(1, 11, "a", phase="seed"), _ack(2, 12, "b"), _ack(2, 12, "b", replayed=True)]
    rows = {C: [_row(3, 99, "recall-event", control=True), _row(2, 12, "b"), _row(1, 11, "a")]}
    res = audit_rows(acks, rows)
    assert res.ok and (res.acked, res.found, res.replays, res.lost, res.duplicates) == (2, 2, 1, 0, 0)
    assert res.acked_by_phase == {"seed": 1, "measured": 1}


def test_audit_counts_duplicates_three_ways():
    dup_id = audit_rows([_ack(1, 11, "a")], {C: [_row(1, 11, "a"), _row(1, 11, "a")]})
    assert dup_id.duplicates >= 1
    dup_client = audit_rows([_ack(1, 11, "a")], {C: [_row(1, 11, "a"), _row(5, 15, "a")]})
    assert dup_client.duplicates == 1
    acked_twice = audit_rows([_ack(1, 11, "a"), _ack(5, 15, "a")], {C: [_row(1, 11, "a"), _row(5, 15, "a")]})
    assert acked_twice.duplicates >= 1 and not acked_twice.ok
    mismatch = audit_rows([_ack(1, 11, "a"), _ack(4, 14, "a", replayed=True)], {C: [_row(1, 11, "a")]})
    assert mismatch.replay_mismatches == 1 and not mismatch.ok


def test_audit_counts_losses_and_classifies_them():
    res = audit_rows([_ack(1, 11, "a"), _ack(2, 12, "b")], {C: [_row(1, 11, "a")]}, {C: [12]})
    assert (res.lost, res.stored_not_in_history, res.found) == (1, 1, 1) and not res.ok
    res = audit_rows([_ack(1, 11, "a")], {C: [_row(1, 77, "a")]})  # right seq, another message
    assert res.lost == 1


def test_the_log_audit_finds_missing_and_twice_logged_acks():
    """audit_log: each first-time ack must have its message's entry at its coordinate; a message
    logged at a second coordinate is counted; replays are not checked again."""
    from lab.load.audit import audit_log

    t, c, s = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()

    def ack(seq: int, mid: int, cmid: str, replayed: bool = False) -> Ack:
        return Ack(phase="measured", tenant_id=t, conversation_id=c, conversation_seq=seq, message_id=mid,
                   client_message_id=cmid, sender_id=s, replayed=replayed)
    acks = [ack(1, 11, "a"), ack(2, 12, "b"), ack(3, 13, "c"), ack(1, 11, "a", replayed=True)]
    clean = audit_log(acks, [(c, 1, 11), (c, 2, 12), (c, 3, 13)], outbox="kafka")
    assert (clean.checked, clean.missing, clean.duplicated, clean.ok) == (3, 0, 0, True)
    # seq 2 holds another message (first write wins), seq 3 never logged, 11 logged twice
    bad = audit_log(acks, [(c, 1, 11), (c, 2, 99), (c, 2, 12), (c, 7, 11)], outbox="local")
    assert (bad.checked, bad.missing, bad.duplicated, bad.ok) == (3, 2, 1, False)
    assert bad.to_json()["outbox"] == "local" and bad.to_json()["ok"] is False
