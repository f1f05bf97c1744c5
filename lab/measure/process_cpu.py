"""This process's own CPU over a stretch of wall time: is the client what limits a measurement?

More: docs/measure-internals.md.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from lab.measure.timing import NS_PER_SECOND, now_ns


def process_cpu_seconds() -> float:
    """This process's CPU time in seconds, every thread (``time.process_time``): differences only."""
    return time.process_time()


def thread_cpu_ns() -> int:
    """The calling thread's CPU time in ns (``time.thread_time_ns``): differences only."""
    return time.thread_time_ns()


@dataclass(frozen=True, kw_only=True)
class CpuReading:
    cpu_seconds: float
    wall_seconds: float

    @property
    def percent_of_core(self) -> float | None:
        return 100.0 * self.cpu_seconds / self.wall_seconds if self.wall_seconds > 0 else None


class CpuMeter:
    """``with CpuMeter() as m: ...`` then ``m.reading``; or ``start()`` / ``stop()``."""

    def __init__(self) -> None:
        self._cpu = process_cpu_seconds()
        self._wall = now_ns()
        self.reading: CpuReading | None = None

    def start(self) -> CpuMeter:
        self._cpu, self._wall, self.reading = process_cpu_seconds(), now_ns(), None
        return self

    def stop(self) -> CpuReading:
        self.reading = CpuReading(cpu_seconds=process_cpu_seconds() - self._cpu,
                                  wall_seconds=(now_ns() - self._wall) / NS_PER_SECOND)
        return self.reading

    def __enter__(self) -> CpuMeter:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()
