"""Cluster admin adapter: flush, compaction, SSTable counts, disk bytes, server counters.

A small interface with two implementations, picked by name from :data:`ADMINS` (nothing is
imported until chosen) or automatically from the server the lab is connected to:

- :class:`CassandraAdmin`: nodetool from the embedded node's own classpath over local JMX
  (``tablestats -F json``), ``*-Data.db`` files on disk as a cross-check for local nodes,
  and per-node read/write counts from ``system_views``.
- :class:`ScyllaAdmin`: the same numbers through ScyllaDB's REST API (:10000) and its
  Prometheus endpoint (:9180).
"""
from __future__ import annotations

import importlib
import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.cluster.config import ClusterConfig
from lab.errors import AdminError, ConfigError, NodeError

OBSOLETE_FILES_TIMEOUT_SECONDS = 30.0

ADMINS = {
    "cassandra": "lab.cluster.admin:CassandraAdmin",
    "scylla": "lab.cluster.admin:ScyllaAdmin",
}


@dataclass(frozen=True, kw_only=True)
class TableStats:
    """One table's numbers, summed over the nodes the adapter can see."""

    keyspace: str
    table: str
    sstable_count: int
    live_disk_bytes: int
    total_disk_bytes: int
    local_reads: int
    local_writes: int
    per_node: tuple[dict, ...] = ()


@dataclass(frozen=True, kw_only=True)
class ServerCounts:
    reads: int
    writes: int


class ClusterAdmin(ABC):
    """What the lab needs from a cluster beyond CQL."""

    name = "base"

    def __init__(self, config: ClusterConfig, connection: Any) -> None:
        self.config = config
        self.connection = connection

    @abstractmethod
    def flush(self, keyspace: str, table: str | None = None) -> None: ...

    @abstractmethod
    def compact(self, keyspace: str, table: str) -> None: ...

    @abstractmethod
    def table_stats(self, keyspace: str, table: str) -> TableStats: ...

    @abstractmethod
    def server_counts(self, keyspace: str, table: str) -> ServerCounts:
        """Replica-side read and write counts of one table, summed over nodes."""

    def sstable_count(self, keyspace: str, table: str) -> int:
        return self.table_stats(keyspace, table).sstable_count

    def live_disk_bytes(self, keyspace: str, table: str) -> int:
        return self.table_stats(keyspace, table).live_disk_bytes

    def data_files(self, keyspace: str, table: str) -> list[Path] | None:
        """SSTable Data files on local disk, or None when the nodes are not local."""
        return None

    def server_version(self) -> str:
        return self.connection.server_version()

    def compactions_running(self) -> int | None:
        """Compactions pending or running on the nodes, or None when the adapter cannot tell."""
        return None

    def wait_for_compactions(self, timeout: float = 120.0, poll: float = 0.1) -> bool:
        """Block until no compaction is pending or running (True) or ``timeout`` passes (False).
        Adapters that cannot tell return True at once."""
        import time

        deadline = time.monotonic() + timeout
        while True:
            n = self.compactions_running()
            if not n:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll)

    def close(self) -> None:
        """Release helper processes the adapter started (none by default)."""


def admin_for(config: ClusterConfig, connection: Any, kind: str | None = None) -> ClusterAdmin:
    """The adapter named by ``kind`` / ``config.admin``, or the one matching the server."""
    kind = kind or config.admin
    if kind == "auto":
        kind = connection.server_kind()
    if kind not in ADMINS:
        raise ConfigError(f"unknown admin adapter {kind!r}; known: {', '.join(ADMINS)}", field="admin")
    module, cls = ADMINS[kind].split(":")
    return getattr(importlib.import_module(module), cls)(config, connection)


