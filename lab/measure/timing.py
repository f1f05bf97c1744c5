"""The one clock of every measurement.

More: docs/measure-internals.md.
"""
from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

NS_PER_US = 1_000
NS_PER_MS = 1_000_000
NS_PER_SECOND = 1_000_000_000
MS_PER_SECOND = 1_000
US_PER_SECOND = 1_000_000

now_ns = time.perf_counter_ns
wall_seconds = time.time


def utc_now_iso() -> str:
    """``2026-09-01T12:00:00+00:00``: when a run started or finished, for the reader."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


@dataclass(frozen=True, slots=True)
class Timing:
    """One timed call: its start and end on :func:`now_ns`, and the error type if it failed."""

    started_ns: int
    ended_ns: int
    error: str | None = None

    @property
    def elapsed_ns(self) -> int:
        return self.ended_ns - self.started_ns

    @property
    def elapsed_ms(self) -> float:
        return self.elapsed_ns / NS_PER_MS


def timed(fn: Callable[[], T], *, errors: bool = False) -> tuple[T | None, Timing]:
    """``(fn(), Timing)``. With ``errors`` an exception is a result, not a raise: the result is
    None and ``Timing.error`` names the exception's type (a failed call is a data point)."""
    started = now_ns()
    if not errors:
        result = fn()
        return result, Timing(started, now_ns())
    try:
        result = fn()
    except Exception as exc:
        return None, Timing(started, now_ns(), type(exc).__name__)
    return result, Timing(started, now_ns())


class Stopwatch:
    """Time since it was started, on the same clock: the phases of a run. As a context manager
    it stops at the end of the block (``with Stopwatch() as sw: ...`` then ``sw.seconds()``)."""

    def __init__(self) -> None:
        self._start = now_ns()
        self._end: int | None = None

    def restart(self) -> None:
        self._start, self._end = now_ns(), None

    @property
    def elapsed_ns(self) -> int:
        return (self._end if self._end is not None else now_ns()) - self._start

    def seconds(self, digits: int | None = None) -> float:
        value = self.elapsed_ns / NS_PER_SECOND
        return round(value, digits) if digits is not None else value

    def __enter__(self) -> Stopwatch:
        self.restart()
        return self

    def __exit__(self, *_: Any) -> None:
        self._end = now_ns()
