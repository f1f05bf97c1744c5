"""A small thread-safe LRU map for the store's per-conversation memories: the head a writer last
wrote (lab.store.write.head_writer) and the H a reader last saw (lab.store.read.history). Bounded, so a
process that touches millions of conversations keeps only the recent ones; a forgotten entry
only costs the read it saved."""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["Lru"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Lru(Generic[K, V]):
    def __init__(self, entries: int) -> None:
        if not isinstance(entries, int) or isinstance(entries, bool) or entries < 1:
            raise ValueError(f"an LRU holds at least 1 entry, got {entries!r}")
        self._entries = entries
        self._lock = threading.Lock()
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: K, value: V, *, keep_max: bool = False) -> None:
        """Set ``key``; with ``keep_max`` never to below the value it holds (monotonic values)."""
        with self._lock:
            held = self._items.get(key)
            self._items[key] = max(value, held) if keep_max and held is not None else value  # type: ignore[type-var]
            self._items.move_to_end(key)
            while len(self._items) > self._entries:
                self._items.popitem(last=False)

    def forget(self, key: K) -> None:
        with self._lock:
            self._items.pop(key, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
