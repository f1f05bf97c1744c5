"""After a load run: is every acknowledged send readable exactly once, where its ack said?

More: docs/load-internals.md.
"""
from __future__ import annotations

import csv
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from lab.store import MessageType, seq_bucket

ACK_FIELDS = ("phase", "tenant_id", "conversation_id", "conversation_seq", "message_id", "client_message_id",
              "sender_id", "replayed")
PHASES = ("seed", "warmup", "measured")
HISTORY_PAGE = 1000
_EXAMPLES = 10


@dataclass(frozen=True, kw_only=True)
class Ack:
    phase: str
    tenant_id: uuid.UUID
    conversation_id: uuid.UUID
    conversation_seq: int
    message_id: int
    client_message_id: str
    sender_id: uuid.UUID
    replayed: bool = False


@dataclass(frozen=True, kw_only=True)
class StoredRow:
    """What the audit needs of a message_record row."""

    conversation_seq: int
    message_id: int
    client_message_id: str
    sender_id: uuid.UUID
    control: bool = False  # recall/edit events: the store's own rows, not sends


class AckLog:
    """Append-only CSV of the acks one process received (flushed by the caller's cadence)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        new = not path.exists()
        self._f: IO[str] = open(path, "a", newline="", encoding="utf-8")
        self._w = csv.writer(self._f)
        if new:
            self._w.writerow(ACK_FIELDS)
        self.count = 0

    def append(self, ack: Ack) -> None:
        self._w.writerow((ack.phase, ack.tenant_id, ack.conversation_id, ack.conversation_seq,
                          f"{ack.message_id:032x}", ack.client_message_id, ack.sender_id, int(ack.replayed)))
        self.count += 1

    def flush(self) -> None:
        self._f.flush()

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()


def read_acks(path: Path) -> list[Ack]:
    with open(path, newline="", encoding="utf-8") as f:
        return [Ack(phase=r["phase"], tenant_id=uuid.UUID(r["tenant_id"]),
                    conversation_id=uuid.UUID(r["conversation_id"]), conversation_seq=int(r["conversation_seq"]),
                    message_id=int(r["message_id"], 16), client_message_id=r["client_message_id"],
                    sender_id=uuid.UUID(r["sender_id"]), replayed=r["replayed"] == "1")
                for r in csv.DictReader(f)]


@dataclass(kw_only=True)
class LogAudit:
    """The acked sends against the outbox (the commit log, §5.1 step 4): each first-time ack must
    have its message's entry at its coordinate (``missing`` otherwise), and no acked message may be
    logged at a second coordinate (``duplicated``)."""

    outbox: str                      # local | kafka
    checked: int = 0
    missing: int = 0
    duplicated: int = 0

    @property
    def ok(self) -> bool:
        return self.missing == 0 and self.duplicated == 0

    def merge(self, other: LogAudit) -> None:
        self.checked += other.checked
        self.missing += other.missing
        self.duplicated += other.duplicated

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"ok": self.ok}


@dataclass(kw_only=True)
class AuditResult:
    acked: int = 0                  # distinct first-time acks (sends that created a message)
    acked_by_phase: dict[str, int] = field(default_factory=dict)
    replays: int = 0                # retried sends answered from client_dedup
    found: int = 0
    lost: int = 0
    stored_not_in_history: int = 0
    duplicates: int = 0
    replay_mismatches: int = 0
    conversations: int = 0
    rows_read: int = 0
    examples: list[str] = field(default_factory=list)
    log: LogAudit | None = None      # the acks against the outbox (lab load, lab soak)

    @property
    def ok(self) -> bool:
        return (self.lost == 0 and self.duplicates == 0 and self.replay_mismatches == 0
                and (self.log is None or self.log.ok))

    def merge(self, other: AuditResult) -> None:
        for name in ("acked", "replays", "found", "lost", "stored_not_in_history", "duplicates",
                     "replay_mismatches", "conversations", "rows_read"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for k, v in other.acked_by_phase.items():
            self.acked_by_phase[k] = self.acked_by_phase.get(k, 0) + v
        self.examples = (self.examples + other.examples)[:_EXAMPLES]
        if other.log is not None:
            if self.log is None:
                self.log = LogAudit(outbox=other.log.outbox)
            self.log.merge(other.log)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self) | {"ok": self.ok}
        out["log"] = None if self.log is None else self.log.to_json()
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AuditResult:
        """Back from :meth:`to_json` (a distributed run's workers send their audits to the master)."""
        known = set(cls.__dataclass_fields__) - {"log"}
        log = data.get("log")
        return cls(**{k: v for k, v in data.items() if k in known},
                   log=None if not log else LogAudit(**{k: v for k, v in log.items() if k != "ok"}))

    def _example(self, text: str) -> None:
        if len(self.examples) < _EXAMPLES:
            self.examples.append(text)


def audit_rows(acks: Sequence[Ack], rows: Mapping[uuid.UUID, Sequence[StoredRow]],
               stored_elsewhere: Mapping[uuid.UUID, Iterable[int]] | None = None) -> AuditResult:
    """Pure core: ``rows`` is what history returned per conversation, ``stored_elsewhere``
    the message_ids a direct partition read found (to classify losses)."""
    res = AuditResult()
    firsts: dict[tuple[uuid.UUID, uuid.UUID, str], Ack] = {}
    replays: list[Ack] = []
    for ack in acks:
        if ack.replayed:
            replays.append(ack)
            continue
        key = (ack.tenant_id, ack.sender_id, ack.client_message_id)
        prior = firsts.get(key)
        if prior is not None and prior.message_id != ack.message_id:
            res.duplicates += 1  # the store acked one client message twice as new
            res._example(f"client_message_id {ack.client_message_id} acked as new twice")
            continue
        firsts[key] = ack
    for ack in replays:
        first = firsts.get((ack.tenant_id, ack.sender_id, ack.client_message_id))
        res.replays += 1
        if first is None or (first.message_id, first.conversation_seq) != (ack.message_id, ack.conversation_seq):
            res.replay_mismatches += 1
            res._example(f"replayed ack of {ack.client_message_id} names another message")

    res.acked = len(firsts)
    res.acked_by_phase = dict(Counter(a.phase for a in firsts.values()))
    by_conv: dict[uuid.UUID, list[Ack]] = defaultdict(list)
    for ack in firsts.values():
        by_conv[ack.conversation_id].append(ack)
    res.conversations = len(by_conv)
    elsewhere = {c: set(ids) for c, ids in (stored_elsewhere or {}).items()}
    for conv, conv_acks in by_conv.items():
        conv_rows = rows.get(conv, ())
        res.rows_read += len(conv_rows)
        ids = Counter(r.message_id for r in conv_rows)
        res.duplicates += sum(n - 1 for n in ids.values() if n > 1)
        for mid, n in ids.items():
            if n > 1:
                res._example(f"message_id {mid:032x} returned {n} times in {conv}")
        by_client: dict[tuple[uuid.UUID, str], set[int]] = defaultdict(set)
        for r in conv_rows:
            if not r.control:
                by_client[(r.sender_id, r.client_message_id)].add(r.conversation_seq)
        for (_sender, cmid), seqs in by_client.items():
            if len(seqs) > 1:
                res.duplicates += len(seqs) - 1
                res._example(f"client_message_id {cmid} stored at seqs {sorted(seqs)}")
        at_seq = {(r.conversation_seq, r.message_id) for r in conv_rows}
        for ack in conv_acks:
            if (ack.conversation_seq, ack.message_id) in at_seq:
                res.found += 1
            else:
                res.lost += 1
                if ack.message_id in elsewhere.get(conv, set()):
                    res.stored_not_in_history += 1
                res._example(f"lost: {conv} seq {ack.conversation_seq} message_id {ack.message_id:032x}")
    return res


def first_acks(acks: Sequence[Ack]) -> list[Ack]:
    """The first-time acks (one per client message; replays left out)."""
    firsts: dict[tuple[uuid.UUID, uuid.UUID, str], Ack] = {}
    for ack in acks:
        if not ack.replayed:
            firsts.setdefault((ack.tenant_id, ack.sender_id, ack.client_message_id), ack)
    return list(firsts.values())


def audit_log(acks: Sequence[Ack], logged: Iterable[tuple[uuid.UUID, int, int]], *, outbox: str) -> LogAudit:
    """Pure core: ``logged`` = (conversation_id, conversation_seq, message_id) of every message
    entry of the log (of the acks' tenant)."""
    res = LogAudit(outbox=outbox)
    at: dict[tuple[uuid.UUID, int], int] = {}
    coordinates: dict[int, set[tuple[uuid.UUID, int]]] = defaultdict(set)
    for conversation, seq, message_id in logged:
        at.setdefault((conversation, seq), message_id)  # the log is first-write-wins per key
        coordinates[message_id].add((conversation, seq))
    for ack in first_acks(acks):
        res.checked += 1
        if at.get((ack.conversation_id, ack.conversation_seq)) != ack.message_id:
            res.missing += 1
        if len(coordinates.get(ack.message_id, ())) > 1:
            res.duplicated += 1
    return res


def logged_messages(store: Any, tenant_ids: set[uuid.UUID]) -> list[tuple[uuid.UUID, int, int]]:
    """(conversation, seq, message_id) of the message entries of ``store``'s log for these tenants."""
    out = []
    for entry in store.log.scan():
        record = entry.record
        if record.kind == "message" and record.tenant_id in tenant_ids:
            out.append((record.conversation_id, record.conversation_seq,
                        int.from_bytes(record.payload.record.message_id, "big")))
    return out


def _stored(m: Any) -> StoredRow:
    return StoredRow(conversation_seq=m.conversation_seq, message_id=m.message_id,
                     client_message_id=m.client_message_id, sender_id=m.sender_id,
                     control=m.message_type == MessageType.CONTROL)


def read_conversation(store: Any, tenant_id: uuid.UUID, conversation_id: uuid.UUID) -> list[StoredRow]:
    """Every message of a conversation through the public read path, newest to oldest."""
    out: list[StoredRow] = []
    anchor = None
    while True:
        page = store.history(tenant_id, conversation_id, direction="older", anchor=anchor, limit=HISTORY_PAGE)
        out.extend(_stored(m) for m in page.messages)
        if not page.has_more or page.next_anchor is None:
            return out
        anchor = page.next_anchor


def audit_worker(store: Any, acks: Sequence[Ack], *, log: bool = False) -> AuditResult:
    """Read back every conversation ``acks`` name, with ``store`` (opened on the worker's state);
    ``log``: also check the acks against the store's outbox (:func:`audit_log`)."""

    convs: dict[uuid.UUID, uuid.UUID] = {a.conversation_id: a.tenant_id for a in acks}
    rows = {c: read_conversation(store, t, c) for c, t in convs.items()}
    # Classify losses: which missing ids a direct partition read does find.
    width = store.constants.message_seq_bucket_width
    elsewhere: dict[uuid.UUID, set[int]] = defaultdict(set)
    seen = {c: {(r.conversation_seq, r.message_id) for r in rs} for c, rs in rows.items()}
    for a in acks:
        if not a.replayed and (a.conversation_seq, a.message_id) not in seen[a.conversation_id]:
            for m in store.read_bucket(a.tenant_id, a.conversation_id, seq_bucket(a.conversation_seq, width)):
                elsewhere[a.conversation_id].add(m.message_id)
    result = audit_rows(acks, rows, elsewhere)
    if log:
        result.log = audit_log(acks, logged_messages(store, {a.tenant_id for a in acks}),
                               outbox=store.services.outbox)
    return result
