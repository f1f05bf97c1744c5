"""ScyllaDB: what a default install needs from the lab's CQL, and how it words traces and errors.

More: docs/cluster-internals.md.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from lab.cluster.dialect.dialect_interface import CHUNK_LENGTH_KB, Dialect, TraceCounts, cql_map
from lab.errors import InListTooLong, LabError, LwtUnavailable

TRACE_WRITE_PERIOD_SECONDS = 2.0
_TRACE_MARGIN_SECONDS = 0.5
_COUNT = r"(\d+) {what}\(s\) \((\d+) live, (\d+) dead\)"
_PAGE = re.compile(
    r"Page stats: " + _COUNT.format(what="partition") + ", " + _COUNT.format(what="static row") + ", "
    + _COUNT.format(what="clustering row") + r"(?:,| and) (\d+) range tombstone\(s\)"
    + r"(?: and " + _COUNT.format(what="cell") + ")?")
_SSTABLE = re.compile(r"^Reading (?:key|partition range) .* from sstable (\S+)\s*$")
_IN_LIMIT = re.compile(r"size of (partition|clustering)-key IN list or \1-key cartesian product of IN list (\d+) "
                       r"is greater than maximum (\d+)")
_LWT_TABLETS = "LWT is not yet supported with tablets"
_COMPRESSION = {
    "lz4": {"sstable_compression": "LZ4Compressor", "chunk_length_in_kb": str(CHUNK_LENGTH_KB)},
    "zstd": {"sstable_compression": "ZstdCompressor", "chunk_length_in_kb": str(CHUNK_LENGTH_KB)},
    "none": {"sstable_compression": ""},
}
_SELECT_TAIL = re.compile(r"\s+USING\s+TIMEOUT\s+\S+\s*$", re.I)


class ScyllaDialect(Dialect):
    name = "scylla"
    trace_settle_seconds = TRACE_WRITE_PERIOD_SECONDS + _TRACE_MARGIN_SECONDS
    in_limit_settings = ("max_clustering_key_restrictions_per_query", "max_partition_key_restrictions_per_query")

    def create_keyspace(self, keyspace: str, replication: Mapping[str, Any], *, tablets: bool = False) -> str:
        replication = dict(replication)
        if replication.get("class", "").rsplit(".", 1)[-1] == "SimpleStrategy":
            replication = {"class": "NetworkTopologyStrategy", "replication_factor": replication["replication_factor"]}
        return (f"CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = {cql_map(replication)} "
                f"AND tablets = {cql_map({'enabled': bool(tablets)})}")

    def compression(self, name: str) -> dict[str, str]:
        self._check_compression(name)
        return dict(_COMPRESSION[name])

    def expiring_table_options(self) -> tuple[str, ...]:
        return ("tombstone_gc = {'mode': 'timeout'}",)

    def sstable_read(self, select: str) -> str:
        text = select.rstrip().rstrip(";")
        if re.search(r"\bBYPASS\s+CACHE\b", text, re.I):
            return text
        tail = _SELECT_TAIL.search(text)
        if tail:
            return f"{text[:tail.start()]} BYPASS CACHE{tail.group(0)}"
        return f"{text} BYPASS CACHE"

    def trace_counts(self, descriptions: Iterable[str]) -> TraceCounts:
        rows = tombstones = 0
        seen = False
        sstables: set[str] = set()
        for text in descriptions:
            if m := _PAGE.search(text):
                g = [int(x) if x is not None else 0 for x in m.groups()]
                dead_partitions, static_live, static_dead, rows_live, rows_dead, range_tombstones = (
                    g[2], g[4], g[5], g[7], g[8], g[9])
                dead_cells = g[12] if m.group(11) is not None else 0
                rows += rows_live + static_live
                # dead cells are where null-bound columns show up: the same tombstones Cassandra counts
                tombstones += dead_partitions + static_dead + rows_dead + range_tombstones + dead_cells
                seen = True
            elif m := _SSTABLE.search(text):
                sstables.add(m.group(1))
        return TraceCounts(rows_read=rows, tombstones_read=tombstones, sstables_touched=len(sstables),
                           has_read_stats=seen)

    def translate_error(self, exc: BaseException, *, table: str | None = None) -> LabError | None:
        text = str(exc)
        if m := _IN_LIMIT.search(text):
            setting = f"max_{m.group(1)}_key_restrictions_per_query"
            return InListTooLong(
                f"{type(exc).__name__}: {text} (Scylla setting {setting}; the lab sends at most "
                f"the limit per request)", table=table, driver_error=type(exc).__name__, server="scylla",
                size=int(m.group(2)), limit=int(m.group(3)), setting=setting)
        if _LWT_TABLETS in text:
            return LwtUnavailable(
                f"{type(exc).__name__}: {text}. The lab's keyspaces need LWT (client_dedup): create them "
                "with tablets off (the lab's default, tablets = false) or run a Scylla version with the "
                "LWT_WITH_TABLETS feature", table=table, driver_error=type(exc).__name__, server="scylla")
        return None

    def rejects_statement(self, error: BaseException) -> bool:
        return _IN_LIMIT.search(str(error)) is not None
