"""Run a query with tracing and read what the server did: rows, tombstones, SSTables.

More: docs/cluster-internals.md.
"""
from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from cassandra import ConsistencyLevel

from lab.cluster.dialect import Dialect

TRACE_WAIT_SECONDS = 10.0
_POLL_SECONDS = 0.3


@dataclass(frozen=True, kw_only=True)
class TraceSummary:
    """What one traced request read, summed over the replicas that served it."""

    rows_read: int
    tombstones_read: int
    sstables_touched: int
    duration_us: int
    events: tuple[str, ...]


def summarize(descriptions: Iterable[str], *, dialect: Dialect, duration_us: int = 0) -> TraceSummary:
    """Parse the trace event texts of ``dialect``'s server into a summary."""
    events = tuple(descriptions)
    counts = dialect.trace_counts(events)
    return TraceSummary(rows_read=counts.rows_read, tombstones_read=counts.tombstones_read,
                        sstables_touched=counts.sstables_touched, duration_us=duration_us, events=events)


def traced(connection: Any, stmt: Any, params: Sequence[Any] | None = None, *,
           max_wait_seconds: float = TRACE_WAIT_SECONDS) -> tuple[list[Any], TraceSummary]:
    """Execute with tracing on; returns the rows and the parsed trace.

    Waits for the session's ``duration`` (the coordinator's record), then re-reads the events
    until a replica's read statistics are there and their count has not changed for
    ``connection.dialect.trace_settle_seconds`` (or ``max_wait_seconds`` passed).
    """
    dialect: Dialect = connection.dialect
    result = connection.execute(stmt, params, trace=True)
    rows = list(result)
    trace = result.get_query_trace(max_wait_sec=max_wait_seconds)
    deadline = time.monotonic() + max_wait_seconds
    seen, changed_at = -1, time.monotonic()
    while time.monotonic() < deadline:
        events = list(trace.events or ())
        now = time.monotonic()
        if len(events) != seen:
            seen, changed_at = len(events), now
        elif (now - changed_at >= dialect.trace_settle_seconds
              and dialect.trace_counts(e.description for e in events).has_read_stats):
            break
        time.sleep(_POLL_SECONDS)
        trace.populate(max_wait=max_wait_seconds, query_cl=ConsistencyLevel.ONE)
    duration = int(trace.duration.total_seconds() * 1e6) if trace.duration else 0
    return rows, summarize((e.description for e in trace.events or ()), dialect=dialect, duration_us=duration)
