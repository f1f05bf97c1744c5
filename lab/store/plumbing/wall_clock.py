"""The store's one clock: wall-clock milliseconds since the Unix epoch.

Every time the store writes (created_at, updated_at, the remaining-TTL arithmetic of late
writes, the millisecond inside a message_id, the timestamps of its local state files) comes
from :func:`wall_clock_ms`, handed to the paths as ``StoreContext.clock_ms``. One source
means one notion of "now": a remaining TTL computed by the archiver and the created_at the
commit path stamped can never disagree because two helpers rounded differently.

It is the wall clock, not a monotonic one, because these values are stored and compared
with the server's own time (TTL expiry, ``USING TIMESTAMP``). Code that measures durations
(cache expiry, backoff, benchmarks) uses ``time.monotonic`` / ``perf_counter`` instead.
"""
from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["Clock", "MS_PER_SECOND", "US_PER_MS", "wall_clock_ms"]

Clock = Callable[[], int]  # () -> milliseconds since the epoch
MS_PER_SECOND = 1000
US_PER_MS = 1000
_NS_PER_MS = 1_000_000


def wall_clock_ms() -> int:
    """Now, in integer milliseconds (``time_ns`` based: no float rounding at 2**53)."""
    return time.time_ns() // _NS_PER_MS
