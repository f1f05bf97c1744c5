"""Cluster admin adapters: flush, compaction, SSTable counts, disk bytes, server counters.

    admin_interface  ClusterAdmin (the interface), TableStats (bytes per replica), Replication, NodeCheck, TwcsCheck
    cassandra  CassandraAdmin: the JMX helper / nodetool over JMX, system_views, data files on disk
    scylla     ScyllaAdmin: Scylla's REST API (:10000) and Prometheus endpoint (:9180)
    jmx        JmxShell: the persistent JMX client behind CassandraAdmin (JmxShell.java)
    server_cpu server CPU time per node / shard: /proc of the embedded JVM, JMX ProcessCpuTime, Scylla's reactors
    disk       a table's bytes on disk per node (its files where local, else the adapter's total), peaks sampled

More: docs/cluster-internals.md.
"""
from __future__ import annotations

import importlib
from typing import Any

from lab.cluster.admin.admin_interface import ClusterAdmin, NodeCheck, Replication, ServerCounts, TableStats, TwcsCheck
from lab.cluster.config import ClusterConfig
from lab.errors import ConfigError

__all__ = ["ADMINS", "ClusterAdmin", "NodeCheck", "Replication", "ServerCounts", "TableStats", "TwcsCheck", "admin_for"]

ADMINS = {
    "cassandra": "lab.cluster.admin.cassandra:CassandraAdmin",
    "scylla": "lab.cluster.admin.scylla:ScyllaAdmin",
}


def admin_for(config: ClusterConfig, connection: Any, kind: str | None = None) -> ClusterAdmin:
    """The adapter named by ``kind`` / ``config.admin``, or the one matching the server."""
    kind = kind or config.admin
    if kind == "auto":
        kind = connection.server_kind()
    if kind not in ADMINS:
        raise ConfigError(f"unknown admin adapter {kind!r}; known: {', '.join(ADMINS)}", field="admin")
    module, cls = ADMINS[kind].split(":")
    return getattr(importlib.import_module(module), cls)(config, connection)
