"""What the lab needs from a cluster beyond CQL, whatever serves it: the base class and the
frozen results (table numbers, server counters) both adapters return."""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.cluster.config import ClusterConfig

COMPACTION_POLL_SECONDS = 0.1
COMPACTION_WAIT_SECONDS = 120.0


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

    def wait_for_compactions(self, timeout: float = COMPACTION_WAIT_SECONDS,
                             poll: float = COMPACTION_POLL_SECONDS) -> bool:
        """Block until no compaction is pending or running (True) or ``timeout`` passes (False).
        Adapters that cannot tell return True at once."""
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
