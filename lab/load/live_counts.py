"""The one source of a load run's counts: what each load process has finished, as of now.

More: docs/load-internals.md.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.measure.hdr import OpStats, merge_stats

TOTALS_DIR = "totals"
EDGE_SECONDS = 0.25  # timeline points are taken on interval edges, give or take the event loop's delay


@dataclass(frozen=True, kw_only=True)
class TimelinePoint:
    """A process's state at one interval edge (seconds after t0)."""

    t: float
    cpu_seconds: float
    calls: int             # measured calls finished so far (all operations)
    service_us: float      # sum of their service latencies
    corrected_us: float    # sum of their corrected latencies (= service in a closed loop)
    started: int | None = None  # calls started so far, any phase (None: a snapshot of an older run)

    def to_json(self) -> list[float]:
        row = [round(self.t, 3), round(self.cpu_seconds, 4), self.calls, round(self.service_us),
               round(self.corrected_us)]
        return row if self.started is None else [*row, self.started]

    @classmethod
    def from_json(cls, row: Sequence[float]) -> TimelinePoint:
        t, cpu, calls, service, corrected, *rest = row
        return cls(t=float(t), cpu_seconds=float(cpu), calls=int(calls), service_us=float(service),
                   corrected_us=float(corrected), started=int(rest[0]) if rest else None)


