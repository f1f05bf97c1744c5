"""Run a query with tracing and read what the server did: rows, tombstones, SSTables.

Cassandra and ScyllaDB word their trace events differently; both are parsed loosely.
Cassandra: ``Read 12 live rows and 0 tombstone cells``, ``Merged data from memtables and
2 sstables``, ``Skipped 0/3 non-slice-intersecting sstables``. ScyllaDB: ``Page stats: 1
partition(s), 0 static row(s) (0 live, 0 dead), 12 clustering row(s) (12 live, 0 dead) and 0
range tombstone(s)`` and ``Reading key ... from sstable <path>``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from collections.abc import Iterable, Sequence

from cassandra import ConsistencyLevel

_C_READ = re.compile(r"Read (\d+) live rows? and (\d+) tombstone cells?", re.I)
_C_MERGED = re.compile(r"Merged data from memtables and (\d+) sstables?", re.I)
_C_SKIPPED = re.compile(r"Skipped (\d+)/(\d+) non-slice-intersecting sstables?", re.I)
_C_PARTITION_INDEX = re.compile(r"Partition index (?:with \d+ entries )?found for sstable (\d+)", re.I)
_S_PAGE = re.compile(r"Page stats:.*?(\d+) clustering row\(s\) \((\d+) live, (\d+) dead\)"
                     r"(?: and (\d+) range tombstone\(s\))?", re.I)
_S_ROWS = re.compile(r"(\d+) rows? read|querying.*?(\d+) rows", re.I)
_S_SSTABLE = re.compile(r"from sstable[s]? ([^\s,]+)", re.I)
_S_SSTABLE_COUNT = re.compile(r"Reading .* from (\d+) sstables?", re.I)


@dataclass(frozen=True, kw_only=True)
class TraceSummary:
    """What one traced request read, summed over the replicas that served it."""

    rows_read: int
    tombstones_read: int
    sstables_touched: int
    duration_us: int
    events: tuple[str, ...]


def summarize(descriptions: Iterable[str], duration_us: int = 0) -> TraceSummary:
    """Parse trace event texts of either server into a summary."""
    events = tuple(descriptions)
    rows = tombs = sstables = 0
    sstable_names: set[str] = set()
    for text in events:
        if m := _C_READ.search(text):
            rows += int(m.group(1))
            tombs += int(m.group(2))
        elif m := _S_PAGE.search(text):
            rows += int(m.group(2))
            tombs += int(m.group(3)) + int(m.group(4) or 0)
        if m := _C_MERGED.search(text):
            sstables += int(m.group(1))
        if m := _S_SSTABLE.search(text):
            sstable_names.add(m.group(1))
        elif m := _S_SSTABLE_COUNT.search(text):
            sstables += int(m.group(1))
    sstables += len(sstable_names)
    return TraceSummary(rows_read=rows, tombstones_read=tombs, sstables_touched=sstables,
                        duration_us=duration_us, events=events)


def traced(connection: Any, stmt: Any, params: Sequence[Any] | None = None, *,
           max_wait_seconds: float = 10.0) -> tuple[list[Any], TraceSummary]:
    """Execute with tracing on; returns the rows and the parsed trace.

    Trace events are written asynchronously by the replicas, so wait for the session's
    ``duration`` and then re-read the events until their count settles.
    """
    import time

    result = connection.execute(stmt, params, trace=True)
    rows = list(result)
    trace = result.get_query_trace(max_wait_sec=max_wait_seconds)
    deadline = time.monotonic() + max_wait_seconds
    seen = -1
    while time.monotonic() < deadline:
        events = list(trace.events or ())
        if len(events) == seen and any(_C_READ.search(e.description) or _S_PAGE.search(e.description)
                                       for e in events):
            break
        seen = len(events)
        time.sleep(0.3)
        trace.populate(max_wait=max_wait_seconds, query_cl=ConsistencyLevel.ONE)
    duration = int(trace.duration.total_seconds() * 1e6) if trace.duration else 0
    return rows, summarize((e.description for e in trace.events or ()), duration)
