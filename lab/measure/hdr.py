"""Latency in microseconds: an HdrHistogram per operation, interval logs, coordinated omission.

More: docs/measure-internals.md.
"""
from __future__ import annotations

import io
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO
from collections.abc import Iterable, Iterator, Mapping

from hdrh.histogram import HdrHistogram

from lab.measure.timing import NS_PER_US
from lab.measure.percentiles import LatencySummary, summarize_histogram

LOWEST_US = 1
HIGHEST_US = 600_000_000  # 10 minutes: above any request timeout, so nothing is clamped in practice
SIGNIFICANT_DIGITS = 3
KINDS = ("service", "corrected")
LOG_FORMAT_VERSION = "1.3"


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)


def clamp_us(value_us: float) -> int:
    """A latency as the histogram can hold it (>= 1 µs, <= HIGHEST_US)."""
    return int(min(max(math.ceil(value_us), LOWEST_US), HIGHEST_US))


def latencies_us(*, started_ns: int, ended_ns: int, due_ns: int | None = None) -> tuple[int, int | None]:
    """(service, corrected) in µs. Corrected is None in closed-loop mode (no schedule)."""
    service = clamp_us((ended_ns - started_ns) / NS_PER_US)
    if due_ns is None:
        return service, None
    # A call issued before its due time (clock jitter) is not faster than its service time.
    corrected = clamp_us((ended_ns - min(due_ns, started_ns)) / NS_PER_US)
    return service, corrected


# ---- per-operation recording -----------------------------------------------------------
@dataclass
class OpStats:
    """Totals of one operation since the start of the run (one process). A call ends ok, with an
    *outcome* (an answer the design defines that is not a success: ``lab.load.outcomes``), or
    with an error; all three are in the latency histograms."""

    service: HdrHistogram = field(default_factory=new_histogram)
    corrected: HdrHistogram = field(default_factory=new_histogram)
    ok: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    timeouts: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return self.ok + sum(self.errors.values()) + sum(self.outcomes.values())

    def record(self, service_us: int, corrected_us: int | None = None, *, error: str | None = None,
               timeout: bool = False, outcome: str | None = None) -> None:
        """One call: its latencies (µs, as :func:`latencies_us` gives them) and how it ended."""
        self.service.record_value(service_us)
        if corrected_us is not None:
            self.corrected.record_value(corrected_us)
        if outcome is not None:
            self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        elif error is None:
            self.ok += 1
        else:
            self.errors[error] = self.errors.get(error, 0) + 1
            self.timeouts += 1 if timeout else 0

    def merge(self, other: OpStats) -> None:
        self.service.add(other.service)
        self.corrected.add(other.corrected)
        self.ok += other.ok
        self.timeouts += other.timeouts
        for name, n in other.errors.items():
            self.errors[name] = self.errors.get(name, 0) + n
        for name, n in other.outcomes.items():
            self.outcomes[name] = self.outcomes.get(name, 0) + n

    def to_json(self) -> dict:
        return {"ok": self.ok, "errors": dict(self.errors), "timeouts": self.timeouts, "outcomes": dict(self.outcomes),
                "service": encode(self.service), "corrected": encode(self.corrected)}

    @classmethod
    def from_json(cls, data: Mapping) -> OpStats:
        return cls(service=decode(data["service"]), corrected=decode(data["corrected"]),
                   ok=int(data["ok"]), errors={k: int(v) for k, v in data["errors"].items()},
                   timeouts=int(data["timeouts"]), outcomes={k: int(v) for k, v in (data.get("outcomes") or {}).items()})


MEASURED = "measured"
LATE = "late"  # in flight at the end of the measured window: finished after it


class LatencyRecorder:
    """Per-operation histograms of one load process: the measured calls' totals, the current
    interval, the calls in flight at the window's end (``late``, apart), and the running sums
    the live timeline needs (``lab.load.live_counts``).

    Not thread-safe by design: one recorder per process, and under gevent every greenlet of a
    process records between two switches (no lock needed, none taken).
    """

    def __init__(self, *, fixed_rate: bool) -> None:
        self.fixed_rate = fixed_rate
        self.totals: dict[str, OpStats] = {}
        self.late: dict[str, OpStats] = {}
        self.warmup_calls = 0
        self.calls = 0             # measured calls recorded so far, and their latency sums (µs)
        self.service_sum_us = 0
        self.corrected_sum_us = 0
        self._interval: dict[str, OpStats] = {}

    def record(self, op: str, *, started_ns: int, ended_ns: int, due_ns: int | None = None,
               error: str | None = None, timeout: bool = False, outcome: str | None = None,
               book: str = MEASURED) -> tuple[int, int | None]:
        """Record one call; ``error`` is the exception's type name when it failed, ``outcome``
        the kind of a defined non-success answer. ``book``: measured (totals and the interval
        log) or late (in flight at the window's end: reported apart)."""
        service, corrected = latencies_us(started_ns=started_ns, ended_ns=ended_ns,
                                          due_ns=due_ns if self.fixed_rate else None)
        books = (self.totals, self._interval) if book == MEASURED else (self.late,)
        for b in books:
            stats = b.get(op)
            if stats is None:
                stats = b[op] = OpStats()
            stats.record(service, corrected, error=error, timeout=timeout, outcome=outcome)
        if book == MEASURED:
            self.calls += 1
            self.service_sum_us += service
            self.corrected_sum_us += corrected if corrected is not None else service
        return service, corrected

    def count_warmup(self) -> None:
        self.warmup_calls += 1

    def take_interval(self) -> dict[str, OpStats]:
        """The histograms since the last call, and start a new interval."""
        interval, self._interval = self._interval, {}
        return interval

    def totals_json(self) -> dict:
        return {op: stats.to_json() for op, stats in sorted(self.totals.items())}


