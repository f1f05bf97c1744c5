"""The cache of loaded conversation DEKs (design §21.3.4, appendix B.5.3).

More: docs/store-internals.md.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Any, NamedTuple

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

try:  # the compiled decode's key (native/, built by `make venv`); without it reads take the Python path
    from lab_native import AesGcmKey as _NativeKey
except ImportError:  # pragma: no cover - a venv built without native/
    _NativeKey = None

from lab.constants import Constants
from lab.errors import ValidationError
from lab.store.crypto.keystores import DataKey
from lab.store.rows.ids import DekId

__all__ = ["CachedKey", "DEFAULT_DEK_CACHE_TTL_SECONDS", "DekCache"]

_DEFAULTS = Constants.appendix_b()

DEFAULT_DEK_CACHE_TTL_SECONDS = _DEFAULTS.dek_cache_ttl_seconds
# Expired entries are dropped lazily; past this size a sweep keeps memory bounded by the
# keys used within one TTL.
_DEK_CACHE_SWEEP_ENTRIES = 10_000


class CachedKey(NamedTuple):
    """A loaded key, its AES-GCM cipher and, when lab_native is installed, the same key's
    compiled cipher (lab_native.AesGcmKey, used by decode_rows' compiled path; never hands the key back)."""

    key: DataKey
    cipher: AESGCM
    expires_at: float
    native: Any = None


class DekCache:
    """Thread-safe TTL cache of keys and their ready AES-GCM ciphers."""

    def __init__(self, ttl_seconds: float = DEFAULT_DEK_CACHE_TTL_SECONDS, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not isinstance(ttl_seconds, (int, float)) or isinstance(ttl_seconds, bool) or ttl_seconds < 0:
            raise ValidationError(f"cache_ttl_seconds must be >= 0, got {ttl_seconds!r}", value=ttl_seconds)
        self.ttl_seconds = ttl_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._current: dict[str, CachedKey] = {}
        self._by_id: dict[DekId, CachedKey] = {}
        # Bumped by every invalidation: a key loaded before a destroy must not be cached after it.
        self._generation = 0

    def current(self, key_id: str, load: Callable[[], DataKey]) -> CachedKey:
        """The conversation's newest key (``load`` on a miss)."""
        return self._cached(self._current, key_id, load)

    def version(self, dek_id: DekId, load: Callable[[], DataKey]) -> CachedKey:
        """One specific version (``load`` on a miss)."""
        return self._cached(self._by_id, dek_id, load)

    def holds_current(self, key_id: str) -> bool:
        """Whether :meth:`current` would answer from the cache now (no ``load``)."""
        return self._holds(self._current, key_id)

    def holds_version(self, dek_id: DekId) -> bool:
        """Whether :meth:`version` would answer from the cache now (no ``load``)."""
        return self._holds(self._by_id, dek_id)

    def _holds(self, table: dict, slot: Hashable) -> bool:
        entry = table.get(slot)  # one dict read: atomic under the GIL, no lock needed to look
        return entry is not None and entry.expires_at > self._clock()

    def _cached(self, table: dict, slot: Hashable, load: Callable[[], DataKey]) -> CachedKey:
        now = self._clock()
        with self._lock:
            entry = table.get(slot)
            if entry is not None and entry.expires_at > now:
                return entry
            generation = self._generation
        key = load()  # outside the lock: a slow key store must not serialise every caller
        entry = CachedKey(key=key, cipher=AESGCM(key.material), expires_at=now + self.ttl_seconds,
                          native=None if _NativeKey is None else _NativeKey(key.material))
        if self.ttl_seconds > 0:
            with self._lock:
                if generation != self._generation:
                    return entry
                if len(table) >= _DEK_CACHE_SWEEP_ENTRIES:
                    for stale in [s for s, e in table.items() if e.expires_at <= now]:
                        del table[stale]
                table[slot] = entry
        return entry

    def invalidate(self, key_id: str | None = None) -> None:
        """Drop the cached keys of one conversation (by key_id), or all of them."""
        with self._lock:
            self._generation += 1
            if key_id is None:
                self._current.clear()
                self._by_id.clear()
                return
            self._current.pop(key_id, None)
            for dek_id in [d for d in self._by_id if d.key_id == key_id]:
                del self._by_id[dek_id]
