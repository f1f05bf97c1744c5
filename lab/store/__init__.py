"""The MessageStore façade: the public API of docs/store-api.md.

Thin by design: it opens the parts (connection, key store, outbox, sequence allocator),
builds one :class:`~lab.store.context.StoreContext`, and delegates every call to the module that
owns the concept:

    write side   lab.write_path (send, §5.1), lab.head (conversation_head, §2.4),
                 lab.archiver (archiver mode, §2.1 note), lab.recall (recall/edit, §5.3),
                 lab.outbox, lab.sequence
    read side    lab.read_path (history, §4.1), lab.batch_read (§4.3), lab.reactions (§2.5),
                 lab.lookup (admin lookup via message_index)

Per-store defaults (constants, retention policy, archiver mode) are set at ``open``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from lab.store.alerts import Alerts
from lab.cluster.config import ClusterConfig
from lab.cluster.connection import Connection, connect
from lab.constants import Constants, load_constants
from lab.store.context import StoreContext
from lab.store.crypto import Encryptor, LocalKeyStore
from lab.errors import ValidationError
from lab.store.faults import FaultPlan
from lab.store.records import Message
from lab.store.retention import RetentionPolicy
from lab.store.schema import SchemaDifference, check_schema, create_schema
# write side: the modules behind the "write side" section of MessageStore
from lab.store.archiver import HistoryArchiver
from lab.store.head import HeadWriter
from lab.store.ids import MessageIdGenerator, parse_uuid
from lab.store.outbox import Outbox, open_outbox
from lab.store.recall import EditResult, RecallPath, RecallResult
from lab.store.sequence import SequenceAllocator
from lab.store.write_path import SendAck, SendRequest, WritePath
# read side: the modules behind the "read side" section of MessageStore
from lab.store.batch_read import BatchEntry, BatchReader, BatchResult, BodyCache
from lab.store.head import ConversationHead, read_head
from lab.store.lookup import AdminLookup
from lab.store.reactions import Reactions, ReactionSummary
from lab.store.read_path import DEFAULT_HISTORY_LIMIT, Direction, HistoryPage, HistoryReader

__all__ = ["BatchEntry", "BatchResult", "ConversationHead", "DEFAULT_STATE_DIR", "EditResult", "HistoryPage",
           "Message", "MessageStore", "ReactionSummary", "RecallResult", "SendAck", "SendRequest"]

DEFAULT_STATE_DIR = Path(".lab/state")
KEYSTORE_FILE = "keys.sqlite"
OUTBOX_FILE = "outbox.sqlite"
SEQUENCE_FILE = "sequences.sqlite"


class MessageStore:
    """One store over one keyspace. Safe to share between threads; close it when done."""

    def __init__(self, *, ctx: StoreContext, state_dir: Path, node_id: int, archiver_mode: bool,
                 owns_connection: bool, outbox: Outbox, sequences: SequenceAllocator, head_writer: HeadWriter) -> None:
        self.ctx = ctx
        self.state_dir = state_dir
        self.node_id = node_id
        self.archiver_mode = archiver_mode
        self._owns_connection = owns_connection
        self._closed = False
        self.outbox = outbox
        self.sequences = sequences
        self.head_writer = head_writer
        self.write_path = WritePath(ctx, outbox=outbox, sequences=sequences, head=head_writer,
                                    archiver_mode=archiver_mode)
        self.archiver = HistoryArchiver(ctx, outbox)
        self.recall_path = RecallPath(ctx, outbox=outbox, sequences=sequences,
                                      on_change=lambda tenant_id, message_id: self.body_cache.discard(tenant_id,
                                                                                                      message_id))

    @classmethod
    def open(cls, config: ClusterConfig, *, constants: Constants | None = None,
             state_dir: Path | str = DEFAULT_STATE_DIR, node_id: int = 1, archiver_mode: bool = False,
             retention: RetentionPolicy | None = None, faults: FaultPlan | None = None,
             connection: Connection | None = None, outbox: str = "local", fencing_epoch: int = 0,
             head_failover: bool = False) -> MessageStore:
        """Connect (or reuse ``connection``, which the store then does not close) and open the
        local durable state under ``state_dir``: DEKs, the outbox (``outbox`` names an
        implementation in ``lab.store.outbox.OUTBOXES``) and the conversation_seq reservations.

        ``node_id`` sets the message_id node bits and names this writer; a new store is a
        restarted writer (it reserves fresh seq windows). ``head_failover=True`` writes
        conversation_head with the compare-and-set failover form under ``fencing_epoch``."""
        if not isinstance(config, ClusterConfig):
            raise ValidationError("config must be a lab.config.ClusterConfig", field="config")
        constants = constants if constants is not None else load_constants()
        state_dir = Path(state_dir)
        state_dir.mkdir(parents=True, exist_ok=True)
        owns = connection is None
        conn = connection if connection is not None else connect(config)
        ctx = StoreContext(
            connection=conn, keyspace=config.keyspace, constants=constants,
            encryptor=Encryptor(LocalKeyStore(state_dir / KEYSTORE_FILE),
                                cache_ttl_seconds=constants.dek_cache_ttl_seconds),
            retention=retention if retention is not None else RetentionPolicy.from_constants(constants),
            alerts=Alerts(), faults=faults if faults is not None else FaultPlan())
        return cls(ctx=ctx, state_dir=state_dir, node_id=node_id, archiver_mode=archiver_mode, owns_connection=owns,
                   outbox=open_outbox(outbox, path=state_dir / OUTBOX_FILE),
                   sequences=SequenceAllocator(state_dir / SEQUENCE_FILE, window=constants.seq_reservation_window,
                                               id_generator=MessageIdGenerator(node_id)),
                   head_writer=HeadWriter(ctx, fencing_epoch=fencing_epoch, failover=head_failover))

    # ---- common ----------------------------------------------------------------------------
    @property
    def connection(self) -> Connection:
        return self.ctx.connection

    @property
    def keyspace(self) -> str:
        return self.ctx.keyspace

    @property
    def constants(self) -> Constants:
        return self.ctx.constants

    @property
    def alerts(self) -> Alerts:
        return self.ctx.alerts

    @property
    def faults(self) -> FaultPlan:
        return self.ctx.faults

    @property
    def encryptor(self) -> Encryptor:
        return self.ctx.encryptor

    def create_schema(self) -> None:
        """Keyspace (with the config's replication) and the six tables of §2."""
        create_schema(self.connection, self.keyspace, self.constants,
                      replication=self.connection.config.replication_map())

    def check_schema(self) -> list[SchemaDifference]:
        return check_schema(self.connection, self.keyspace, self.constants)

    # ---- write side (lab.write_path, lab.head, lab.archiver, lab.recall) ---------------------
    def send(self, request: SendRequest) -> SendAck:
        """§5.1: dedup reserve, allocate, record (+index), outbox, COMMITTED, ack; head async.
        A retry of the same (tenant, sender, client_message_id) returns the first ack."""
        return self.write_path.send(request)

    def recall(self, tenant_id: Any, conversation_id: Any, conversation_seq: int, *, actor_id: Any) -> RecallResult:
        """§5.3: CONTROL event to the log first, then state=RECALLED with the event's coordinate."""
        return self.recall_path.recall(tenant_id, conversation_id, conversation_seq, actor_id=actor_id)

    def edit(self, tenant_id: Any, conversation_id: Any, conversation_seq: int, *, body: bytes, actor_id: Any,
             e2ee: bool = False) -> EditResult:
        """§5.3: CONTROL event (with the new sealed payload) to the log, then the whole-payload replace."""
        return self.recall_path.edit(tenant_id, conversation_id, conversation_seq, body=body, actor_id=actor_id,
                                     e2ee=e2ee)

    def erase_conversation(self, tenant_id: Any, conversation_id: Any) -> None:
        """Compliance erasure by crypto-erasure (§3, §6): destroy every version of the
        conversation's DEK and drop its bodies from this node's LRU. No row is deleted: the
        rows stay, unreadable, until their TTL. Afterwards history / lookup / read_bucket of
        it raise KeyDestroyed, batch reads report its messages missing, sends to it are
        refused. Other processes sharing the key store see the erasure when their DEK cache
        entries expire (``dek_cache_ttl_seconds``); their body LRUs must be told by calling
        this (or ``body_cache.discard_conversation``) on every node."""
        tenant_id, conversation_id = parse_uuid(tenant_id), parse_uuid(conversation_id)
        self.encryptor.destroy(tenant_id, conversation_id)
        self.body_cache.discard_conversation(tenant_id, conversation_id)

    def recover(self) -> int:
        """Re-apply logged recall/edit events whose row update is missing (S-7); run at start-up."""
        return self.recall_path.recover()

    def drain(self, timeout_seconds: float | None = None) -> None:
        """Wait for the asynchronous conversation_head updates submitted so far."""
        self.head_writer.drain(timeout_seconds)


    # ---- read side (lab.read_path, lab.batch_read, lab.reactions, lab.lookup) ----
    # Each helper is built on first use; dict.setdefault keeps one instance if two threads race
    # (the constructors only store references, so a discarded duplicate costs nothing).
    @property
    def history_reader(self) -> HistoryReader:
        return self.__dict__.get("_history_reader") or self.__dict__.setdefault(
            "_history_reader", HistoryReader(self.ctx))

    @property
    def batch_reader(self) -> BatchReader:
        return self.__dict__.get("_batch_reader") or self.__dict__.setdefault(
            "_batch_reader", BatchReader(self.ctx))

    @property
    def reactions(self) -> Reactions:
        return self.__dict__.get("_reactions") or self.__dict__.setdefault("_reactions", Reactions(self.ctx))

    @property
    def body_cache(self) -> BodyCache:
        """This node's body LRU (§4.3). Recall / edit / erasure must discard what they change."""
        return self.batch_reader.cache

    def history(self, tenant_id: Any, conversation_id: Any, direction: Direction = "older",
                anchor: int | None = None, limit: int = DEFAULT_HISTORY_LIMIT) -> HistoryPage:
        """One page of history (§4.1); ``anchor=None`` is the latest page."""
        return self.history_reader.history(tenant_id, conversation_id, direction=direction, anchor=anchor,
                                           limit=limit)

    def read_bucket(self, tenant_id: Any, conversation_id: Any, seq_bucket: int) -> list[Message]:
        """Every row of one message_record partition, S-4 checked (verification, not a page)."""
        return self.history_reader.read_bucket(tenant_id, conversation_id, seq_bucket)

    def batch_read(self, tenant_id: Any, entries: Any) -> BatchResult:
        """Grouped batch read of bodies plus reaction summaries (§4.3, §4.4)."""
        return self.batch_reader.read(tenant_id, entries)

    def react(self, tenant_id: Any, conversation_id: Any, conversation_seq: int, user_id: Any,
              reaction_key: str) -> ReactionSummary:
        return self.reactions.react(tenant_id, conversation_id, conversation_seq, user_id, reaction_key)

    def unreact(self, tenant_id: Any, conversation_id: Any, conversation_seq: int, user_id: Any) -> ReactionSummary:
        return self.reactions.unreact(tenant_id, conversation_id, conversation_seq, user_id)

    def reaction_summary(self, tenant_id: Any, conversation_id: Any, conversation_seq: int) -> ReactionSummary:
        return self.reactions.summary(tenant_id, conversation_id, conversation_seq)

    def self_reaction(self, tenant_id: Any, conversation_id: Any, conversation_seq: int, user_id: Any) -> str | None:
        """The user's own reaction: detail view only, never part of a batch (§4.4)."""
        return self.reactions.self_reaction(tenant_id, conversation_id, conversation_seq, user_id)

    def lookup(self, tenant_id: Any, message_id: int) -> Message:
        """Admin / moderation lookup through message_index; never on a hot path (§2.2)."""
        return AdminLookup(self.ctx).lookup(tenant_id, message_id)

    def head(self, tenant_id: Any, conversation_id: Any) -> ConversationHead | None:
        return read_head(self.ctx, tenant_id, conversation_id)


    # ---- lifecycle -------------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.head_writer.close()  # finishes queued head updates first
        self.sequences.close()
        self.outbox.close()
        self.ctx.encryptor.keystore.close()
        if self._owns_connection:
            self.connection.close()

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MessageStore(keyspace={self.keyspace!r}, node_id={self.node_id}, archiver_mode={self.archiver_mode})"