# ---- encoding, merging, summaries ------------------------------------------------------
def encode(hist: HdrHistogram) -> str:
    return hist.encode().decode("ascii")


def decode(payload: str) -> HdrHistogram:
    hist = new_histogram()
    if payload:
        hist.decode_and_add(payload.encode("ascii"))
    return hist


def merge_stats(parts: Iterable[Mapping[str, OpStats]]) -> dict[str, OpStats]:
    """Per-operation totals of several processes added together."""
    out: dict[str, OpStats] = {}
    for part in parts:
        for op, stats in part.items():
            out.setdefault(op, OpStats()).merge(stats)
    return out


def percentiles_us(hist: HdrHistogram) -> dict[str, int | None]:
    """count, p50/p90/p99/p999, max and mean in µs (None when the histogram is empty), as JSON."""
    return summarize_histogram(hist).to_json()


@dataclass(frozen=True, kw_only=True)
class OperationSummary:
    """What a run reports of one operation: counts, rate, latencies in µs (service time, and
    from the due time in fixed-rate mode)."""

    count: int
    ok: int
    errors: int
    errors_by_type: Mapping[str, int]
    timeouts: int
    rate_per_second: float | None
    service_us: LatencySummary
    corrected_us: LatencySummary | None = None
    outcomes: Mapping[str, int] = field(default_factory=dict)  # defined non-success answers, by kind

    def to_json(self) -> dict:
        out = {"count": self.count, "ok": self.ok, "outcomes": dict(self.outcomes), "errors": self.errors,
               "errors_by_type": dict(self.errors_by_type), "timeouts": self.timeouts,
               "rate_per_second": self.rate_per_second, "service_us": self.service_us.to_json()}
        if self.corrected_us is not None:
            out["corrected_us"] = self.corrected_us.to_json()
        return out

    @classmethod
    def from_json(cls, data: Mapping) -> OperationSummary:
        corrected = data.get("corrected_us")
        return cls(count=data["count"], ok=data["ok"], errors=data["errors"],
                   errors_by_type=dict(data.get("errors_by_type", {})), timeouts=data.get("timeouts", 0),
                   rate_per_second=data.get("rate_per_second"), service_us=LatencySummary.from_json(data["service_us"]),
                   corrected_us=LatencySummary.from_json(corrected) if corrected is not None else None,
                   outcomes=dict(data.get("outcomes") or {}))


def summarize_op(s: OpStats, *, elapsed_seconds: float, fixed_rate: bool) -> OperationSummary:
    return OperationSummary(
        count=s.count, ok=s.ok, errors=sum(s.errors.values()), errors_by_type=dict(sorted(s.errors.items())),
        timeouts=s.timeouts, rate_per_second=round(s.count / elapsed_seconds, 2) if elapsed_seconds > 0 else None,
        service_us=summarize_histogram(s.service), corrected_us=summarize_histogram(s.corrected) if fixed_rate else None,
        outcomes=dict(sorted(s.outcomes.items())))


def summarize(stats: Mapping[str, OpStats], *, elapsed_seconds: float,
              fixed_rate: bool) -> dict[str, OperationSummary]:
    """The per-operation summary a run writes (latencies in µs, rates in calls/s)."""
    return {op: summarize_op(s, elapsed_seconds=elapsed_seconds, fixed_rate=fixed_rate)
            for op, s in sorted(stats.items())}


# ---- interval logs ---------------------------------------------------------------------
class IntervalLogWriter:
    """Writes one line per (operation, kind) per interval, tagged ``<op>.<kind>``."""

    def __init__(self, out: IO[str], *, start_time_s: float, comment: str = "") -> None:
        self._out = out
        self.start_time_s = start_time_s
        out.write(f"#[Histogram log format version {LOG_FORMAT_VERSION}]\n")
        if comment:
            out.write(f"#{comment}\n")
        out.write("#[values in microseconds; Interval_Max in milliseconds]\n")
        out.write(f"#[StartTime: {start_time_s:.3f} (seconds since epoch), "
                  f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(start_time_s))}]\n")
        out.write(f"#[BaseTime: {start_time_s:.3f} (seconds since epoch)]\n")
        out.write('"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"\n')

    def write_interval(self, interval: Mapping[str, OpStats], *, begin_s: float, end_s: float) -> None:
        rel = begin_s - self.start_time_s
        length = max(end_s - begin_s, 0.0)
        for op, stats in sorted(interval.items()):
            for kind in KINDS:
                hist = getattr(stats, kind)
                if hist.get_total_count() == 0:
                    continue
                self._out.write(f"Tag={op}.{kind},{rel:.3f},{length:.3f},"
                                f"{hist.get_max_value() / 1000.0:.3f},{encode(hist)}\n")
        self._out.flush()


@dataclass(frozen=True, kw_only=True)
class LogInterval:
    tag: str
    start_s: float  # relative to the log's BaseTime
    length_s: float
    histogram: HdrHistogram

    @property
    def op(self) -> str:
        return self.tag.rsplit(".", 1)[0]

    @property
    def kind(self) -> str:
        return self.tag.rsplit(".", 1)[1]


def read_interval_log(path: Path | str) -> Iterator[LogInterval]:
    with open(path, encoding="utf-8") as f:
        yield from parse_interval_log(f)


def parse_interval_log(f: IO[str] | str) -> Iterator[LogInterval]:
    if isinstance(f, str):
        f = io.StringIO(f)
    for line in f:
        if not line.startswith("Tag="):
            continue
        tag, start, length, _max, payload = line.rstrip("\n")[4:].split(",", 4)
        yield LogInterval(tag=tag, start_s=float(start), length_s=float(length), histogram=decode(payload))

