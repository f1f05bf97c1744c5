"""Grouped batch read of message bodies (design §4.3) with reaction summaries (§4.4): one walk
(lab.store.plumbing.steps), ``read`` on the calling thread, ``read_async`` on the driver's loop.

More: docs/store-internals.md.
"""
from __future__ import annotations

import functools
import operator
import uuid
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from lab.cluster.connection import Stmt
from lab.store.plumbing.context import StoreContext
from lab.store.plumbing.steps import Blocking, BlockingPool, Cql, Walk, run, start_prepared
from lab.errors import KeyNotCached, ValidationError
from lab.store.rows.ids import BIT63, U128_MAX, check_conversation_seq, parse_uuid, u128_to_blob
from lab.store.read.reactions import ReactionSummary, summary_from_row
from lab.store.hot import HotLayer
from lab.store.read.body_cache import BodyCache
from lab.store.read.bucket import check_bucket_rows, whole_rows
from lab.store.rows.records import PARTITION_ROW_COLUMNS, Message, decode_rows

DEFAULT_BATCH_CONCURRENCY = 32  # requests in flight per batch; groups beyond wait for a slot
BLOCKING_WORKERS = 2  # read_async's blocking step (the hot layer's Redis lookup), one pool per reader
_STATEMENTS = ("record_in", "record_range", "summary_in", "summary_range")

_COLUMNS = ", ".join(PARTITION_ROW_COLUMNS)  # the group names its partition: its key is not selected
_SUMMARY_COLUMNS = "conversation_seq, counts, summary_version, updated_at"
_PARTITION = "tenant_id = ? AND conversation_id = ? AND seq_bucket = ?"
_NONE = object()
_MESSAGE_ID = operator.attrgetter("message_id")


@dataclass(frozen=True, kw_only=True)
class BatchEntry:
    """One message to join. ``inline_body`` set means the entry already carries its body."""

    conversation_id: uuid.UUID
    conversation_seq: int
    message_id: int
    inline_body: bytes | None = field(default=None, repr=False)


@dataclass(frozen=True, kw_only=True)
class BatchResult:
    """Bodies and summaries by message_id.

    ``groups``: (conversation, bucket) partitions read; ``requests``: CQL requests issued
    (message_record and message_reaction_summary together; IN splits count each);
    ``lru_hits`` / ``inline_skipped`` / ``hot_hits``: entries answered without a read of
    message_record (unique message_ids / entries / unique message_ids from the hot layer); ``missing``: message_ids asked for but not found (expired by TTL, wrong
    coordinate, crypto-erased conversation); ``decoded``: rows decoded (one per message_id).
    """

    messages: dict[int, Message]
    summaries: dict[int, ReactionSummary]
    groups: int
    requests: int
    lru_hits: int
    inline_skipped: int
    missing: tuple[int, ...] = ()
    decoded: int = 0
    hot_hits: int = 0


@dataclass(frozen=True, kw_only=True)
class _Group:
    """The misses of one message_record partition: seq -> message_id."""

    conversation_id: uuid.UUID
    bucket: int
    wanted: dict[int, int]

    def predicates(self, in_list_limit: int, range_min_density: float) -> list[tuple[str, tuple[Any, ...]]]:
        """('range', (lo, hi)) when the seqs fill at least ``range_min_density`` of their span,
        else ('in', (chunk,)) per IN-list chunk."""
        seqs = sorted(self.wanted)
        if len(seqs) / (seqs[-1] - seqs[0] + 1) >= range_min_density:
            return [("range", (seqs[0], seqs[-1]))]
        return [("in", (seqs[i:i + in_list_limit],)) for i in range(0, len(seqs), in_list_limit)]


