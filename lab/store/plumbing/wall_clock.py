"""The store's one clock: wall-clock milliseconds since the Unix epoch.

More: docs/store-internals.md.
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
