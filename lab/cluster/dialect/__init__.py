"""How the two servers differ, in one place: the lab's CQL option text, traces and errors.

    dialect_interface  Dialect (the interface), TraceCounts, CQL literal helpers
    cassandra  CassandraDialect: Apache Cassandra 5.0, the embedded node
    scylla     ScyllaDialect: ScyllaDB (tablets off for LWT, sstable_compression, BYPASS CACHE,
               tombstone_gc for expiring scratch tables, the IN-limit error, 2 s trace writes)

More: docs/cluster-internals.md.
"""
from __future__ import annotations

import importlib

from lab.cluster.dialect.dialect_interface import Dialect, TraceCounts
from lab.errors import ConfigError

__all__ = ["DIALECTS", "Dialect", "TraceCounts", "dialect_named"]

DIALECTS = {
    "cassandra": "lab.cluster.dialect.cassandra:CassandraDialect",
    "scylla": "lab.cluster.dialect.scylla:ScyllaDialect",
}


def dialect_named(name: str) -> Dialect:
    if name not in DIALECTS:
        raise ConfigError(f"unknown server dialect {name!r}; known: {', '.join(DIALECTS)}", field="dialect")
    module, cls = DIALECTS[name].split(":")
    return getattr(importlib.import_module(module), cls)()
