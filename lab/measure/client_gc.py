"""What the lab's own client processes do with Python's cyclic garbage collector (``client_gc``).

More: docs/measure-internals.md.
"""
from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

from lab.errors import ConfigError

CLIENT_GC_MODES = ("freeze", "default")
DEFAULT_CLIENT_GC = "freeze"
FREEZE_THRESHOLDS = (10_000, 50, 10)  # gc.set_threshold of ``freeze``: young every 10,000 allocations


def settle(mode: str) -> None:
    """Call when a process's set-up is done, before it measures (again after a later set-up
    phase, e.g. seeding): ``freeze`` collects what set-up left as garbage, freezes the rest and
    raises the thresholds; ``default`` does nothing (Python's own collector)."""
    if mode not in CLIENT_GC_MODES:
        raise ConfigError(f"client_gc must be one of {', '.join(CLIENT_GC_MODES)}, got {mode!r}", field="client_gc")
    if mode == "freeze":
        gc.collect()
        gc.freeze()
        gc.set_threshold(*FREEZE_THRESHOLDS)


@contextmanager
def restored() -> Iterator[None]:
    """The caller's collector as it was on entry once the block ends (returns or raises): its
    thresholds, and unfrozen when nothing was frozen on entry (objects a caller froze itself
    stay frozen: Python cannot unfreeze part of the permanent generation)."""
    thresholds, frozen = gc.get_threshold(), gc.get_freeze_count()
    try:
        yield
    finally:
        if not frozen:
            gc.unfreeze()
        gc.set_threshold(*thresholds)