@dataclass(frozen=True, kw_only=True)
class ProcessSnapshot:
    """One load process's counts as of ``written_at`` (its ``totals/<worker>.json``)."""

    worker: str
    pid: int
    written_at: float                       # wall clock of the process
    t0: float                               # the run's start on the process's clock
    final: bool                             # the process has ended: these are its totals
    measured_seconds: float
    operations: Mapping[str, OpStats]
    late: Mapping[str, OpStats] = field(default_factory=dict)
    warmup_calls: int = 0
    in_flight: int = 0
    timeline: tuple[TimelinePoint, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)  # acks, driver, reactor, alerts, requests, machine

    def to_json(self) -> dict[str, Any]:
        return {"worker": self.worker, "pid": self.pid, "written_at": self.written_at, "t0": self.t0,
                "final": self.final, "measured_seconds": round(self.measured_seconds, 3),
                "totals": {op: s.to_json() for op, s in sorted(self.operations.items())},
                "late": {op: s.to_json() for op, s in sorted(self.late.items())},
                "warmup_calls": self.warmup_calls, "in_flight": self.in_flight,
                "timeline": [p.to_json() for p in self.timeline], **dict(self.extra)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProcessSnapshot:
        known = {"worker", "pid", "written_at", "t0", "final", "measured_seconds", "totals", "late", "warmup_calls",
                 "in_flight", "timeline"}
        return cls(worker=data["worker"], pid=int(data.get("pid", 0)), written_at=float(data.get("written_at", 0.0)),
                   t0=float(data.get("t0") or 0.0), final=bool(data.get("final", True)),
                   measured_seconds=float(data.get("measured_seconds") or 0.0),
                   operations={op: OpStats.from_json(v) for op, v in (data.get("totals") or {}).items()},
                   late={op: OpStats.from_json(v) for op, v in (data.get("late") or {}).items()},
                   warmup_calls=int(data.get("warmup_calls", 0)), in_flight=int(data.get("in_flight", 0)),
                   timeline=tuple(TimelinePoint.from_json(r) for r in data.get("timeline", ())),
                   extra={k: v for k, v in data.items() if k not in known})

    @property
    def calls(self) -> int:
        return sum(s.count for s in self.operations.values())

    def cpu_percent(self, start_s: float, end_s: float) -> float | None:
        """Mean CPU of this process over [start_s, end_s] (seconds after t0), % of one core;
        None when its timeline does not cover at least one interval of it."""
        pts = [p for p in self.timeline if start_s - EDGE_SECONDS <= p.t <= end_s + EDGE_SECONDS]
        if len(pts) < 2 or pts[-1].t - pts[0].t <= 0:
            return None
        return 100.0 * (pts[-1].cpu_seconds - pts[0].cpu_seconds) / (pts[-1].t - pts[0].t)

    def cpu_percent_max(self, start_s: float, end_s: float) -> float | None:
        """The highest one-interval CPU of the process inside [start_s, end_s], % of one core."""
        pts = [p for p in self.timeline if start_s - EDGE_SECONDS <= p.t <= end_s + EDGE_SECONDS]
        rates = [100.0 * (b.cpu_seconds - a.cpu_seconds) / (b.t - a.t) for a, b in zip(pts, pts[1:]) if b.t > a.t]
        return max(rates) if rates else None

    def last_cpu_percent(self) -> float | None:
        """CPU over the process's last interval (the live figure)."""
        if len(self.timeline) < 2:
            return None
        a, b = self.timeline[-2], self.timeline[-1]
        return 100.0 * (b.cpu_seconds - a.cpu_seconds) / (b.t - a.t) if b.t > a.t else None


@dataclass(frozen=True, kw_only=True)
class LiveCounts:
    """Every load process's snapshot, merged: the counts a run reports, live or at its end."""

    processes: tuple[ProcessSnapshot, ...] = ()

    @property
    def operations(self) -> dict[str, OpStats]:
        return merge_stats(p.operations for p in self.processes)

    @property
    def late(self) -> dict[str, OpStats]:
        return merge_stats(p.late for p in self.processes)

    @property
    def all_operations(self) -> OpStats:
        out = OpStats()
        for s in self.operations.values():
            out.merge(s)
        return out

    @property
    def calls(self) -> int:
        return sum(p.calls for p in self.processes)

    @property
    def errors(self) -> int:
        return sum(sum(s.errors.values()) for p in self.processes for s in p.operations.values())

    @property
    def outcomes(self) -> int:
        return sum(sum(s.outcomes.values()) for p in self.processes for s in p.operations.values())

    @property
    def late_calls(self) -> int:
        return sum(s.count for p in self.processes for s in p.late.values())

    @property
    def warmup_calls(self) -> int:
        return sum(p.warmup_calls for p in self.processes)

    @property
    def in_flight(self) -> int:
        return sum(p.in_flight for p in self.processes if not p.final)

    @property
    def measured_seconds(self) -> float:
        return max((p.measured_seconds for p in self.processes), default=0.0)

    @property
    def final(self) -> bool:
        return bool(self.processes) and all(p.final for p in self.processes)

    def achieved_rate(self) -> float | None:
        """Calls finished inside the window per second of it: each process's calls over its
        own measured seconds, summed (None before any process has measured a moment)."""
        rates = [p.calls / p.measured_seconds for p in self.processes if p.measured_seconds > 0]
        return sum(rates) if rates else None

    def cpu_percent_by_process(self, start_s: float, end_s: float) -> dict[str, float | None]:
        return {p.worker: p.cpu_percent(start_s, end_s) for p in self.processes}

    def cpu_seconds(self, start_s: float, end_s: float) -> float | None:
        """CPU seconds all load processes used over the stretch (None if none covers it)."""
        total, any_ = 0.0, False
        for p in self.processes:
            pct = p.cpu_percent(start_s, end_s)
            if pct is not None:
                pts = [q for q in p.timeline if start_s - EDGE_SECONDS <= q.t <= end_s + EDGE_SECONDS]
                total += pts[-1].cpu_seconds - pts[0].cpu_seconds
                any_ = True
        return total if any_ else None

    def started_calls(self, start_s: float, end_s: float) -> int | None:
        """Calls the load processes started in [start_s, end_s] (from their timelines); None when
        a process's timeline does not count them (an older run)."""
        total = 0
        for p in self.processes:
            pts = [q for q in p.timeline if start_s - EDGE_SECONDS <= q.t <= end_s + EDGE_SECONDS]
            if len(pts) < 2:
                continue
            if pts[0].started is None or pts[-1].started is None:
                return None
            total += pts[-1].started - pts[0].started
        return total

    def cpu_total(self, start_s: float, end_s: float) -> tuple[int, float | None, float | None]:
        """All load processes together over the stretch, in % of one core: (intervals, mean, the
        highest one-interval total)."""
        per: dict[float, float] = {}
        for p in self.processes:
            pts = [q for q in p.timeline if start_s - EDGE_SECONDS <= q.t <= end_s + EDGE_SECONDS]
            for a, b in zip(pts, pts[1:]):
                if b.t > a.t:
                    key = round(b.t)
                    per[key] = per.get(key, 0.0) + 100.0 * (b.cpu_seconds - a.cpu_seconds) / (b.t - a.t)
        means = [m for m in (p.cpu_percent(start_s, end_s) for p in self.processes) if m is not None]
        return len(per), (sum(means) if means else None), (max(per.values()) if per else None)

    def window(self, start_s: float, end_s: float) -> tuple[int, float | None, list[tuple[float, float]]]:
        """Calls finished in [start_s, end_s] (from the timelines), the loader CPU seconds
        spent, and the schedule lag per interval: (seconds after ``start_s``, mean corrected
        minus mean service latency in ms of the calls that interval finished)."""
        calls, lag = 0, {}
        for p in self.processes:
            pts = [q for q in p.timeline if start_s - EDGE_SECONDS <= q.t <= end_s + EDGE_SECONDS]
            if len(pts) >= 2:
                calls += pts[-1].calls - pts[0].calls
            for a, b in zip(pts, pts[1:]):
                n = b.calls - a.calls
                if n > 0:
                    key = round(b.t - start_s, 1)
                    acc = lag.setdefault(key, [0, 0.0])
                    acc[0] += n
                    acc[1] += (b.corrected_us - a.corrected_us) - (b.service_us - a.service_us)
        series = [(t, acc[1] / acc[0] / 1000.0) for t, acc in sorted(lag.items()) if acc[0] > 0]
        return calls, self.cpu_seconds(start_s, end_s), series


def read_snapshot(path: Path) -> ProcessSnapshot | None:
    try:
        return ProcessSnapshot.from_json(json.loads(Path(path).read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None  # not there yet, or being replaced: the next poll reads it


def read_counts(load_dir: Path | str, *, final_only: bool = False) -> LiveCounts:
    """Every process's latest snapshot under ``load_dir/totals``."""
    snaps = [read_snapshot(p) for p in sorted((Path(load_dir) / TOTALS_DIR).glob("*.json"))]
    return LiveCounts(processes=tuple(s for s in snaps if s is not None and (s.final or not final_only)))

