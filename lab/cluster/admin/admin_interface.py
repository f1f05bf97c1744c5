"""What the lab needs from a cluster beyond CQL, whatever serves it: the base class and the
frozen results (table numbers, server counters) both adapters return.

Bytes on disk are summed over the nodes an adapter reads; on a cluster with RF > 1 every row is
stored RF times, so per-row figures use :attr:`TableStats.live_disk_bytes_per_replica`: the sum
divided by the replicas of each row among the nodes summed (:class:`Replication`).
"""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.cluster.config import ClusterConfig
from lab.errors import AdminError

COMPACTION_POLL_SECONDS = 0.1
COMPACTION_WAIT_SECONDS = 120.0
TWCS_RECHECK_SECONDS = 2.0   # a TWCS table whose last check missed SSTables, nothing queued: ask again
TWCS_BUCKETS_MAX = 128       # Cassandra reports at most this many windows per table


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
    replicas: float = 1.0  # copies of each row among the nodes summed (Replication.replicas_among)

    @classmethod
    def from_nodes(cls, keyspace: str, table: str, per_node: list[dict], *, replicas: float = 1.0) -> TableStats:
        """The sums of per-node numbers (each dict has the five counters and the node)."""
        totals = {k: sum(p[k] for p in per_node) for k in
                  ("sstable_count", "live_disk_bytes", "total_disk_bytes", "local_reads", "local_writes")}
        return cls(keyspace=keyspace, table=table, per_node=tuple(per_node), replicas=replicas, **totals)

    @property
    def live_disk_bytes_per_replica(self) -> float:
        """Live bytes of one copy of the table's rows: what b_row divides by the rows written."""
        return self.live_disk_bytes / self.replicas


@dataclass(frozen=True, kw_only=True)
class Replication:
    """A keyspace's replication factor per datacenter and the ring's nodes per datacenter."""

    keyspace: str
    factors: dict[str, int]      # datacenter -> RF ("*": SimpleStrategy, whole ring)
    ring_nodes: dict[str, int]   # datacenter -> nodes

    @property
    def total_nodes(self) -> int:
        return sum(self.ring_nodes.values())

    @property
    def copies(self) -> int:
        """Copies of each row in the cluster: RF per datacenter, at most that DC's nodes."""
        if "*" in self.factors:
            return min(self.factors["*"], self.total_nodes)
        return sum(min(rf, self.ring_nodes.get(dc, 0)) for dc, rf in self.factors.items())

    def replicas_among(self, nodes_summed: int) -> float:
        """Copies of each row among ``nodes_summed`` of the ring's nodes. Exact when every node
        is summed; for a part of the ring it assumes even token ownership (the embedded
        cluster's evenly spaced tokens, or vnodes)."""
        if nodes_summed <= 0 or self.copies == 0:
            return 1.0
        return self.copies * min(nodes_summed, self.total_nodes) / self.total_nodes


def replication_of(connection: Any, keyspace: str) -> Replication:
    """The keyspace's replication as the server stores it (``system_schema.keyspaces``) and the
    nodes of the ring as the driver sees them (up or down)."""
    row = connection.execute("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s",
                             (keyspace,)).one()
    if row is None:
        raise AdminError(f"keyspace {keyspace} does not exist", keyspace=keyspace)
    options = dict(row[0])
    strategy = options.pop("class", "").rsplit(".", 1)[-1]
    ring: dict[str, int] = {}
    for host in connection.hosts():
        ring[host.datacenter or "?"] = ring.get(host.datacenter or "?", 0) + 1
    if strategy == "SimpleStrategy":
        factors = {"*": int(options.get("replication_factor", 1))}
    elif strategy == "NetworkTopologyStrategy":
        factors = {dc: int(rf) for dc, rf in options.items() if str(rf).isdigit()}
    else:  # LocalStrategy / EverywhereStrategy: a copy on every node
        factors = {dc: n for dc, n in ring.items()}
    return Replication(keyspace=keyspace, factors=factors, ring_nodes=ring)


@dataclass(frozen=True, kw_only=True)
class TwcsCheck:
    """One node's view of one TWCS table: its live SSTables; the SSTables per window (newest
    first) and the task estimate its strategy computed at its last background check; the
    compactions of the table running now. Cassandra updates the windows and the estimate only
    when it runs that check, not when a flush adds an SSTable."""

    node: str
    live: int
    pending: int
    active: int
    buckets: tuple[int, ...] | None   # None: not a TWCS table

    @property
    def settled(self) -> bool:
        """The last check saw every live SSTable and found nothing to compact, and no compaction
        runs: no compaction can start until a flush (or an expired SSTable) changes the table.
        An estimate left from a check that chose a compaction, or windows that miss SSTables a
        flush or a compaction made since, say the check that decides is still to run."""
        if self.active or self.pending:
            return False
        if self.live == 0:
            return True
        return (self.buckets is not None and len(self.buckets) < TWCS_BUCKETS_MAX
                and sum(self.buckets) == self.live)