# ---------------------------------------------------------------------------------------
class CassandraAdmin(ClusterAdmin):
    """Cassandra 5.0 through nodetool (JMX) and system_views; data files when local."""

    name = "cassandra"

    def __init__(self, config: ClusterConfig, connection: Any) -> None:
        super().__init__(config, connection)
        from lab.cluster.embedded.node import EmbeddedCluster, NodeOptions

        self._embedded = EmbeddedCluster(NodeOptions(home=config.lab_home))
        state = self._embedded.read_state()
        local = {n.address: n for n in (state.nodes if state else ())}
        # JMX endpoints: the embedded nodes we started, else each contact point at config.jmx_port
        self._targets: list[tuple[str, str, int, Any]] = []
        if local and set(config.contact_points) & set(local):
            for n in local.values():
                self._targets.append((n.address, "127.0.0.1", n.jmx_port, n))
        else:
            for cp in config.contact_points:
                self._targets.append((cp, cp, config.jmx_port, None))
        # Persistent JMX helpers (lab.jmx), one per endpoint; nodetool is the fallback.
        self._shells: dict[tuple[str, int], Any] = {}
        self._shell_failed: set[tuple[str, int]] = set()

    def _shell(self, host: str, port: int) -> Any:
        """The endpoint's JMX helper, or None (no JDK compiler, JMX refused): use nodetool."""
        from lab.cluster.admin.jmx import JmxShell

        key = (host, port)
        shell = self._shells.get(key)
        if shell is not None and shell.alive:
            return shell
        if key in self._shell_failed:
            return None
        try:
            shell = JmxShell(host, port, work_dir=Path(self.config.lab_home) / "jmxshell",
                             java=self._embedded.find_java())
        except (AdminError, OSError, NodeError):
            self._shell_failed.add(key)
            return None
        self._shells[key] = shell
        return shell

    def compactions_running(self) -> int | None:
        total = 0
        for _, host, port, _n in self._live_targets():
            shell = self._shell(host, port)
            if shell is None:
                return None
            c = shell.compactions()
            total += c["pending"] + c["active"]
        return total

    def close(self) -> None:
        for shell in self._shells.values():
            shell.close()
        self._shells.clear()

    def _nodetool(self, host: str, port: int, *args: str) -> str:
        if not self._embedded.lib_dir.joinpath(".complete").exists():
            self._embedded.resolve_jars()
        return self._embedded.nodetool(*args, host=host, port=port)

    def _live_targets(self):
        from lab.cluster.embedded.node import _is_our_jvm
        return [t for t in self._targets if t[3] is None or _is_our_jvm(t[3].pid, t[3].directory)]

    def flush(self, keyspace: str, table: str | None = None) -> None:
        for _, host, port, _n in self._live_targets():
            shell = self._shell(host, port)
            if shell is not None:
                shell.flush(keyspace, (table,) if table else ())
            else:
                self._nodetool(host, port, "flush", keyspace, *([table] if table else []))

    def compact(self, keyspace: str, table: str) -> None:
        for _, host, port, _n in self._live_targets():
            shell = self._shell(host, port)
            if shell is not None:
                shell.compact(keyspace, (table,))
            else:
                self._nodetool(host, port, "compact", keyspace, table)
        self._await_obsolete_files_removed(keyspace, table)

    def _await_obsolete_files_removed(self, keyspace: str, table: str,
                                      timeout: float = OBSOLETE_FILES_TIMEOUT_SECONDS) -> None:
        """Compacted-away SSTables are deleted asynchronously after the compaction returns;
        wait until the files on disk match the live count, so both views agree afterwards."""
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            files = self.data_files(keyspace, table)
            if files is None or len(files) <= self.table_stats(keyspace, table).sstable_count:
                return
            time.sleep(0.1)

    def table_stats(self, keyspace: str, table: str) -> TableStats:
        per_node = []
        for address, host, port, _n in self._live_targets():
            shell = self._shell(host, port)
            if shell is not None:
                per_node.append({"node": address, **_shell_stats(shell.stats(keyspace, table))})
                continue
            raw = self._nodetool(host, port, "tablestats", "-F", "json", f"{keyspace}.{table}")
            try:
                t = json.loads(raw[raw.index("{"):])[keyspace]["tables"][table]
            except (ValueError, KeyError) as exc:
                raise AdminError(f"unexpected tablestats output for {keyspace}.{table}: {raw[:300]}",
                                 keyspace=keyspace, table=table) from exc
            per_node.append({
                "node": address,
                "sstable_count": int(t["sstable_count"]),
                "live_disk_bytes": int(t["space_used_live"]),
                "total_disk_bytes": int(t["space_used_total"]),
                "local_reads": int(t["local_read_count"]),
                "local_writes": int(t["local_write_count"]),
                "compression_ratio": float(t.get("sstable_compression_ratio") or -1),
                "partitions_estimate": int(t.get("number_of_partitions_estimate") or 0),
                "max_partition_bytes": int(t.get("compacted_partition_maximum_bytes") or 0),
                "mean_partition_bytes": int(t.get("compacted_partition_mean_bytes") or 0),
            })
        return TableStats(keyspace=keyspace, table=table,
                          sstable_count=sum(p["sstable_count"] for p in per_node),
                          live_disk_bytes=sum(p["live_disk_bytes"] for p in per_node),
                          total_disk_bytes=sum(p["total_disk_bytes"] for p in per_node),
                          local_reads=sum(p["local_reads"] for p in per_node),
                          local_writes=sum(p["local_writes"] for p in per_node),
                          per_node=tuple(per_node))

    def server_counts(self, keyspace: str, table: str) -> ServerCounts:
        reads = writes = 0
        session = self.connection.session
        for host in self.connection.hosts():
            if not host.is_up:
                continue
            r = session.execute("SELECT count FROM system_views.local_read_latency "
                                "WHERE keyspace_name = %s AND table_name = %s", (keyspace, table), host=host).one()
            w = session.execute("SELECT count FROM system_views.local_write_latency "
                                "WHERE keyspace_name = %s AND table_name = %s", (keyspace, table), host=host).one()
            reads += int(r[0]) if r else 0
            writes += int(w[0]) if w else 0
        return ServerCounts(reads=reads, writes=writes)

    def data_files(self, keyspace: str, table: str) -> list[Path] | None:
        files: list[Path] = []
        nodes = [t[3] for t in self._live_targets() if t[3] is not None]
        if not nodes:
            return None
        for n in nodes:
            for table_dir in (Path(n.directory) / "data" / "data" / keyspace).glob(f"{table}-*"):
                files += [p for p in table_dir.glob("*-Data.db")]
        return sorted(files)


