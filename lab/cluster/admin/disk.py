"""Bytes on disk of one table, per node, as the node holds them: every file of every SSTable.

More: docs/cluster-internals.md.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.measure import Stopwatch

SKIPPED_FOLDERS = frozenset({"snapshots", "backups"})
SETTLE_SECONDS = 30.0
SETTLE_QUIET_SECONDS = 0.5
SETTLE_POLL_SECONDS = 0.1


@dataclass(frozen=True, kw_only=True)
class DiskBytes:
    """One table's bytes on disk per node (node address -> bytes) and where they were read."""

    keyspace: str
    table: str
    per_node: Mapping[str, int]
    source: str  # files | admin

    @property
    def total(self) -> int:
        return sum(self.per_node.values())


def directory_bytes(folders: list[Path]) -> int:
    """Sum of the regular files directly in ``folders`` (not in snapshots/ or backups/)."""
    total = 0
    for folder in folders:
        try:
            entries = list(folder.iterdir())
        except FileNotFoundError:
            continue
        for path in entries:
            if path.name in SKIPPED_FOLDERS:
                continue
            try:
                if path.is_file():
                    total += path.stat().st_size
            except FileNotFoundError:  # deleted by a compaction between the listing and the stat
                continue
    return total


def disk_bytes(admin: Any, keyspace: str, table: str) -> DiskBytes:
    """The table's bytes on disk per node (module docstring)."""
    folders = admin.table_directories(keyspace, table)
    if folders:
        return DiskBytes(keyspace=keyspace, table=table, source="files",
                         per_node={node: directory_bytes(dirs) for node, dirs in folders.items()})
    stats = admin.table_stats(keyspace, table)
    return DiskBytes(keyspace=keyspace, table=table, source="admin",
                     per_node={str(p["node"]): int(p["total_disk_bytes"]) for p in stats.per_node})


def settled_disk_bytes(admin: Any, targets: list[tuple[str, str]], *, timeout: float = SETTLE_SECONDS,
                       quiet: float = SETTLE_QUIET_SECONDS) -> dict[tuple[str, str], DiskBytes]:
    """Bytes on disk of every (keyspace, table) of ``targets`` once no compaction runs in their
    keyspaces and the reads stayed the same for ``quiet`` seconds (a compaction is scheduled a
    moment after the flush that calls for it, and obsolete files are deleted a moment after it
    ends); the last reads when ``timeout`` passes first."""
    keyspaces = sorted({ks for ks, _ in targets})
    waited, unchanged = Stopwatch(), Stopwatch()
    read = {t: disk_bytes(admin, *t) for t in targets}
    while waited.seconds() < timeout:
        time.sleep(SETTLE_POLL_SECONDS)
        again = {t: disk_bytes(admin, *t) for t in targets}
        busy = any(admin.compactions_running(ks) for ks in keyspaces)
        if busy or any(dict(again[t].per_node) != dict(read[t].per_node) for t in targets):
            unchanged.restart()
        elif unchanged.seconds() >= quiet:
            return again
        read = again
    return read


class PeakSampler:
    """Reads ``targets`` ((tag, keyspace, table), e.g. tag = a replicate) every ``poll_seconds``
    and keeps, per (tag, table, node), the largest bytes on disk since the last :meth:`take`.
    A context manager: the thread runs inside the ``with`` block."""

    def __init__(self, admin: Any, targets: list[tuple[Any, str, str]], *, poll_seconds: float = 0.05) -> None:
        self.admin, self.targets, self.poll_seconds = admin, list(targets), poll_seconds
        self._peaks: dict[tuple[Any, str, str], int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="disk-peak-sampler", daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            for tag, keyspace, table in self.targets:
                try:
                    read = disk_bytes(self.admin, keyspace, table)
                except Exception:  # an admin hiccup while sampling: the settled readings still count
                    continue
                with self._lock:
                    for node, b in read.per_node.items():
                        key = (tag, table, node)
                        self._peaks[key] = max(self._peaks.get(key, 0), b)
            self._stop.wait(self.poll_seconds)

    def take(self) -> dict[tuple[Any, str, str], int]:
        """The peaks since the last call, and start afresh."""
        with self._lock:
            peaks, self._peaks = self._peaks, {}
        return peaks

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
