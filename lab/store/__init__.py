"""The MessageStore façade: the public API of docs/store-api.md.

:meth:`MessageStore.open` is the one place that builds the parts (``parts``: built and closed together); they
stay private, and callers use the public methods (seeding, baseline statements, the log view, archiver runs).
``baseline`` holds the paths' own statements, for floors. Packages (each ``__init__`` says what lives in it):

    write/     send (the send path, §5.1), sequence, head, head_writer (§5.1 step 7), recall (§5.3),
               earliest (the E advancer, §9), archiver (§2.1 note), seeding
    read/      history (§4.1), batch (§4.3), reactions (§2.5), lookup (admin, message_index)
    outbox/    the commit log (§5.1 step 4): sqlite_log (local), kafka_log + kafka_producer + kafka_index
               + kafka_errors (Kafka)
    hot/       the seam where archiver mode's hot window merges into reads; redis_window (Redis)
    rows/      records, ids, media, model (enums), schema, retention, proto/
    crypto/    encryption at rest (§6): cipher, key stores, DEK cache, encryptor
    plumbing/  context, wall_clock (the store's one clock), alerts, faults, sqlite_file, lru, steps

More: docs/store-internals.md.
"""
from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from lab.cluster.config import ClusterConfig
from lab.cluster.connection import Connection, Stmt
from lab.cluster.services import ServicesConfig
from lab.constants import Constants, load_constants
from lab.errors import ValidationError
from lab.store.outbox import (OUTBOXES, EditEvent, MessagePayload, Outbox, OutboxEntry, OutboxRecord, OutboxView,
                              RecallEvent, open_outbox)
from lab.store.parts import KEYSTORE_FILE, OUTBOX_FILE, SEQUENCE_FILE, Parts, build_parts
from lab.store.plumbing.alerts import ALERT_NAMES, Alerts
from lab.store.plumbing.faults import CRASH_POINTS, FaultPlan
from lab.store.plumbing.wall_clock import wall_clock_ms
from lab.store.rows.ids import (BIT63, U128_MAX, DekId, IdLike, MessageIdGenerator, blob_to_u128, check_bigint,
                                compose_message_id, minted_message_id, parse_uuid, seq_bucket, split_message_id,
                                u128_to_blob)
from lab.store.rows.media import MediaMetadata, MentionTargets
from lab.store.rows.model import DedupState, MessageState, MessageType, RetentionClass
from lab.store.rows.records import (MESSAGE_RECORD_COLUMNS, MESSAGE_RECORD_KEY, PARTITION_ROW_COLUMNS, EncodedRecord, Message,
                                    decode_row)
from lab.store.rows.retention import NO_TTL, RetentionPolicy
from lab.store.rows.decode_paths import DECODE_PATHS, DecodePage, decode_page
from lab.store.baseline import BaselineStatements, baseline_statements
from lab.store.rows.schema import TABLE_NAMES, SchemaDifference, TableSpec, check_schema, create_schema, table_specs
from lab.store.write.archiver import ARCHIVER_GROUP
from lab.store.write.earliest import AdvanceSummary, EarliestAdvance
from lab.store.write.head import ConversationHead, HeadUpdate, check_head_update, read_head
from lab.store.write.recall import EditResult, RecallResult
from lab.store.write.seeding import FULL_TTL, STAMP_NOW, Seeder
from lab.store.write.send import SendAck, SendRequest
from lab.store.write.sequence import Allocation
from lab.store.read.batch import DEFAULT_BATCH_CONCURRENCY, BatchEntry, BatchResult
from lab.store.read.body_cache import BodyCache
from lab.store.read.history import DEFAULT_HISTORY_LIMIT, FIRST_CONVERSATION_SEQ, Direction, HistoryPage
from lab.store.read.reactions import NO_REACTION, REACTION_KEY_MAX_BYTES, ReactionSummary