class BatchReader:
    """Grouped batch reads of one store; statements are prepared on first use. The body
    cache defaults to a new LRU of ``body_lru_entries``. Rows are decoded by
    :func:`lab.store.rows.records.decode_rows` with the store's encryptor (a row not asked for, or a
    crypto-erased one, decodes as None)."""

    def __init__(self, ctx: StoreContext, *, cache: BodyCache | None = None,
                 concurrency: int = DEFAULT_BATCH_CONCURRENCY, hot: HotLayer | None = None) -> None:
        self.ctx = ctx
        self._hot = hot
        self.connection = ctx.connection
        self.constants = ctx.constants
        self.cache = cache if cache is not None else BodyCache(ctx.constants.body_lru_entries)
        self.concurrency = concurrency
        self._stmts: dict[str, Stmt] = {}
        self._pool = BlockingPool(BLOCKING_WORKERS, "lab-batch-blocking")  # read_async's blocking steps

    def _stmt(self, name: str) -> Stmt:
        stmt = self._stmts.get(name)
        if stmt is None:
            table, columns = (("message_record", _COLUMNS) if name.startswith("record")
                              else ("message_reaction_summary", _SUMMARY_COLUMNS))
            predicate = ("conversation_seq IN ?" if name.endswith("in")
                         else "conversation_seq >= ? AND conversation_seq <= ?")
            stmt = self._stmts[name] = self.ctx.prepare(
                f"SELECT {columns} FROM {{ks}}.{table} WHERE {_PARTITION} AND {predicate}")
        return stmt

    def _coordinates(self, entries: Iterable[BatchEntry]) -> tuple[dict[int, tuple[uuid.UUID, int]], int]:
        """Every entry checked: (message_id -> (conversation, seq) of the entries to read, inline
        entries skipped)."""
        if isinstance(entries, (str, bytes, Mapping)) or not isinstance(entries, Iterable):
            raise ValidationError(f"batch entries must be an iterable of BatchEntry, got {type(entries).__name__}",
                                  field="entries")
        inline_skipped = 0
        coordinates: dict[int, tuple[uuid.UUID, int]] = {}
        given: Any = _NONE  # the last entry's conversation_id as given, and parsed
        parsed: Any = None
        for entry in entries:
            if type(entry) is not BatchEntry and not isinstance(entry, BatchEntry):
                raise ValidationError(f"batch entries must be BatchEntry, got {type(entry).__name__}")
            # Every entry is checked, inline ones too: a malformed entry is a caller bug
            # whether or not this batch happens to need its coordinate. The plain shapes (a UUID,
            # an int seq in range, an int u128) pass inline; anything else takes the checked path,
            # which raises the typed error or normalises it.
            if entry.conversation_id is not given:  # entries of one conversation share its id object
                given, parsed = entry.conversation_id, parse_uuid(entry.conversation_id)
            conversation_id = parsed
            seq = entry.conversation_seq
            if type(seq) is not int or not 0 < seq < BIT63:
                seq = check_conversation_seq(seq)
            if type(entry.message_id) is not int or not 0 <= entry.message_id <= U128_MAX:
                u128_to_blob(entry.message_id)  # raises the typed error for a non-u128
            if entry.inline_body is not None:
                if not isinstance(entry.inline_body, (bytes, bytearray, memoryview)):
                    raise ValidationError(f"inline_body must be bytes, got {type(entry.inline_body).__name__}",
                                          field="inline_body", message_id=entry.message_id)
                inline_skipped += 1
                continue
            coordinate = (conversation_id, seq)
            seen = coordinates.setdefault(entry.message_id, coordinate)
            if seen is not coordinate and seen != coordinate:
                raise ValidationError(f"message_id {entry.message_id} is given two coordinates {seen} and "
                                      f"{coordinate}", message_id=entry.message_id)
        return coordinates, inline_skipped

    def _plan(self, tenant_id: uuid.UUID, missing: Mapping[int, tuple[uuid.UUID, int]]) -> tuple[
            list[tuple[Stmt, tuple[Any, ...]]], list[tuple[str, _Group]], int]:
        """The statements that read ``missing`` (grouped by partition: records and summaries), who
        owns each result, and the number of groups."""
        width = self.constants.message_seq_bucket_width
        # by (conversation_id.int, bucket): ints hash in C, a UUID's hash is a Python call per entry
        groups: dict[tuple[int, int], tuple[uuid.UUID, int, dict[int, int]]] = {}
        last_conversation: Any = None
        last_bucket = -1
        wanted: dict[int, int] = {}
        for message_id, (conversation_id, seq) in missing.items():  # seqs checked: the bucket is their division
            bucket = seq // width
            if conversation_id is not last_conversation or bucket != last_bucket:  # entries come conversation-wise
                key = (conversation_id.int, bucket)
                if key not in groups:
                    groups[key] = (conversation_id, bucket, {})
                wanted, last_conversation, last_bucket = groups[key][2], conversation_id, bucket
            wanted[seq] = message_id
        statements: list[tuple[Stmt, tuple[Any, ...]]] = []
        owners: list[tuple[str, _Group]] = []
        for conversation_id, bucket, wanted in groups.values():
            group = _Group(conversation_id=conversation_id, bucket=bucket, wanted=wanted)
            for kind, args in group.predicates(self.constants.batch_read_in_list_limit,
                                               self.constants.batch_read_range_min_density):
                for table in ("record", "summary"):
                    statements.append((self._stmt(f"{table}_{kind}"), (tenant_id, conversation_id, bucket, *args)))
                    owners.append((table, group))
        return statements, owners, len(groups)

    def statements(self, tenant_id: uuid.UUID | str, entries: Iterable[BatchEntry]) -> list[tuple[Stmt, tuple]]:
        """The CQL :meth:`read` issues for ``entries`` when nothing is cached (no LRU or hot-window
        hit): one request per (conversation, bucket) group and table, or per IN-list chunk. For the
        benchmark's raw fetch of the same rows."""
        tenant_id = parse_uuid(tenant_id)
        coordinates, _ = self._coordinates(entries)
        return self._plan(tenant_id, coordinates)[0]

    def read(self, tenant_id: uuid.UUID | str, entries: Iterable[BatchEntry]) -> BatchResult:
        tenant_id = parse_uuid(tenant_id)
        return run(self._walk(tenant_id, *self._coordinates(entries)), self.connection)

    def read_async(self, tenant_id: uuid.UUID | str, entries: Iterable[BatchEntry]) -> Future[BatchResult]:
        """:meth:`read` chained on the driver's event loop (every group's requests at once). Entries
        are checked here (the error raised at once); any later error is the future's."""
        tenant_id = parse_uuid(tenant_id)
        walk = self._walk(tenant_id, *self._coordinates(entries))
        return start_prepared(walk, self.connection, self._pool, lambda: [self._stmt(name) for name in _STATEMENTS])

    def close(self) -> None:
        """Stop the blocking steps' pool (after the steps queued in it)."""
        self._pool.close()


    def _decode_groups(self, tenant_id: uuid.UUID, records: list[tuple[_Group, list[Any]]], *,
                       cached_only: bool) -> list[list[Message]]:
        """Each group's messages: None (a row not asked for: a range's other rows, another message at a
        wanted coordinate; or a crypto-erased conversation's, reported as missing) left out."""
        encryptor = self.ctx.encryptor
        return [[m for m in decode_rows(rows, encryptor, skip_destroyed=True, wanted=group.wanted,
                                        partition=(tenant_id, group.conversation_id, group.bucket),
                                        cached_only=cached_only) if m is not None]
                for group, rows in records]

    def _walk(self, tenant_id: uuid.UUID, coordinates: dict[int, tuple[uuid.UUID, int]],
              inline_skipped: int) -> Walk[BatchResult]:
        width = self.constants.message_seq_bucket_width
        token = self.cache.token()  # before any row is read: a change after it keeps its rows out of the LRU
        messages: dict[int, Message] = self.cache.get_many(tenant_id, coordinates)
        lru_hits = len(messages)
        hot_hits = 0
        if self._hot is not None:
            held = yield Blocking(functools.partial(
                self._hot.lookup, tenant_id, {mid: c for mid, c in coordinates.items() if mid not in messages}))
            held = {mid: m for mid, m in held.items() if mid in coordinates and m.message_id == mid}
            messages.update(held)
            hot_hits = len(held)
        statements, owners, groups = self._plan(
            tenant_id, {mid: c for mid, c in coordinates.items() if mid not in messages} if messages else coordinates)
        results = (yield Cql(tuple(statements), concurrency=self.concurrency)) if statements else []

        pending_summaries: list[tuple[int, Any]] = []
        records: list[tuple[_Group, list[Any]]] = []
        for (table, group), rows in zip(owners, results):
            if table == "summary":
                pending_summaries += [(group.wanted[row.conversation_seq], row) for row in rows
                                      if row.conversation_seq in group.wanted]
                continue
            check_bucket_rows(rows, width=width, table="message_record", tenant_id=tenant_id,
                              conversation_id=group.conversation_id, seq_bucket=group.bucket)
            records.append((group, whole_rows(rows, self.ctx)))
        # keys from the cache only, so that a read on the driver's loop never waits for the key store
        # there: a key not held is read in a blocking step, and the groups decoded again
        try:
            decoded_groups = self._decode_groups(tenant_id, records, cached_only=True)
        except KeyNotCached:
            encryptor = self.ctx.encryptor
            yield Blocking(lambda: encryptor.load_keys({row.dek_id for _, rows in records for row in rows}))
            decoded_groups = self._decode_groups(tenant_id, records, cached_only=False)
        summaries: dict[int, ReactionSummary] = {}
        decoded = 0
        for fresh in decoded_groups:
            decoded += len(fresh)
            messages.update(zip(map(_MESSAGE_ID, fresh), fresh))
            self.cache.put_many(fresh, since=token)
        for message_id, row in pending_summaries:
            if message_id in messages:
                summaries[message_id] = summary_from_row(tenant_id, coordinates[message_id][0], row)
        missing = tuple(mid for mid in coordinates if mid not in messages)
        return BatchResult(messages=messages, summaries=summaries, groups=groups, requests=len(statements),
                           lru_hits=lru_hits, inline_skipped=inline_skipped, missing=missing, decoded=decoded,
                           hot_hits=hot_hits)
