"""What a load run says while it runs: its phases, and once Locust runs, a live status.

The runner reports to a :class:`LoadProgress` (no-op by default; the CLI prints it):
``phase(text)`` at each step (schema, seeding, start-up, running, stopping, summary, audit)
and ``status(LiveStatus)`` about once a second while Locust runs. The live numbers come
from Locust's own stats history (``locust_stats_history.csv``, written once a second by
the standalone or master process): calls and failures in total and per second, over every
phase (warmup included). The measured numbers of the run are in ``summary.json``.
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

STATS_HISTORY_FILE = "locust_stats_history.csv"
_TAIL_BYTES = 64 * 1024  # the last rows are enough: one Aggregated row per second


@dataclass(frozen=True, kw_only=True)
class LiveStatus:
    """A sample of a running load: seconds after t0 and Locust's running totals."""

    elapsed_seconds: float
    total_seconds: float | None   # None: runs until stopped (the web UI)
    warmup_seconds: float = 0.0
    users: int | None = None
    calls: int = 0
    errors: int = 0
    calls_per_second: float | None = None
    errors_per_second: float | None = None

    @property
    def phase(self) -> str:
        if self.elapsed_seconds < 0:
            return "starting"
        if self.total_seconds is None and not self.users:
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


def read_live_totals(load_dir: Path) -> dict[str, float | int | None] | None:
    """Locust's last ``Aggregated`` row: users, calls, errors, calls/s, errors/s (None before the first)."""
    path = Path(load_dir) / STATS_HISTORY_FILE
    try:
        with open(path, "rb") as f:
            header = f.readline().decode("utf-8", "replace")
            f.seek(0, io.SEEK_END)
            size = f.tell()
            f.seek(max(len(header), size - _TAIL_BYTES))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    lines = tail.splitlines()
    if size > _TAIL_BYTES + len(header) and lines:
        lines = lines[1:]  # the first line of the tail is cut
    row = None
    for r in csv.DictReader([header.strip(), *lines]):
        if r.get("Name") == "Aggregated" and (r.get("Total Request Count") or "").isdigit():
            row = r
    if row is None:
        return None

    def num(key: str) -> float | None:
        try:
            return float(row[key])
        except (KeyError, TypeError, ValueError):
            return None

    users = num("User Count")
    return {"users": int(users) if users is not None else None, "calls": int(row["Total Request Count"]),
            "errors": int(num("Total Failure Count") or 0), "calls_per_second": num("Requests/s"),
            "errors_per_second": num("Failures/s")}
