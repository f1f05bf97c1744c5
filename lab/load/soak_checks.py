"""The soak's read-back checks of recalls and edits (lab.load.soak): acked changes still on their rows.

More: docs/load-internals.md.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from lab.store import MessageState, seq_bucket

__all__ = ["edits_lost", "recalls_lost"]

Key = tuple[uuid.UUID, int]  # (conversation, seq)


def rows_at(store: Any, tenant_id: uuid.UUID, keys: Iterable[Key]) -> dict[Key, Any]:
    """The messages at these keys, one partition read per (conversation, bucket)."""
    width = store.constants.message_seq_bucket_width
    rows: dict[Key, Any] = {}
    for conv, bucket in {(c, seq_bucket(s, width)) for c, s in keys}:
        for m in store.read_bucket(tenant_id, conv, bucket):
            rows[(conv, m.conversation_seq)] = m
    return rows


def recalls_lost(store: Any, tenant_id: uuid.UUID, recalled: Mapping[Key, int]) -> int:
    """Acked recalls (key -> event seq) whose row does not carry RECALLED and the event's coordinate."""
    rows = rows_at(store, tenant_id, recalled)
    return sum(1 for key, event in recalled.items()
               if key not in rows or rows[key].state is not MessageState.RECALLED
               or rows[key].recall_event_conversation_seq != event)


def edits_lost(store: Any, tenant_id: uuid.UUID, edited: Mapping[Key, tuple[int, int]]) -> int:
    """Messages (key -> the last acked edit's (edited_at_activity_id, written_at_us)) whose last
    acked edit is undone: see the module docstring."""
    rows, lost = rows_at(store, tenant_id, edited), 0
    for (conv, seq), (activity, written_at_us) in edited.items():
        row = rows.get((conv, seq))
        if row is not None and row.state is MessageState.RECALLED:
            continue
        if row is None or row.edited_at_activity_id is None:
            lost += 1
            continue
        if row.edited_at_activity_id == activity:
            continue
        events = [e.record.payload for e in store.log.controls_for(tenant_id, conv, seq, "edit")
                  if e.record.payload.activity_id == row.edited_at_activity_id]
        lost += not events or events[0].write_time_us < written_at_us
    return lost