# What callers outside lab/store/ import (HotWindow on first use: it needs redis); the rest is private.
__all__ = ["AdvanceSummary", "ALERT_NAMES", "Alerts", "Allocation", "ARCHIVER_GROUP", "BaselineStatements",
           "BatchEntry", "BatchResult", "BIT63", "blob_to_u128", "BodyCache", "compose_message_id",
           "ConversationHead", "CRASH_POINTS", "DECODE_PATHS", "decode_page", "DecodePage", "DedupState",
           "DEFAULT_BATCH_CONCURRENCY", "DEFAULT_HISTORY_LIMIT", "DEFAULT_STATE_DIR", "DekId", "Direction",
           "EarliestAdvance", "EditEvent", "EditResult", "EncodedRecord", "FaultPlan", "FIRST_CONVERSATION_SEQ",
           "FULL_TTL", "HeadUpdate", "HistoryPage", "HotWindow", "IdLike", "KEYSTORE_FILE", "MediaMetadata",
           "MentionTargets", "Message", "MESSAGE_RECORD_COLUMNS", "MESSAGE_RECORD_KEY", "PARTITION_ROW_COLUMNS",
           "MessageIdGenerator", "MessagePayload", "minted_message_id", "MessageState", "MessageStore",
           "MessageType", "NO_REACTION", "NO_TTL", "open_outbox", "Outbox", "OUTBOX_FILE", "OutboxEntry",
           "OUTBOXES", "OutboxRecord", "OutboxView", "parse_uuid", "REACTION_KEY_MAX_BYTES", "ReactionSummary",
           "RecallEvent", "RecallResult", "RetentionClass", "RetentionPolicy", "SchemaDifference", "Seeder",
           "SendAck", "SendRequest", "seq_bucket", "SEQUENCE_FILE", "split_message_id", "STAMP_NOW", "TABLE_NAMES",
           "table_specs", "TableSpec", "U128_MAX", "u128_to_blob", "wall_clock_ms"]

DEFAULT_STATE_DIR = Path(".lab/state")


