"""TWCS's window arithmetic: SSTables after each flush under Cassandra 5.0's TimeWindowCompactionStrategy
rules (and ScyllaDB's, the same for these counts), and after fully expired SSTables are dropped.

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

MIN_THRESHOLD = 4   # compaction's min_threshold: the newest window compacts at this many SSTables
MAX_THRESHOLD = 32  # max_threshold: at most this many SSTables in one compaction


@dataclass
class _SSTable:
    window: int
    size: int
    max_expiry: float  # wall-clock second after which every row is expired (inf: never)


def _twcs_step(tables: list[_SSTable], *, now: float | None = None) -> list[_SSTable]:
    """Run TWCS background compactions until none applies (Cassandra 5.0 rules)."""
    if now is not None:  # fully expired SSTables are dropped first (gc_grace 0)
        tables = [t for t in tables if not t.max_expiry < now]
    while True:
        if not tables:
            return tables
        highest = max(t.window for t in tables)
        merged = False
        for w in sorted({t.window for t in tables}, reverse=True):
            bucket = [t for t in tables if t.window == w]
            if (w == highest and len(bucket) >= MIN_THRESHOLD) or (w < highest and len(bucket) >= 2):
                chosen = sorted(bucket, key=lambda t: t.size)[:MAX_THRESHOLD]
                rest = [t for t in tables if not any(t is c for c in chosen)]
                tables = rest + [_SSTable(window=w, size=sum(c.size for c in chosen),
                                          max_expiry=max(c.max_expiry for c in chosen))]
                merged = True
                break
        if not merged:
            return tables


def simulate_twcs(flush_windows: list[int], *, expiring: list[bool] | None = None,
                  expire_at: float = 0.0) -> list[int]:
    """SSTable count after each flush (with compactions settled); ``expiring[i]``: flush i holds
    only short-TTL rows. Counts are taken before ``expire_at``; see :func:`count_after_expiry`."""
    tables: list[_SSTable] = []
    counts = []
    for i, w in enumerate(flush_windows):
        expiry = expire_at if expiring and expiring[i] else math.inf
        tables = _twcs_step(tables + [_SSTable(window=w, size=1, max_expiry=expiry)])
        counts.append(len(tables))
    return counts


def count_after_expiry(flush_windows: list[int], expiring: list[bool], trigger_window: int | None) -> int:
    """SSTables left once the short TTL passed and a trigger flush (``trigger_window``; None:
    no write reached this compaction group, so no compaction check ran) was compacted."""
    tables: list[_SSTable] = []
    for w, e in zip(flush_windows, expiring):
        tables = _twcs_step(tables + [_SSTable(window=w, size=1, max_expiry=0.0 if e else math.inf)])
    if trigger_window is None:
        return len(tables)
    return len(_twcs_step(tables + [_SSTable(window=trigger_window, size=1, max_expiry=math.inf)], now=1.0))


def per_group(flush_windows: list[int], flush_groups: list[set], group: Any) -> list[int]:
    """The windows of the flushes that made an SSTable in ``group`` (the ones it got rows in)."""
    return [w for w, groups in zip(flush_windows, flush_groups) if group in groups]


def predicted_count(flush_windows: list[int], flush_groups: list[set]) -> int:
    """SSTables now, summed over the compaction groups that received rows."""
    groups = set().union(*flush_groups) if flush_groups else set()
    return sum(simulate_twcs(per_group(flush_windows, flush_groups, g))[-1] for g in groups)


