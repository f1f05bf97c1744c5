"""Cassandra 5.0 admin: a persistent JMX helper (``jmx``), nodetool as its fallback, per-node
read/write counts from ``system_views``, and each table's folder (its files) on local nodes.

JMX endpoints: the embedded nodes the lab started (each on 127.0.0.1 at its own JMX port), else
every contact point at ``config.jmx_port``.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from lab.cluster.admin.admin_interface import ClusterAdmin, NodeCheck, ServerCounts, TableStats, TwcsCheck
from lab.cluster.admin.jmx import JmxShell
from lab.cluster.admin.server_cpu import CpuReading, proc_cpu_seconds
from lab.cluster.config import ClusterConfig
from lab.cluster.embedded.node import EmbeddedCluster, NodeOptions
from lab.cluster.embedded.process import is_ours
from lab.errors import AdminError, NodeError
from lab.measure.timing import NS_PER_SECOND

OBSOLETE_FILES_TIMEOUT_SECONDS = 30.0
OBSOLETE_FILES_POLL_SECONDS = 0.1


class CassandraAdmin(ClusterAdmin):
    """Cassandra 5.0 through nodetool (JMX) and system_views; data files when local."""

    name = "cassandra"

    def __init__(self, config: ClusterConfig, connection: Any) -> None:
        super().__init__(config, connection)

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
        # Persistent JMX helpers (lab.cluster.admin.jmx), one per endpoint; nodetool is the fallback.
        self._shells: dict[tuple[str, int], Any] = {}
        self._shell_failed: set[tuple[str, int]] = set()

    def _shell(self, host: str, port: int) -> Any:
        """The endpoint's JMX helper, or None (no JDK compiler, JMX refused): use nodetool."""

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

    def compactions_running(self, keyspace: str | None = None) -> int | None:
        total = 0
        for _, host, port, _n in self._live_targets():
            shell = self._shell(host, port)
            if shell is None:
                return None
            c = shell.compactions(keyspace)
            total += c["pending"] + c["active"]
        return total

    def twcs_checks(self, keyspace: str, table: str) -> list[TwcsCheck] | None:
        out = []
        for address, host, port, _n in self._live_targets():
            shell = self._shell(host, port)
            if shell is None:  # nodetool has no task estimate per table: the base class's fallback
                return None
            out.append(TwcsCheck(node=address, **shell.twcs(keyspace, table)))
        return out

    def check_nodes(self) -> list[NodeCheck]:
        checks = []
        for address, host, port, _n in self._live_targets():
            detail, fix = "JMX answers (JMX helper)", ""
            ok = self._shell(host, port) is not None
            if not ok:  # the helper needs javac; nodetool needs only the jars
                try:
                    self._nodetool(host, port, "version")
                    ok, detail = True, "JMX answers (nodetool; no JMX helper)"
                except (AdminError, NodeError, OSError) as exc:
                    detail = f"no JMX at {host}:{port} ({str(exc)[:200]})"
                    fix = ("Cassandra's JMX listens on 127.0.0.1 unless LOCAL_JMX=no in cassandra-env.sh: open it, "
                           "give its port with --jmx-port, or run the lab on the node")
            checks.append(NodeCheck(node=address, endpoint=f"{host}:{port}", ok=ok, detail=detail, fix=fix))
        return checks

    def close(self) -> None:
        for shell in self._shells.values():
            shell.close()
        self._shells.clear()

    def _nodetool(self, host: str, port: int, *args: str) -> str:
        if not self._embedded.lib_dir.joinpath(".complete").exists():
            self._embedded.resolve_jars()
        return self._embedded.nodetool(*args, host=host, port=port)

    def _live_targets(self):
        return [t for t in self._targets if t[3] is None or is_ours(t[3].pid, t[3].directory)]

    def _on_every_node(self, op: str, nodetool: str, keyspace: str, tables: tuple[str, ...]) -> None:
        """One table operation on every live node: the JMX helper's ``op`` when it runs, else ``nodetool``."""
        for _, host, port, _n in self._live_targets():
            shell = self._shell(host, port)
            if shell is not None:
                getattr(shell, op)(keyspace, tables)
            else:
                self._nodetool(host, port, nodetool, keyspace, *tables)

    def flush(self, keyspace: str, table: str | None = None) -> None:
        self._on_every_node("flush", "flush", keyspace, (table,) if table else ())

    def nudge_compactions(self, keyspace: str, table: str | None = None) -> None:
        self._on_every_node("nudge", "enableautocompaction", keyspace, (table,) if table else ())

    def compact(self, keyspace: str, table: str) -> None:
        self._on_every_node("compact", "compact", keyspace, (table,))
        self._await_obsolete_files_removed(keyspace, table)

    def _await_obsolete_files_removed(self, keyspace: str, table: str,
                                      timeout: float = OBSOLETE_FILES_TIMEOUT_SECONDS) -> None:
        """Compacted-away SSTables are deleted asynchronously after the compaction returns;
        wait until the files on disk match the live count, so both views agree afterwards."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            files = self.data_files(keyspace, table)
            if files is None or len(files) <= self.table_stats(keyspace, table).sstable_count:
                return
            time.sleep(OBSOLETE_FILES_POLL_SECONDS)

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
        return TableStats.from_nodes(keyspace, table, per_node,
                                     replicas=self.replication(keyspace).replicas_among(len(per_node)))

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

    def cpu_readings(self) -> list[Any]:
        """The JVM's CPU time per node: ``/proc/<pid>/stat`` of an embedded node the lab
        started (its recorded PID), else JMX ``ProcessCpuTime`` through the JMX helper."""

        out = []
        for address, host, port, node in self._live_targets():
            if node is not None:
                out.append(CpuReading(node=address, cpu_seconds=proc_cpu_seconds(node.pid), source="proc"))
                continue
            shell = self._shell(host, port)
            if shell is None:
                raise AdminError(f"no JMX helper for {host}:{port}: cannot read the server's CPU time (a JDK with "
                                 "javac is needed, and JMX reachable)", host=host, port=port)
            out.append(CpuReading(node=address, cpu_seconds=shell.process_cpu_ns() / NS_PER_SECOND, source="jmx"))
        return out

    def guardrail_thresholds(self, guardrail: str, *, warn: int | None = None,
                             fail: int | None = None) -> dict[str, tuple[int, int]]:
        """A guardrail's (warn, fail) thresholds on each node, -1 when off (``guardrail`` as the
        ``GuardrailsMBean`` spells it, e.g. ``PartitionKeysInSelect`` for
        ``partition_keys_in_select_*_threshold``); with ``warn`` and ``fail``, set on every node
        first. Live (JMX), not persisted: a restart reads cassandra.yaml again."""
        out = {}
        for address, host, port, _n in self._live_targets():
            shell = self._shell(host, port)
            if shell is None:  # nodetool 5.0 has no guardrail command
                raise AdminError(f"no JMX helper for {host}:{port}: cannot read or set guardrail {guardrail} (a JDK "
                                 "with javac is needed, and JMX reachable)", host=host, port=port)
            out[address] = shell.guardrail_threshold(guardrail, warn=warn, fail=fail)
        return out

    def data_files(self, keyspace: str, table: str) -> list[Path] | None:
        folders = self.table_directories(keyspace, table)
        if folders is None:
            return None
        return sorted(p for dirs in folders.values() for d in dirs for p in d.glob("*-Data.db"))

    def table_directories(self, keyspace: str, table: str) -> dict[str, list[Path]] | None:
        """The table's folders (``<data>/<keyspace>/<table>-<id>/``) on each embedded node the lab
        started, by node address; None for nodes it cannot read (not started by the lab)."""
        nodes = [(t[0], t[3]) for t in self._live_targets() if t[3] is not None]
        if not nodes:
            return None
        return {address: sorted((Path(n.directory) / "data" / "data" / keyspace).glob(f"{table}-*"))
                for address, n in nodes}


def _shell_stats(raw: dict) -> dict:
    """The JMX helper's metrics in the shape of the tablestats fields above."""
    ints = ("sstable_count", "live_disk_bytes", "total_disk_bytes", "local_reads", "local_writes",
            "partitions_estimate", "max_partition_bytes", "mean_partition_bytes")
    out = {k: int(raw[k]) for k in ints}
    out["compression_ratio"] = float(raw["compression_ratio"])
    return out