@dataclass(frozen=True, kw_only=True)
class NodeCheck:
    """Whether the adapter reaches one node's admin endpoint (JMX, REST), and why not."""

    node: str
    endpoint: str
    ok: bool
    detail: str
    fix: str = ""


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

    def table_directories(self, keyspace: str, table: str) -> dict[str, list[Path]] | None:
        """Node -> the table's folders on it, for nodes whose data folder the lab can read
        (:mod:`lab.cluster.admin.disk` sums their files); None when it reaches no such node."""
        return None

    def server_version(self) -> str:
        return self.connection.server_version()

    def check_nodes(self) -> list[NodeCheck]:
        """One check per node the adapter talks to (``lab preflight``)."""
        return []

    def replication(self, keyspace: str) -> Replication:
        return replication_of(self.connection, keyspace)

    def shards_per_node(self) -> dict[str, int]:
        """Shards (compaction groups of a vnodes table) of every node: 1 on Cassandra."""
        return {str(h.address): self.connection.shards(h) for h in self.connection.hosts()}

    def nudge_compactions(self, keyspace: str, table: str | None = None) -> None:
        """Ask the nodes to look for background compactions now: a fully expired TWCS SSTable
        is dropped only when the strategy is asked for its next task (after a flush or a
        compaction, or at the node's own poll, once a minute on Cassandra). Nothing by default."""

    def compactions_running(self, keyspace: str | None = None) -> int | None:
        """Compactions pending or running on the nodes (in ``keyspace`` only, when given), or
        None when the adapter cannot tell."""
        return None

    def wait_for_compactions(self, timeout: float = COMPACTION_WAIT_SECONDS,
                             poll: float = COMPACTION_POLL_SECONDS, *, keyspace: str | None = None) -> bool:
        """Block until no compaction is pending or running (True) or ``timeout`` passes (False);
        ``keyspace`` scopes the wait (other tables' compactions do not count). Adapters that
        cannot tell return True at once."""
        deadline = time.monotonic() + timeout
        while True:
            n = self.compactions_running(keyspace)
            if not n:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll)

    def twcs_checks(self, keyspace: str, table: str) -> list[TwcsCheck] | None:
        """Each node's :class:`TwcsCheck` of a TWCS table, or None when the adapter cannot tell."""
        return None

    def wait_for_twcs_settled(self, keyspace: str, tables: list[str], *, timeout: float = COMPACTION_WAIT_SECONDS,
                              poll: float = COMPACTION_POLL_SECONDS) -> bool:
        """Block until every node's TWCS strategy of each table has checked all its live SSTables
        and has nothing left to compact (True), or ``timeout`` passes (False). A flush returns
        before the compaction check it queues has run, and until it runs no compaction is pending
        or running: :meth:`wait_for_compactions` can return before it. A table whose last check
        missed SSTables with nothing pending (Cassandra skips a check requested while one runs)
        is nudged every ``TWCS_RECHECK_SECONDS``. Flush first, then wait: a flush during the wait
        can make a stale check look complete. Adapters without :meth:`twcs_checks` fall back to
        :meth:`wait_for_compactions`."""
        deadline = time.monotonic() + timeout
        next_nudge = time.monotonic() + TWCS_RECHECK_SECONDS
        while True:
            checks = {t: self.twcs_checks(keyspace, t) for t in tables}
            if any(c is None for c in checks.values()):
                return self.wait_for_compactions(timeout=max(0.0, deadline - time.monotonic()), poll=poll,
                                                 keyspace=keyspace)
            for t, cs in checks.items():
                if any(c.buckets is None for c in cs):
                    raise AdminError(f"{keyspace}.{t} is not a TWCS table", keyspace=keyspace, table=t)
            missed = [t for t, cs in checks.items() if not all(c.settled for c in cs)]
            if not missed:
                return True
            now = time.monotonic()
            if now >= deadline:
                return False
            if now >= next_nudge:
                for t in missed:
                    if not any(c.active or c.pending for c in checks[t]):
                        self.nudge_compactions(keyspace, t)
                next_nudge = now + TWCS_RECHECK_SECONDS
            time.sleep(poll)

    def cpu_readings(self) -> list[Any]:
        """Cumulative server CPU seconds per node (per shard on Scylla):
        :class:`lab.cluster.admin.server_cpu.CpuReading`. Adapters that cannot tell raise AdminError."""
        raise AdminError(f"the {self.name} admin adapter cannot read server CPU time")

    def close(self) -> None:
        """Release helper processes the adapter started (none by default)."""
