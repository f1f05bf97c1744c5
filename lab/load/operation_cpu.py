"""Loader CPU per operation: what one store call of each kind costs the load process.

More: docs/load-internals.md.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lab.measure.timing import MS_PER_SECOND

__all__ = ["APPORTIONED_NOTE", "FUTURE", "GEVENT", "THREAD", "OperationCpu", "apportion"]

APPORTIONED_NOTE = ("caller CPU per call measured per operation (path thread: the native thread that ran the call; "
                    "path future: the greenlet's submission only, the call's steps run on the driver's loop thread); "
                    "the process's other CPU (driver I/O thread, head writer, Locust) shared out in proportion to "
                    "the callers' CPU, and not measured (null) per operation when an operation of several ran on "
                    "the future path")
THREAD = "thread"  # the store call ran in a native thread of the pool, its CPU timed there
FUTURE = "future"  # the store's future, submitted from the greenlet and waited on through the hub
GEVENT = "gevent"  # a patched process: the call on the gevent loop, its caller CPU not measured


@dataclass(frozen=True, kw_only=True)
class OperationCpu:
    """One operation's loader CPU over a measured window."""

    calls: int
    caller_cpu_ms_per_call: float           # measured: the thread that ran the call, or the future's submission
    loader_cpu_ms_per_call: float | None    # caller CPU + its share of the process's other CPU; None: not measured
    calls_per_loader_core_second: float | None
    path: str = THREAD                      # THREAD | FUTURE: where the call ran, what its caller CPU covers

    def to_json(self) -> dict[str, Any]:
        return {"calls": self.calls, "path": self.path, "caller_cpu_ms_per_call": round(self.caller_cpu_ms_per_call, 4),
                "loader_cpu_ms_per_call": None if self.loader_cpu_ms_per_call is None
                else round(self.loader_cpu_ms_per_call, 4),
                "calls_per_loader_core_second": None if self.calls_per_loader_core_second is None
                else round(self.calls_per_loader_core_second, 1)}


def apportion(calls: Mapping[str, int], caller_cpu_seconds: Mapping[str, float],
              process_cpu_seconds: float | None, paths: Mapping[str, str] | None = None) -> dict[str, OperationCpu]:
    """Per operation with calls: its caller CPU per call, and with the process's CPU over the same
    window (None: not sampled) the loader CPU per call, the process's CPU beyond the callers'
    shared in proportion to each operation's caller CPU (never less than the caller CPU itself).

    ``paths`` (operation -> THREAD | FUTURE, THREAD when absent): a future's caller CPU is its
    submission only, its steps' CPU lands on the driver's loop thread with every other call's
    I/O, so no share in proportion to the callers is that operation's. With a future among
    several operations the loader CPU per call is None (not measured) for every one; a single
    operation gets the process's CPU over its calls, whatever its path."""
    paths = paths or {}
    ops = {op: n for op, n in calls.items() if n > 0 and op in caller_cpu_seconds}
    callers = sum(caller_cpu_seconds[op] for op in ops)
    scale = None
    shareable = len(ops) == 1 or all(paths.get(op, THREAD) == THREAD for op in ops)
    if process_cpu_seconds is not None and process_cpu_seconds > 0 and callers > 0 and shareable:
        scale = max(1.0, process_cpu_seconds / callers)
    out = {}
    for op, n in ops.items():
        caller_ms = MS_PER_SECOND * caller_cpu_seconds[op] / n
        loader_ms = None if scale is None else caller_ms * scale
        out[op] = OperationCpu(calls=n, caller_cpu_ms_per_call=caller_ms, loader_cpu_ms_per_call=loader_ms,
                               calls_per_loader_core_second=MS_PER_SECOND / loader_ms if loader_ms else None,
                               path=paths.get(op, THREAD))
    return out
