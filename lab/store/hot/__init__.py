"""The seam where a hot window merges into the read paths (design §2.1 implementation note).

In the design's current form the commit path writes a hot layer (Redis ``history_hot_window``,
7 days) and the HistoryArchiver fills message_record later, so a message committed but not
yet archived lives only in the hot layer. A :class:`HotLayer` given to the history reader
and the batch reader is read beside message_record:

- history: per bucket read, the hot layer's messages of the same bucket and bounds are
  merged in (:func:`merge_rows`); message_record's row wins on the same conversation_seq,
  because it is the one recall / edit update;
- batch read: after the body LRU, the hot layer answers what it holds; the rest is grouped
  and read from message_record as before (S-1 counts only message_record requests).

The lab's hot window is Redis (``redis_window``: :class:`HotWindow`, and :class:`HotWindowLayer`
behind this seam; ``script_rounds``: its puts' pipelined rounds, several in flight at once, each lane on a
connection of its own),
opened by the store in archiver mode with ``hot_window="redis"``; without it the readers run with
``hot=None`` and read message_record only.
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
