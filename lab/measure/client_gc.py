"""What the lab's own client processes do with Python's cyclic garbage collector (``client_gc``).

A bench or load process holds ~70,000 GC-tracked objects once set up (the driver's metadata,
prepared statements, numpy, Locust), and every full collection walks them all again (~50 ms)
although none of them ever becomes garbage; with Python's thresholds (700, 10, 10) the young
generations are collected every 700 allocations and their survivors walked again every ten.
The collector took a tenth of such a process's CPU (docs/measurements.md). ``freeze`` moves what set-up made into the
collector's permanent generation (``gc.collect(); gc.freeze()``) once set-up is done, so later
collections walk only what the measured calls allocate, and collects the youngest generation every
10,000 allocations (:data:`FREEZE_THRESHOLDS`) instead of 700 (each collection then walks more objects,
~10 ms on a loaded machine, but survivors are not walked again every ten collections); cycles the
calls make are still collected. ``default`` leaves Python's collector as it is.

A process-wide choice of the lab's own processes (``lab bench store``, ``lab bench load`` and its
plain client, the Locust workers of ``lab load``, the process of ``lab soak``, a notebook's kernel
while its testbed is open: lab.calibration.experiments.common.open_testbed), never the store's:
the store (lab.store) does not read it. It is the ``client_gc`` setting of :mod:`lab.cluster.services`
(``--client-gc``, ``LAB_CLIENT_GC``, the ``[services]`` table), applied the same way to both
sides of every comparison and named in the runs' environment blocks and summaries.

The library functions that settle (``run_bench``, ``run_outbox_bench``, ``run_load_bench``,
``run_soak``) can be called from any Python process (a notebook's kernel, a test session): each
runs inside :func:`restored`, so the caller's collector is as it was once the run returns or fails.
A process the lab owns whole (a Locust worker) settles without it.
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