class MessageStore:
    """One store over one keyspace. Safe to share between threads; close it when done.
    Build it with :meth:`open`; the constructor is private."""

    def __init__(self, parts: Parts, *, state_dir: Path, node_id: int, archiver_mode: bool,
                 owns_connection: bool) -> None:
        self._parts = parts
        self._state_dir = state_dir
        self._node_id = node_id
        self._archiver_mode = archiver_mode
        self._owns_connection = owns_connection
        self._closed = False
        parts.recovery.start(on_error=self.close)  # recover() when a writer of state_dir died unclosed

    @classmethod
    def open(cls, config: ClusterConfig, *, constants: Constants | None = None,
             state_dir: Path | str = DEFAULT_STATE_DIR, node_id: int = 1, archiver_mode: bool = False,
             retention: RetentionPolicy | None = None, faults: FaultPlan | None = None,
             connection: Connection | None = None, outbox: str | None = None, fencing_epoch: int = 0,
             head_failover: bool = False, services: ServicesConfig | None = None) -> MessageStore:
        """Connect (or reuse ``connection``, which the store then does not close) and open the local durable
        state under ``state_dir``: DEKs, the outbox, the seq reservations. Options: docs/store-api.md."""
        if not isinstance(config, ClusterConfig):
            raise ValidationError("config must be a lab.cluster.config.ClusterConfig", field="config")
        constants = constants if constants is not None else load_constants()
        state_dir = Path(state_dir)
        state_dir.mkdir(parents=True, exist_ok=True)
        parts = build_parts(config, constants=constants, state_dir=state_dir, node_id=node_id,
                            archiver_mode=archiver_mode, retention=retention, faults=faults, connection=connection,
                            outbox=outbox, fencing_epoch=fencing_epoch, head_failover=head_failover, services=services)
        return cls(parts, state_dir=state_dir, node_id=node_id, archiver_mode=archiver_mode,
                   owns_connection=connection is None)

    # ---- common ----------------------------------------------------------------------------
    @property
    def connection(self) -> Connection:
        """The store's connection (request accounting: ``connection.counter``)."""
        return self._parts.ctx.connection

    @property
    def keyspace(self) -> str:
        return self._parts.ctx.keyspace

    @property
    def constants(self) -> Constants:
        return self._parts.ctx.constants

    @property
    def retention(self) -> RetentionPolicy:
        """The retention policy (class -> TTL) this store writes with."""
        return self._parts.ctx.retention

    @property
    def alerts(self) -> Alerts:
        return self._parts.ctx.alerts

    @property
    def faults(self) -> FaultPlan:
        """The crash-point plan given at ``open`` (tests read ``hits`` / ``fired``)."""
        return self._parts.ctx.faults

    @property
    def state_dir(self) -> Path:
        return self._state_dir

    @property
    def node_id(self) -> int:
        return self._node_id

    @property
    def hot_window(self) -> Any:  # archiver mode's Redis hot window (lab.store.hot.redis_window.HotWindow), or None
        return self._parts.hot

    @property
    def archiver_mode(self) -> bool:
        return self._archiver_mode

    @property
    def services(self) -> ServicesConfig:
        """The outbox and hot window this store runs on (``services.describe()`` for results)."""
        return self._parts.services

    def create_schema(self) -> None:
        """Keyspace (with the config's replication) and the six tables of §2."""
        create_schema(self.connection, self.keyspace, self.constants,
                      replication=self.connection.config.replication_map())

    def check_schema(self) -> list[SchemaDifference]:
        return check_schema(self.connection, self.keyspace, self.constants)

    # ---- write side (write/: send, head, archiver, recall) -------------------------------
    def send(self, request: SendRequest) -> SendAck:
        """§5.1: dedup reserve, allocate, record (+index), outbox, COMMITTED, ack; head async.
        A retry of the same (tenant, sender, client_message_id) returns the first ack."""
        return self._parts.send_path.send(request)

    def send_async(self, request: SendRequest) -> Future[SendAck]:
        """:meth:`send` as a future (no thread per call in flight); every error is the future's."""
        return self._parts.send_path.send_async(request)

    def recall(self, tenant_id: IdLike, conversation_id: IdLike, conversation_seq: int, *,
               actor_id: IdLike) -> RecallResult:
        """§5.3: CONTROL event to the log first, then state=RECALLED with the event's coordinate."""
        return self._parts.recall_path.recall(tenant_id, conversation_id, conversation_seq, actor_id=actor_id)

    def recall_async(self, tenant_id: IdLike, conversation_id: IdLike, conversation_seq: int, *,
                     actor_id: IdLike) -> Future[RecallResult]:
        """:meth:`recall` as a future (no thread per call in flight); every error is the future's."""
        return self._parts.recall_path.recall_async(tenant_id, conversation_id, conversation_seq, actor_id=actor_id)

    def edit(self, tenant_id: IdLike, conversation_id: IdLike, conversation_seq: int, *, body: bytes,
             actor_id: IdLike, e2ee: bool = False) -> EditResult:
        """§5.3: CONTROL event (with the new sealed payload) to the log, then the whole-payload replace."""
        return self._parts.recall_path.edit(tenant_id, conversation_id, conversation_seq, body=body,
                                            actor_id=actor_id, e2ee=e2ee)

    def edit_async(self, tenant_id: IdLike, conversation_id: IdLike, conversation_seq: int, *, body: bytes,
                   actor_id: IdLike, e2ee: bool = False) -> Future[EditResult]:
        """:meth:`edit` as a future (no thread per call in flight); every error is the future's."""
        return self._parts.recall_path.edit_async(tenant_id, conversation_id, conversation_seq, body=body,
                                                  actor_id=actor_id, e2ee=e2ee)

    def erase_conversation(self, tenant_id: IdLike, conversation_id: IdLike) -> None:
        """Compliance erasure by crypto-erasure (§3, §6): every version of the conversation's DEK destroyed,
        its bodies dropped from this node's LRU; the rows stay, unreadable, until their TTL (history / lookup
        / read_bucket raise KeyDestroyed, batch reads report them missing, sends are refused). Other processes
        see it when their DEK cache entries expire; call this (or ``body_cache.discard_conversation``) on each."""
        tenant_id, conversation_id = parse_uuid(tenant_id), parse_uuid(conversation_id)
        self._parts.ctx.encryptor.destroy(tenant_id, conversation_id)
        self.body_cache.discard_conversation(tenant_id, conversation_id)

    def rotate_key(self, tenant_id: IdLike, conversation_id: IdLike) -> DekId:
        """Add a DEK version for the conversation (§6): new rows are sealed with it, old rows
        keep naming (and opening with) the version that sealed them."""
        return self._parts.ctx.encryptor.rotate(tenant_id, conversation_id)

    def recover(self) -> int:
        """What a crashed writer held in memory, from the log (lab.store.write.recovery): S-7's recall /
        edit events its rows lack (re-emitted, applied; returns how many) and every head (``heads_restored``)."""
        return self._parts.recovery.run()

    def drain(self, timeout_seconds: float | None = None) -> None:
        """Wait for the asynchronous conversation_head updates submitted so far."""
        self._parts.head_writer.drain(timeout_seconds)

    def apply_head(self, update: HeadUpdate) -> str:
        """Apply a conversation_head update now, through this store's head writer (monotonic check; the failover
        compare-and-set form when opened with ``head_failover``): "written", "unchanged", "dropped" (a
        regression, counted) or "failed". ``send`` does this asynchronously; this is for seeding and tests."""
        return self._parts.head_writer.apply(check_head_update(update))

    def submit_head(self, update: HeadUpdate) -> Future:
        """Queue a head update on the writer's background thread, as ``send`` step 7 does."""
        return self._parts.head_writer.submit(check_head_update(update))

    def advance_seq(self, tenant_id: IdLike, conversation_id: IdLike, next_seq: int) -> None:
        """Seq floor: the conversation's next conversation_seq becomes at least ``next_seq``
        for every writer (never lowered). For migrations, seeding holes, S-2 / S-3 tests."""
        self._parts.sequences.advance_to(tenant_id, conversation_id, next_seq)

    def advance_earliest(self, tenant_id: IdLike, conversation_id: IdLike) -> EarliestAdvance | None:
        """Move the conversation's E to its first row still stored, once that row is older than the dedup window
        (lab.store.write.earliest): older pages end there (has_more=false). None without a head."""
        return self._parts.earliest.advance(tenant_id, conversation_id)

    def advance_earliest_all(self) -> AdvanceSummary:
        """:meth:`advance_earliest` for every conversation (a full scan of conversation_head: a daily job)."""
        return self._parts.earliest.advance_all()

    def archive_once(self, *, max_batches: int | None = None, group: str = ARCHIVER_GROUP) -> int:
        """Archiver mode (§2.1 note): archive what the log holds (or ``max_batches`` batches) into message_record
        + message_index; returns rows written. Another ``group`` replays the log from its own offset."""
        return self._parts.archiver.run_once(max_batches=max_batches, group=group)

    def archive_lag(self, *, group: str = ARCHIVER_GROUP) -> int:
        """Log entries (messages and CONTROL events) the archiver group has not consumed."""
        return self._parts.archiver.lag(group=group)

    @property
    def log(self) -> OutboxView:
        """Read-only view of the commit log (outbox): entries, CONTROL events, offsets."""
        return self._parts.log

    @property
    def seeding(self) -> Seeder:
        """Rows written as the store's paths write them, without send (lab.store.write.seeding)."""
        return self._parts.seeder

    # ---- read side (read/: history, batch, reactions, lookup) ----------------------------
    @property
    def body_cache(self) -> BodyCache:
        """This node's body LRU (§4.3). Recall / edit / erasure must discard what they change."""
        return self._parts.batch_reader.cache

    def history(self, tenant_id: IdLike, conversation_id: IdLike, direction: Direction = "older",
                anchor: int | None = None, limit: int = DEFAULT_HISTORY_LIMIT) -> HistoryPage:
        """One page of history (§4.1); ``anchor=None`` is the latest page."""
        return self._parts.history_reader.history(tenant_id, conversation_id, direction=direction, anchor=anchor,
                                                  limit=limit)

    def history_async(self, tenant_id: IdLike, conversation_id: IdLike, direction: Direction = "older",
                      anchor: int | None = None, limit: int = DEFAULT_HISTORY_LIMIT) -> Future[HistoryPage]:
        """:meth:`history`'s page as a future, its reads chained on the driver's event loop (no thread per call in
        flight). A bad argument raises ValidationError at once; any other error is the future's, as history's."""
        return self._parts.history_reader.history_async(tenant_id, conversation_id, direction=direction,
                                                        anchor=anchor, limit=limit)

    def read_bucket(self, tenant_id: IdLike, conversation_id: IdLike, seq_bucket: int) -> list[Message]:
        """Every row of one message_record partition, S-4 checked (verification, not a page)."""
        return self._parts.history_reader.read_bucket(tenant_id, conversation_id, seq_bucket)

    def batch_read(self, tenant_id: IdLike, entries: Iterable[BatchEntry]) -> BatchResult:
        """Grouped batch read of bodies plus reaction summaries (§4.3, §4.4)."""
        return self._parts.batch_reader.read(tenant_id, entries)

    def batch_read_async(self, tenant_id: IdLike, entries: Iterable[BatchEntry]) -> Future[BatchResult]:
        """:meth:`batch_read` as a future; bad entries raise at once."""
        return self._parts.batch_reader.read_async(tenant_id, entries)

    def react(self, tenant_id: IdLike, conversation_id: IdLike, conversation_seq: int, user_id: IdLike,
              reaction_key: str) -> ReactionSummary:
        return self._parts.reactions.react(tenant_id, conversation_id, conversation_seq, user_id, reaction_key)

    def unreact(self, tenant_id: IdLike, conversation_id: IdLike, conversation_seq: int,
                user_id: IdLike) -> ReactionSummary:
        return self._parts.reactions.unreact(tenant_id, conversation_id, conversation_seq, user_id)

    def react_async(self, tenant_id: IdLike, conversation_id: IdLike, conversation_seq: int, user_id: IdLike,
                    reaction_key: str | None) -> Future[ReactionSummary]:
        """:meth:`react` (``reaction_key=None``: :meth:`unreact`) as a future; a bad argument raises at once."""
        return self._parts.reactions.react_async(tenant_id, conversation_id, conversation_seq, user_id, reaction_key)

    def unreact_async(self, tenant_id: IdLike, conversation_id: IdLike, conversation_seq: int,
                      user_id: IdLike) -> Future[ReactionSummary]:
        """:meth:`unreact` as a future, its walk chained on the driver's event loop (no thread per call in flight).
        A bad argument raises at once; any other error is the future's, as unreact's."""
        return self._parts.reactions.unreact_async(tenant_id, conversation_id, conversation_seq, user_id)

    def reaction_summary(self, tenant_id: IdLike, conversation_id: IdLike, conversation_seq: int) -> ReactionSummary:
        return self._parts.reactions.summary(tenant_id, conversation_id, conversation_seq)

    def self_reaction(self, tenant_id: IdLike, conversation_id: IdLike, conversation_seq: int,
                      user_id: IdLike) -> str | None:
        """The user's own reaction: detail view only, never part of a batch (§4.4)."""
        return self._parts.reactions.self_reaction(tenant_id, conversation_id, conversation_seq, user_id)

    def self_reaction_async(self, tenant_id: IdLike, conversation_id: IdLike, conversation_seq: int,
                            user_id: IdLike) -> Future[str | None]:
        """:meth:`self_reaction`'s point read as a future, on the driver's event loop (no thread per call in
        flight). A bad argument raises at once; any other error is the future's, as self_reaction's."""
        return self._parts.reactions.self_reaction_async(tenant_id, conversation_id, conversation_seq, user_id)

    def lookup(self, tenant_id: IdLike, message_id: int) -> Message:
        """Admin / moderation lookup through message_index; never on a hot path (§2.2)."""
        return self._parts.lookup.lookup(tenant_id, message_id)

    def head(self, tenant_id: IdLike, conversation_id: IdLike) -> ConversationHead | None:
        return read_head(self._parts.ctx, tenant_id, conversation_id)

    # ---- baselines and verification (raw CQL on this store's keyspace) --------------------
    def prepare_raw(self, cql: str, *, key_columns: tuple[str, ...] = (), kind: str | None = None) -> Stmt:
        """Prepare a statement the store itself never issues, ``{ks}`` replaced by this store's keyspace: the
        baselines of benchmarks and experiments, tests that look at the tables. Run it with
        ``store.connection.execute`` (counted by the same request accounting as the store's own requests)."""
        if not isinstance(cql, str) or not cql.strip():
            raise ValidationError("cql must be a non-empty str", field="cql")
        try:
            return self._parts.ctx.prepare(cql, key_columns=key_columns, kind=kind)
        except (KeyError, IndexError, ValueError) as exc:
            if isinstance(exc, ValidationError):
                raise
            raise ValidationError(f"cql may only hold the {{ks}} placeholder: {exc!r}", field="cql") from None

    def baseline_statements(self) -> BaselineStatements:
        """The prepared statements of send and history, exactly as the store prepares them
        (the commit path's record upserts come from ``seeding.statements``)."""
        return baseline_statements(self._parts.ctx, self._parts.batch_reader)

    def decode_record(self, row: Any) -> Message:
        """A :class:`Message` from a raw message_record row (driver row or mapping), opened
        with this store's DEKs, exactly as the read paths decode it."""
        return decode_row(row, self._parts.ctx.encryptor)

    def bucket_read_statement(self, tenant_id: IdLike, conversation_id: IdLike,
                              seq_bucket: int) -> tuple[Stmt, tuple]:
        """The statement and parameters :meth:`read_bucket` issues, for traced reads (S-6)."""
        stmt, bind = self._parts.history_reader.bucket_statement()
        return stmt, bind(tenant_id, conversation_id, check_bigint(seq_bucket, column="seq_bucket"))

    # ---- lifecycle -------------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._parts.close(close_connection=self._owns_connection)

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MessageStore(keyspace={self.keyspace!r}, node_id={self.node_id}, archiver_mode={self.archiver_mode})"


def __getattr__(name: str) -> Any:
    # the Redis hot window: imported on first use, so importing lab.store does not import redis
    if name == "HotWindow":
        from lab.store.hot.redis_window import HotWindow
        return HotWindow
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
