"""The interface of a server dialect, and the two results every dialect fills the same way.

A dialect is pure text and rules: CQL option text, trace wording, error wording, setting
names. It never talks to the server itself; the connection (``lab.cluster.connection``) holds
the one chosen for the server it reached and asks it.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lab.errors import ConfigError, LabError

COMPRESSIONS = ("lz4", "zstd", "none")
CHUNK_LENGTH_KB = 16


@dataclass(frozen=True, kw_only=True)
class TraceCounts:
    """What one traced request read, summed over the replicas whose events were parsed."""

    rows_read: int
    tombstones_read: int
    sstables_touched: int
    has_read_stats: bool  # at least one replica's "rows read" line was seen


def cql_literal(value: Any) -> str:
    """A CQL map value: strings quoted (quotes doubled), numbers and booleans bare."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


def cql_map(options: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{cql_literal(k)}: {cql_literal(v)}" for k, v in options.items()) + "}"


class Dialect(ABC):
    """How one server spells what the lab needs. Subclasses: ``cassandra``, ``scylla``."""

    name = "base"
    # Seconds the trace event count must stay unchanged before a trace counts as complete:
    # how long after a request the last replica's events may still be on their way.
    trace_settle_seconds = 0.3
    # Settings (names as the server's config table spells them) that bound an IN list.
    in_limit_settings: tuple[str, ...] = ()

    # ---- schema -------------------------------------------------------------------------
    @abstractmethod
    def create_keyspace(self, keyspace: str, replication: Mapping[str, Any], *, tablets: bool = False) -> str:
        """``CREATE KEYSPACE IF NOT EXISTS`` text for the lab's replication settings."""

    @abstractmethod
    def compression(self, name: str) -> dict[str, str]:
        """Table compression options for ``lz4``, ``zstd`` or ``none``."""

    def compression_clause(self, name: str) -> str:
        return f"compression = {cql_map(self.compression(name))}"

    def expiring_table_options(self) -> tuple[str, ...]:
        """Extra table options of a scratch TWCS table whose fully expired SSTables must be
        dropped on the gc_grace clock (whatever the replication factor)."""
        return ()

    def sstable_read(self, select: str) -> str:
        """A measurement SELECT that must read SSTables, not a cache in front of them."""
        return select

    # ---- traces -------------------------------------------------------------------------
    @abstractmethod
    def trace_counts(self, descriptions: Iterable[str]) -> TraceCounts:
        """Rows, tombstones and SSTables from the server's own trace event texts."""

    # ---- errors -------------------------------------------------------------------------
    def translate_error(self, exc: BaseException, *, table: str | None = None) -> LabError | None:
        """A more precise lab error for a server error this dialect recognises, else None."""
        return None

    def rejects_statement(self, error: BaseException) -> bool:
        """True when ``error`` (a server error reply) rejects the statement itself: every
        host would answer the same, so the driver must not retry it elsewhere."""
        return False

    def _check_compression(self, name: str) -> None:
        if name not in COMPRESSIONS:
            raise ConfigError(f"unknown compression {name!r}; known: {', '.join(COMPRESSIONS)}", field="compression")