def _shell_stats(raw: dict) -> dict:
    """The JMX helper's metrics in the shape of the tablestats fields above."""
    ints = ("sstable_count", "live_disk_bytes", "total_disk_bytes", "local_reads", "local_writes",
            "partitions_estimate", "max_partition_bytes", "mean_partition_bytes")
    out = {k: int(raw[k]) for k in ints}
    out["compression_ratio"] = float(raw["compression_ratio"])
    return out


# ---------------------------------------------------------------------------------------
class ScyllaAdmin(ClusterAdmin):
    """ScyllaDB through its REST API (:10000) and Prometheus metrics (:9180)."""

    name = "scylla"

    def _hosts(self) -> list[str]:
        hosts = [h.address for h in self.connection.hosts() if h.is_up]
        return hosts or list(self.config.contact_points)

    def _rest(self, method: str, host: str, path: str, params: dict | None = None) -> Any:
        import requests

        url = f"http://{host}:{self.config.rest_port}{path}"
        try:
            resp = requests.request(method, url, params=params, timeout=600)
        except requests.RequestException as exc:
            raise AdminError(f"Scylla REST {method} {url} failed: {exc}", url=url) from exc
        if resp.status_code >= 300:
            raise AdminError(f"Scylla REST {method} {url} -> {resp.status_code}: {resp.text[:300]}", url=url)
        return resp.json() if resp.text else None

    def flush(self, keyspace: str, table: str | None = None) -> None:
        for h in self._hosts():
            self._rest("POST", h, f"/storage_service/keyspace_flush/{keyspace}", {"cf": table} if table else None)

    def compact(self, keyspace: str, table: str) -> None:
        for h in self._hosts():
            self._rest("POST", h, f"/column_family/major_compaction/{keyspace}:{table}")

    def table_stats(self, keyspace: str, table: str) -> TableStats:
        per_node = []
        for h in self._hosts():
            cf = f"{keyspace}:{table}"
            per_node.append({
                "node": h,
                "sstable_count": int(self._rest("GET", h, f"/column_family/metrics/live_ss_table_count/{cf}")),
                "live_disk_bytes": int(self._rest("GET", h, f"/column_family/metrics/live_disk_space_used/{cf}")),
                "total_disk_bytes": int(self._rest("GET", h, f"/column_family/metrics/total_disk_space_used/{cf}")),
                "local_reads": int(self._rest("GET", h, f"/column_family/metrics/read/{cf}")),
                "local_writes": int(self._rest("GET", h, f"/column_family/metrics/write/{cf}")),
            })
        return TableStats(keyspace=keyspace, table=table,
                          sstable_count=sum(p["sstable_count"] for p in per_node),
                          live_disk_bytes=sum(p["live_disk_bytes"] for p in per_node),
                          total_disk_bytes=sum(p["total_disk_bytes"] for p in per_node),
                          local_reads=sum(p["local_reads"] for p in per_node),
                          local_writes=sum(p["local_writes"] for p in per_node),
                          per_node=tuple(per_node))

    def compactions_running(self) -> int | None:
        total = 0
        for h in self._hosts():
            total += int(self._rest("GET", h, "/compaction_manager/metrics/pending_tasks") or 0)
        return total

    def server_counts(self, keyspace: str, table: str) -> ServerCounts:
        stats = self.table_stats(keyspace, table)
        return ServerCounts(reads=stats.local_reads, writes=stats.local_writes)

    def prometheus(self, host: str | None = None) -> dict[str, float]:
        """Scylla's Prometheus metrics as ``{'name{labels}': value}`` (for tombstone reads etc.)."""
        import requests

        host = host or self._hosts()[0]
        url = f"http://{host}:{self.config.prometheus_port}/metrics"
        try:
            text = requests.get(url, timeout=30).text
        except requests.RequestException as exc:
            raise AdminError(f"Scylla Prometheus {url} failed: {exc}", url=url) from exc
        return parse_prometheus(text)


def parse_prometheus(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        try:
            out[name] = float(value)
        except ValueError:
            continue
    return out
