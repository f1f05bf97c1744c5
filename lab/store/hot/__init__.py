"""The seam where a hot window merges into the read paths (design §2.1 implementation note):
a :class:`HotLayer` given to the history and batch readers is read beside message_record.

    redis_window   the lab's hot window on Redis (HotWindow, and HotWindowLayer behind this seam)
    script_rounds  its puts' pipelined rounds, each lane on a Redis connection of its own

More: docs/store-internals.md.
"""
from __future__ import annotations

import abc
import uuid
from collections.abc import Iterable, Mapping

from lab.store.rows.records import Message

__all__ = ["HotLayer", "merge_rows"]


class HotLayer(abc.ABC):
    """Committed messages not archived yet. Implementations must be safe for concurrent callers."""

    @abc.abstractmethod
    def bucket_range(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID, seq_bucket: int, *,
                     low: int, high: int, limit: int | None = None, descending: bool = True) -> list[Message]:
        """The messages of one seq_bucket with ``low <= conversation_seq <= high``; with ``limit``
        only that many, the newest (``descending``) or the oldest: all a merge cut at ``limit`` uses."""

    @abc.abstractmethod
    def lookup(self, tenant_id: uuid.UUID,
               coordinates: Mapping[int, tuple[uuid.UUID, int]]) -> dict[int, Message]:
        """Of the wanted messages (message_id -> (conversation_id, conversation_seq)), those held."""


def merge_rows(archived: Iterable[Message], hot: Iterable[Message], *, descending: bool,
               limit: int) -> list[Message]:
    """One bucket's rows from both layers in scan order, at most ``limit``; on the same
    conversation_seq the message_record row (``archived``) wins."""
    by_seq = {m.conversation_seq: m for m in hot}
    by_seq.update({m.conversation_seq: m for m in archived})
    return [by_seq[seq] for seq in sorted(by_seq, reverse=descending)][:limit]
