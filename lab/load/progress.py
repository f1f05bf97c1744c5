"""What a load run says while it runs: its phases, and once Locust runs, a live status.

More: docs/load-internals.md.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class LiveStatus:
    """A sample of a running load: seconds after t0 and the run's counts as of now."""

    elapsed_seconds: float
    total_seconds: float | None   # None: runs until stopped (the web UI)
    warmup_seconds: float = 0.0
    active: bool = True           # the web UI: a test is running (calls finished or in flight)
    calls: int = 0                # finished inside the measured window
    calls_per_second: float | None = None   # calls / measured seconds so far (the summary's achieved rate)
    requested_rate: float | None = None
    errors: int = 0
    outcomes: int = 0
    in_flight: int = 0
    late: int = 0                 # in flight at the window's end, finished after it: not achieved
    warmup_calls: int = 0
    loader_cpu_percent: float | None = None  # the busiest load process over its last interval, % of its core
    processes: int = 1

    @property
    def phase(self) -> str:
        if self.elapsed_seconds < 0:
            return "starting"
        if self.total_seconds is None and not self.active:
            return "idle"  # the web UI before a test starts, or between tests
        if self.elapsed_seconds < self.warmup_seconds:
            return "warmup"
        if self.total_seconds is not None and self.elapsed_seconds >= self.total_seconds:
            return "stopping"
        return "measured"


class LoadProgress:
    """Where a load run reports. Subclass and override; the base ignores everything."""

    def phase(self, text: str) -> None:
        pass

    def status(self, status: LiveStatus) -> None:
        pass

    def done(self) -> None:
        """The live status ends (before the summary and the audit)."""


NO_PROGRESS = LoadProgress()
