"""What one MessageStore is made of: :func:`build_parts` builds the parts together (for
``MessageStore.open``), :meth:`Parts.close` closes them in order (for ``MessageStore.close``).

More: docs/store-internals.md.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.cluster.config import ClusterConfig
from lab.cluster.connection import Connection, connect
from lab.cluster.services import ServicesConfig
from lab.constants import Constants
from lab.store.crypto import Encryptor, LocalKeyStore
from lab.store.outbox import Outbox, OutboxView, open_outbox
from lab.store.plumbing.alerts import Alerts
from lab.store.plumbing.context import StoreContext
from lab.store.plumbing.faults import FaultPlan
from lab.store.plumbing.wall_clock import wall_clock_ms
from lab.store.read.batch import BatchReader
from lab.store.read.history import HistoryReader
from lab.store.read.lookup import AdminLookup
from lab.store.read.reactions import Reactions
from lab.store.rows.ids import MessageIdGenerator
from lab.store.rows.records import decode_row
from lab.store.rows.retention import RetentionPolicy
from lab.store.write.archiver import HistoryArchiver
from lab.store.write.earliest import EarliestAdvancer
from lab.store.write.head_writer import HeadWriter
from lab.store.write.recall import RecallPath
from lab.store.write.recovery import Recovery
from lab.store.write.seeding import Seeder
from lab.store.write.send import SendPath
from lab.store.write.sequence import SequenceAllocator

__all__ = ["KEYSTORE_FILE", "OUTBOX_FILE", "SEQUENCE_FILE", "Parts", "build_parts"]

# the local durable state under a store's state_dir
KEYSTORE_FILE = "keys.sqlite"
OUTBOX_FILE = "outbox.sqlite"
SEQUENCE_FILE = "sequences.sqlite"


@dataclass(frozen=True, kw_only=True)
class Parts:
    """Everything one store is made of, built together by :func:`build_parts`."""

    ctx: StoreContext
    outbox: Outbox
    sequences: SequenceAllocator
    head_writer: HeadWriter
    send_path: SendPath
    archiver: HistoryArchiver
    recall_path: RecallPath
    recovery: Recovery
    history_reader: HistoryReader
    batch_reader: BatchReader
    reactions: Reactions
    lookup: AdminLookup
    seeder: Seeder
    log: OutboxView
    earliest: EarliestAdvancer
    hot: Any = None  # archiver mode's Redis hot window (lab.store.hot.redis_window.HotWindow), or None
    services: ServicesConfig = ServicesConfig()  # with the outbox actually opened

    def close(self, *, close_connection: bool) -> None:
        """Each part once, in order: the async calls' pools before what their steps use, queued head
        updates finished, the readers' pools before the hot window, the connection last."""
        for path in (self.send_path, self.recall_path):
            path.close()
        self.head_writer.close()  # finishes queued head updates first
        self.recovery.stop()  # closed: nothing of this writer is left to recover
        self.sequences.close()
        self.outbox.close()
        for reader in (self.history_reader, self.reactions, self.batch_reader):
            reader.close()
        if self.hot is not None:
            self.hot.close()
        self.ctx.encryptor.keystore.close()
        if close_connection:
            self.ctx.connection.close()


def build_parts(config: ClusterConfig, *, constants: Constants, state_dir: Path, node_id: int,
                archiver_mode: bool, retention: RetentionPolicy | None, faults: FaultPlan | None,
                connection: Connection | None, outbox: str | None, fencing_epoch: int, head_failover: bool,
                services: ServicesConfig | None) -> Parts:
    """Connect (or use ``connection``) and open the local durable state under ``state_dir``, which
    exists: DEKs, the outbox, the seq reservations; then the paths over them. Options:
    ``MessageStore.open`` (docs/store-api.md)."""
    conn = connection if connection is not None else connect(config)
    ctx = StoreContext(
        connection=conn, keyspace=config.keyspace, constants=constants,
        encryptor=Encryptor(LocalKeyStore(state_dir / KEYSTORE_FILE),
                            cache_ttl_seconds=constants.dek_cache_ttl_seconds),
        retention=retention if retention is not None else RetentionPolicy.from_constants(constants),
        alerts=Alerts(), faults=faults if faults is not None else FaultPlan(), clock_ms=wall_clock_ms)
    services = services if services is not None else ServicesConfig()
    outbox = outbox if outbox is not None else services.outbox
    log = open_outbox(outbox, path=state_dir / OUTBOX_FILE, **services.outbox_options(outbox, config.keyspace))
    hot = hot_layer = None
    if archiver_mode and services.hot_window == "redis":
        from lab.store.hot.redis_window import open_hot_window
        hot, hot_layer = open_hot_window(services, namespace=config.keyspace, constants=constants,
                                         decode=lambda row: decode_row(row, ctx.encryptor))
    sequences = SequenceAllocator(state_dir / SEQUENCE_FILE, window=constants.seq_reservation_window,
                                  id_generator=MessageIdGenerator(node_id, clock_ms=ctx.clock_ms))
    head_writer = HeadWriter(ctx, fencing_epoch=fencing_epoch, failover=head_failover)
    batch_reader = BatchReader(ctx, hot=hot_layer)  # recall / edit tell its LRU what they change
    recall_path = RecallPath(ctx, outbox=log, sequences=sequences, fencing=head_writer.fencing,
                             on_change=batch_reader.cache.discard, hot=hot)
    return Parts(
        ctx=ctx, outbox=log, sequences=sequences, head_writer=head_writer,
        send_path=SendPath(ctx, outbox=log, sequences=sequences, head=head_writer, archiver_mode=archiver_mode,
                           hot=hot),
        archiver=HistoryArchiver(ctx, log), recall_path=recall_path,
        recovery=Recovery(ctx, outbox=log, recall_path=recall_path, head=head_writer, state_dir=state_dir),
        history_reader=HistoryReader(ctx, hot=hot_layer, written_head=head_writer.last_written),
        batch_reader=batch_reader, reactions=Reactions(ctx),
        lookup=AdminLookup(ctx), seeder=Seeder(ctx, sequences, head_writer, log), log=OutboxView(log), hot=hot,
        earliest=EarliestAdvancer(ctx),
        services=services.replace(outbox=outbox, hot_window="redis" if hot is not None else "off"))
