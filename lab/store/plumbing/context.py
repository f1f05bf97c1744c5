"""What every path module needs from the store, in one typed object.

More: docs/store-internals.md.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from lab.store.plumbing.alerts import Alerts
from lab.store.plumbing.wall_clock import Clock, wall_clock_ms
from lab.cluster.connection import Connection, Stmt
from lab.constants import Constants
from lab.store.crypto import Encryptor
from lab.store.plumbing.faults import FaultPlan
from lab.store.rows.retention import RetentionPolicy


@dataclass(frozen=True, kw_only=True)
class StoreContext:
    connection: Connection
    keyspace: str
    constants: Constants
    encryptor: Encryptor
    retention: RetentionPolicy
    alerts: Alerts
    faults: FaultPlan
    clock_ms: Clock = field(default=wall_clock_ms)  # the store's one clock (lab.store.plumbing.wall_clock)
    # template -> prepared statement: the hot paths prepare on every call, and formatting the
    # keyspace into the text plus the connection's locked lookup showed in the send's profile
    _prepared: dict[tuple[str, tuple[str, ...], str | None], Stmt] = field(default_factory=dict, repr=False,
                                                                           compare=False)

    def prepare(self, cql: str, *, key_columns: tuple[str, ...] = (), kind: str | None = None) -> Stmt:
        """Prepare ``cql`` with ``{ks}`` replaced by the store's keyspace (cached per text)."""
        key = (cql, key_columns, kind)
        stmt = self._prepared.get(key)
        if stmt is None:
            stmt = self._prepared[key] = self.connection.prepare(cql.format(ks=self.keyspace),
                                                                 key_columns=key_columns, kind=kind)
        return stmt

    @property
    def bucket_width(self) -> int:
        return self.constants.message_seq_bucket_width
