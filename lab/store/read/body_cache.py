"""The batch read's body LRU (design §4.3, "this node's body LRU") and its coherence rule.

In the process that changed a message, no older body is served once the change returned: a
change discards the entry and a read that began before it cannot put its rows back; a put never
replaces a newer version (recalled, or a later edit) with an older one. Other processes learn of
a change by expiry: an entry lives ``ttl_seconds`` at most. docs/design-deviations.md states the rule.
"""
from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable

from lab.errors import ValidationError
from lab.store.rows.ids import parse_uuid
from lab.store.rows.model import MessageState
from lab.store.rows.records import Message

__all__ = ["BodyCache", "DEFAULT_BODY_CACHE_TTL_SECONDS"]

DEFAULT_BODY_CACHE_TTL_SECONDS = 2.0   # how long another process may serve a body changed elsewhere
_DISCARDS_KEPT_MIN = 4096               # discards remembered for reads in flight (at least)


def _version(message: Message) -> tuple[bool, int]:
    """Newer is greater: a recall over everything, then the edit with the higher activity id."""
    return (message.state is MessageState.RECALLED, message.edited_at_activity_id or -1)


class BodyCache:
    """Thread-safe LRU of decoded messages by (tenant_id, message_id), each entry expiring after
    ``ttl_seconds``. A read takes :meth:`token` before it reads rows and passes it to
    :meth:`put_many`; whatever was discarded since is not put back. ``max_entries=0`` disables it."""

    def __init__(self, max_entries: int, *, ttl_seconds: float = DEFAULT_BODY_CACHE_TTL_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not isinstance(max_entries, int) or isinstance(max_entries, bool) or max_entries < 0:
            raise ValidationError(f"max_entries must be an int >= 0, got {max_entries!r}", value=max_entries)
        if not isinstance(ttl_seconds, (int, float)) or isinstance(ttl_seconds, bool) or not ttl_seconds > 0:
            raise ValidationError(f"ttl_seconds must be a number > 0, got {ttl_seconds!r}", value=ttl_seconds)
        self.max_entries = max_entries
        self.ttl_seconds = float(ttl_seconds)
        self._clock = clock
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[int, int], tuple[Message, float]] = OrderedDict()
        self._at: dict[tuple[int, int, int], int] = {}  # (tenant, conversation, seq) -> message_id
        self._epoch = 0                                  # counts discards
        self._discarded: OrderedDict[tuple[int, int], int] = OrderedDict()  # key -> epoch of its last discard
        self._floor = 0                                  # tokens below this cannot be checked: their puts are dropped
        self._discards_kept = max(_DISCARDS_KEPT_MIN, 4 * max_entries)

    def token(self) -> int:
        """Taken by a read before it reads rows; :meth:`put_many` with it drops what changed since."""
        with self._lock:
            return self._epoch

    def get(self, tenant_id: uuid.UUID, message_id: int) -> Message | None:
        return self.get_many(tenant_id, (message_id,)).get(message_id)

    def get_many(self, tenant_id: uuid.UUID, message_ids: Iterable[int]) -> dict[int, Message]:
        """The cached ones of ``message_ids`` not expired (one lock for the whole batch)."""
        found: dict[int, Message] = {}
        tenant = parse_uuid(tenant_id).int
        with self._lock:
            items = self._items
            if not items:
                return found
            now = self._clock()
            for message_id in message_ids:
                key = (tenant, message_id)
                held = items.get(key)
                if held is None:
                    continue
                if held[1] <= now:
                    self._drop(key)
                    continue
                items.move_to_end(key)
                found[message_id] = held[0]
        return found

    def put(self, message: Message, *, since: int | None = None) -> None:
        self.put_many((message,), since=since)

    def put_many(self, messages: Iterable[Message], *, since: int | None = None) -> None:
        """Cache ``messages`` unless discarded after ``since`` (a :meth:`token`), and never over a
        newer version of the same message."""
        if self.max_entries == 0:
            return
        with self._lock:
            if since is not None and since < self._floor:
                return  # too old to tell what changed since: cache nothing
            items, at, expires = self._items, self._at, self._clock() + self.ttl_seconds
            for message in messages:
                tenant = message.tenant_id.int
                key = (tenant, message.message_id)
                if since is not None and self._discarded.get(key, -1) > since:
                    continue
                held = items.get(key)
                if held is not None and _version(held[0]) > _version(message):
                    items.move_to_end(key)
                    continue
                items[key] = (message, expires)
                items.move_to_end(key)
                at[(tenant, message.conversation_id.int, message.conversation_seq)] = message.message_id
            while len(items) > self.max_entries:
                self._drop(next(iter(items)))

    def _drop(self, key: tuple[int, int]) -> None:
        held = self._items.pop(key, None)
        if held is not None:
            self._at.pop((key[0], held[0].conversation_id.int, held[0].conversation_seq), None)

    def _note_discard(self, key: tuple[int, int]) -> None:
        self._epoch += 1
        self._discarded[key] = self._epoch
        self._discarded.move_to_end(key)
        while len(self._discarded) > self._discards_kept:
            _, epoch = self._discarded.popitem(last=False)
            self._floor = max(self._floor, epoch)

    def discard(self, tenant_id: uuid.UUID | str, message_id: int) -> None:
        key = (parse_uuid(tenant_id).int, message_id)
        with self._lock:
            self._note_discard(key)
            self._drop(key)

    def discard_at(self, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str,
                   conversation_seq: int) -> None:
        """Drop the message at a coordinate (recall / edit know the coordinate, not the id)."""
        tenant, conversation = parse_uuid(tenant_id).int, parse_uuid(conversation_id).int
        with self._lock:
            message_id = self._at.get((tenant, conversation, conversation_seq))
            if message_id is not None:
                self._note_discard((tenant, message_id))
                self._drop((tenant, message_id))
            else:  # not cached: no read in flight may cache it either
                self._epoch += 1
                self._floor = self._epoch

    def discard_conversation(self, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str) -> int:
        """Drop every cached message of one conversation (crypto-erasure); returns how many."""
        tenant_id, conversation_id = parse_uuid(tenant_id), parse_uuid(conversation_id)
        tenant = tenant_id.int
        with self._lock:
            doomed = [key for key, (m, _) in self._items.items()
                      if key[0] == tenant and m.conversation_id == conversation_id]
            for key in doomed:
                self._drop(key)
            self._epoch += 1
            self._floor = self._epoch  # reads in flight of this conversation put nothing back
            return len(doomed)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._at.clear()
            self._epoch += 1
            self._floor = self._epoch

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
