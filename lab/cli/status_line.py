"""Live progress of long commands on stderr (stdout keeps the result).

On a terminal the status line is rewritten in place once a second; in a log (not a TTY) a
status line is printed every :data:`LOG_STATUS_SECONDS`, so a CI log shows the run moving
without a line per second. Numbers are formatted by :mod:`lab.results.units`.
"""
from __future__ import annotations

import sys
import time
from typing import IO

import click

from lab.load.progress import LiveStatus, LoadProgress
from lab.results import units
from lab.measure import Stopwatch

LOG_STATUS_SECONDS = 10.0


def status_text(s: LiveStatus) -> str:
    """One status line: phase, elapsed / total, then what the summary will count: calls finished
    inside the measured window and their rate (against the requested one), errors and outcomes
    apart, calls in flight (not achieved), the busiest load process's CPU."""
    elapsed = max(0.0, s.elapsed_seconds)
    if s.total_seconds is not None:
        elapsed = min(elapsed, s.total_seconds)
    when = (f"{units.seconds(elapsed)} / {units.seconds(s.total_seconds)}" if s.total_seconds is not None
            else units.seconds(elapsed))
    parts = [f"{s.phase:<9}", when]
    if s.phase == "warmup":
        parts.append(f"{units.count(s.warmup_calls)} warmup calls (not measured)")
    else:
        parts.append(f"{units.count(s.calls)} calls")
        if s.calls_per_second is not None:
            rate = units.rate(s.calls_per_second, " calls/s")
            parts.append(rate + (f" of {units.rate(s.requested_rate)}" if s.requested_rate else ""))
    parts.append(f"{units.count(s.errors)} errors")
    if s.outcomes:
        parts.append(f"{units.count(s.outcomes)} outcomes")
    if s.in_flight:
        parts.append(f"{units.count(s.in_flight)} in flight")
    if s.late:
        parts.append(f"{units.count(s.late)} finished after the end (not counted)")
    if s.loader_cpu_percent is not None:
        parts.append(f"loader CPU {units.fmt(s.loader_cpu_percent, 2)}%"
                     + (" (busiest process)" if s.processes > 1 else ""))
    if s.phase == "stopping":
        parts.append("(no new calls; in-flight calls finish, the stores close)")
    return "  " + "  ".join(parts)


class ConsoleProgress(LoadProgress):
    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self._line = False
        self._last_log = 0.0
        self._watch = Stopwatch()  # the run's elapsed time in each phase line

    def _clear(self) -> None:
        if self._line:
            click.echo("\r\033[K", nl=False, file=self.stream)
            self._line = False

    def phase(self, text: str) -> None:
        self._clear()
        click.echo(f"[{self._watch.seconds():7.1f} s] {text}", file=self.stream)

    def status(self, status: LiveStatus) -> None:
        text = status_text(status)
        if self.tty:
            click.echo("\r\033[K" + text, nl=False, file=self.stream)
            self._line = True
        elif time.monotonic() - self._last_log >= LOG_STATUS_SECONDS:
            click.echo(text, file=self.stream)
            self._last_log = time.monotonic()

    def done(self) -> None:
        self._clear()
