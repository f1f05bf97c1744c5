"""Apache Cassandra 5.0 (the embedded node): the lab's CQL as it always was.

More: docs/cluster-internals.md.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from lab.cluster.dialect.dialect_interface import CHUNK_LENGTH_KB, Dialect, TraceCounts, cql_map
from lab.errors import ConfigError, InListTooLong, LabError

_READ = re.compile(r"Read (\d+) live rows? and (\d+) tombstone cells?", re.I)
_MERGED = re.compile(r"Merged data from memtables and (\d+) sstables?", re.I)
_IN_LIMIT = (
    ("in_select_cartesian_product_fail_threshold",
     re.compile(r"cartesian product of the IN restrictions on \S+ produces (\d+) values, "
                r"this exceeds fail threshold of (\d+)")),
    ("partition_keys_in_select_fail_threshold",
     re.compile(r"partition keys in IN clause on table \S+, number of partition keys (\d+) "
                r"exceeds fail threshold of (\d+)")),
)
_COMPRESSION = {
    "lz4": {"class": "LZ4Compressor", "chunk_length_in_kb": str(CHUNK_LENGTH_KB)},
    "zstd": {"class": "ZstdCompressor", "chunk_length_in_kb": str(CHUNK_LENGTH_KB)},
    "none": {"enabled": "false"},
}


class CassandraDialect(Dialect):
    name = "cassandra"
    trace_settle_seconds = 0.3
    in_limit_settings = ("partition_keys_in_select_fail_threshold", "partition_keys_in_select_warn_threshold",
                         "in_select_cartesian_product_fail_threshold", "in_select_cartesian_product_warn_threshold")

    def create_keyspace(self, keyspace: str, replication: Mapping[str, Any], *, tablets: bool = False) -> str:
        if tablets:
            raise ConfigError("tablets are a ScyllaDB feature: Cassandra keyspaces have none (set tablets = false)",
                              field="tablets")
        return f"CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = {cql_map(replication)}"

    def compression(self, name: str) -> dict[str, str]:
        self._check_compression(name)
        return dict(_COMPRESSION[name])

    def trace_counts(self, descriptions: Iterable[str]) -> TraceCounts:
        rows = tombstones = sstables = 0
        seen = False
        for text in descriptions:
            if m := _READ.search(text):
                rows += int(m.group(1))
                tombstones += int(m.group(2))
                seen = True
            if m := _MERGED.search(text):
                sstables += int(m.group(1))
        return TraceCounts(rows_read=rows, tombstones_read=tombstones, sstables_touched=sstables, has_read_stats=seen)

    def translate_error(self, exc: BaseException, *, table: str | None = None) -> LabError | None:
        text = str(exc)
        for setting, pattern in _IN_LIMIT:
            if m := pattern.search(text):
                return InListTooLong(
                    f"{type(exc).__name__}: {text} (Cassandra guardrail {setting})", table=table,
                    driver_error=type(exc).__name__, server="cassandra", size=int(m.group(1)),
                    limit=int(m.group(2)), setting=setting)
        return None
