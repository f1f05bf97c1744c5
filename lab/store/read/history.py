"""History paging over seq_bucket partitions (design §4.1) and the per-partition row bound (§4.2).
The page walk is one sans-IO generator (lab.store.plumbing.steps): ``history`` drives it on the calling
thread, ``history_async`` on the driver's event loop; with a hot layer its Redis read is a blocking
step the asynchronous driver runs in a small pool, in the same place of the walk.
Where the walk differs from the design's pseudo-code, and why: docs/store-internals.md.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from typing import Any

from lab.cluster.connection import Stmt
from lab.store.plumbing.context import StoreContext
from lab.errors import KeyNotCached, ValidationError
from lab.store.hot import HotLayer, merge_rows
from lab.store.read.bucket import BucketQuery, BucketRead, Direction, check_bucket_rows, older_params, whole_rows
from lab.store.plumbing.steps import Blocking, BlockingPool, Cql, Walk, run, start_prepared
from lab.store.rows.ids import check_bigint, parse_uuid
from lab.store.plumbing.lru import Lru
from lab.store.rows.records import MESSAGE_RECORD_COLUMNS, PARTITION_ROW_COLUMNS, Message, decode_rows

DIRECTIONS: tuple[str, ...] = ("older", "newer")
DEFAULT_HISTORY_LIMIT = 50
HISTORY_LIMIT_MAX = (1 << 31) - 1  # CQL LIMIT binds a signed 32-bit int
FIRST_CONVERSATION_SEQ = 1  # conversation_seq starts at 1; 0 is the head's "no message yet"
HEAD_HINT_ENTRIES = 65536  # conversations whose last seen H a reader keeps (where their latest page starts)
BLOCKING_WORKERS = 2  # threads of history_async's blocking steps (the hot layer's Redis read), one pool per reader

_COLUMNS = ", ".join(MESSAGE_RECORD_COLUMNS)
# A page's reads name their partition, so they do not select its key: per row the driver builds two
# UUIDs and a bigint fewer, and decode_rows(partition=...) puts the page's one key back.
_ROW_COLUMNS = ", ".join(PARTITION_ROW_COLUMNS)
_PARTITION = "tenant_id = ? AND conversation_id = ? AND seq_bucket = ?"
# H and E; and an older page's bucket read, params (tenant, conversation, bucket, to, from, limit), both
# bounds inclusive: an exclusive upper bound of the top bucket would be 2**63, past any bigint.
# Module constants: the benchmark's history_floor issues these very texts.
BOUNDS_CQL = ("SELECT latest_conversation_seq, earliest_available_conversation_seq "
              "FROM {ks}.conversation_head WHERE tenant_id = ? AND conversation_id = ?")
OLDER_PAGE_CQL = (f"SELECT {_ROW_COLUMNS} FROM {{ks}}.message_record WHERE {_PARTITION} "
                  "AND conversation_seq <= ? AND conversation_seq >= ? ORDER BY conversation_seq DESC LIMIT ?")


@dataclass(frozen=True, kw_only=True)
class HistoryPage:
    """One page of history, in scan order (older: newest first; newer: oldest first).

    ``requests`` counts every CQL request the page issued (the conversation_head read
    included); ``buckets_scanned`` the message_record partition reads among them, of which
    ``empty_buckets_scanned`` returned no row. ``next_anchor`` is the anchor of the next
    page in the same direction, or None when ``has_more`` is false.
    """

    messages: tuple[Message, ...]
    has_more: bool
    next_anchor: int | None
    buckets_scanned: int
    empty_buckets_scanned: int
    requests: int
    stopped_on_empty: bool


@dataclass(frozen=True, kw_only=True)
class HistoryBounds:
    """H and E of a conversation, as conversation_head holds them."""

    latest_conversation_seq: int
    earliest_available_conversation_seq: int


def _check_limit(limit: object) -> int:
    # bool is an int subclass; True as a page size is a caller bug
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= HISTORY_LIMIT_MAX:
        raise ValidationError(f"limit must be an int in 1..{HISTORY_LIMIT_MAX}, got {limit!r}",
                              field="limit", value=limit)
    return limit


def _checked(tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str, direction: object, anchor: object,
             limit: object) -> tuple[uuid.UUID, uuid.UUID, Direction, int | None, int]:
    """A page's arguments, parsed and checked (ValidationError)."""
    tenant_id, conversation_id = parse_uuid(tenant_id), parse_uuid(conversation_id)
    if direction not in DIRECTIONS:
        raise ValidationError(f"direction must be one of {', '.join(DIRECTIONS)}, got {direction!r}",
                              field="direction", value=direction)
    limit = _check_limit(limit)
    if anchor is not None:
        anchor = check_bigint(anchor, column="anchor")
    return tenant_id, conversation_id, direction, anchor, limit  # type: ignore[return-value]


class HistoryReader:
    """Reads history pages of one store. Statements are prepared on first use, so
    constructing a reader touches nothing (the tables may not exist yet). Rows are decoded by
    :func:`lab.store.rows.records.decode_rows` with the store's encryptor: a page's rows come without
    their partition's key (``partition``), a whole-partition read's with it."""

    def __init__(self, ctx: StoreContext, *, hot: HotLayer | None = None,
                 written_head: Callable[[uuid.UUID, uuid.UUID], int | None] | None = None, hint_entries: int = HEAD_HINT_ENTRIES) -> None:
        self.ctx = ctx
        self._hot = hot
        # where a latest page starts: the H this reader last saw, or the head this store last wrote
        # keyed by the ids' ints: a tuple of two ints hashes in C, a tuple of two UUIDs calls UUID.__hash__ twice
        self._seen: Lru[tuple[int, int], int] = Lru(hint_entries)
        self._written_head = written_head or (lambda _t, _c: None)
        self.connection = ctx.connection
        self.constants = ctx.constants
        self._stmts: dict[str, Stmt] = {}
        self._pool = BlockingPool(BLOCKING_WORKERS, "lab-history-blocking")  # history_async's blocking steps

    def _stmt(self, name: str) -> Stmt:
        stmt = self._stmts.get(name)
        if stmt is None:
            cql = {
                "bounds": BOUNDS_CQL,
                "older": OLDER_PAGE_CQL,
                "newer": f"SELECT {_ROW_COLUMNS} FROM {{ks}}.message_record WHERE {_PARTITION} "
                         f"AND conversation_seq > ? AND conversation_seq <= ? "
                         f"ORDER BY conversation_seq ASC LIMIT ?",
                "bucket": f"SELECT {_COLUMNS} FROM {{ks}}.message_record WHERE {_PARTITION} LIMIT ?",
            }[name]
            key = ("tenant_id", "conversation_id") if name == "bounds" else ()
            stmt = self._stmts[name] = self.ctx.prepare(cql, key_columns=key)
        return stmt

    # -- bounds --------------------------------------------------------------------------------

    def bounds(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID) -> HistoryBounds | None:
        """H and E from conversation_head, or None when the conversation has no head yet."""
        return self._bounds_of(tenant_id, conversation_id,
                               self.connection.execute(self._stmt("bounds"), (tenant_id, conversation_id)).one())

    def _bounds_of(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID, row: Any) -> HistoryBounds | None:
        head = self._head_of(tenant_id, conversation_id, row)
        return None if head is None else HistoryBounds(latest_conversation_seq=head[0],
                                                       earliest_available_conversation_seq=head[1])

    def _head_of(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID, row: Any) -> tuple[int, int] | None:
        """(H, E) of a conversation_head row, remembered as this reader's last seen H; None without a head."""
        if row is None or row.latest_conversation_seq is None:
            return None
        self._seen.put((tenant_id.int, conversation_id.int), row.latest_conversation_seq)
        return row.latest_conversation_seq, row.earliest_available_conversation_seq or 0

    # -- pages ---------------------------------------------------------------------------------

    def history(self, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str, *,
                direction: Direction = "older", anchor: int | None = None,
                limit: int = DEFAULT_HISTORY_LIMIT) -> HistoryPage:
        """One page before (older) or after (newer) ``anchor`` (exclusive); None = latest page."""
        return run(self._page(*_checked(tenant_id, conversation_id, direction, anchor, limit)), self.connection)

    def history_async(self, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str, *,
                      direction: Direction = "older", anchor: int | None = None,
                      limit: int = DEFAULT_HISTORY_LIMIT) -> Future[HistoryPage]:
        """:meth:`history`'s page, the same steps chained on the driver's event loop. Arguments are
        checked here (ValidationError at once); any later error, mapped as :meth:`history` raises it,
        is the future's."""
        page = self._page(*_checked(tenant_id, conversation_id, direction, anchor, limit))
        return start_prepared(page, self.connection, self._pool,
                              lambda: [self._stmt(name) for name in ("bounds", "older", "newer")])


    def close(self) -> None:
        """Stop the blocking steps' pool (after the steps queued in it)."""
        self._pool.close()

    def _page(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID, direction: Direction, anchor: int | None,
              limit: int) -> Walk[HistoryPage]:
        """The page walk, its arguments checked (:func:`_checked`)."""
        if direction == "older":
            guess = self._first_read_guess(tenant_id, conversation_id, anchor)
            if guess is not None:
                return (yield from self._older_in_one_round_trip(tenant_id, conversation_id, *guess, anchor=anchor,
                                                                 limit=limit))
        (head,) = yield Cql(((self._stmt("bounds"), (tenant_id, conversation_id)),))
        bounds = self._bounds_of(tenant_id, conversation_id, head[0] if head else None)
        if bounds is None:
            return _empty_page(requests=1)
        high = bounds.latest_conversation_seq
        low = max(bounds.earliest_available_conversation_seq, FIRST_CONVERSATION_SEQ)
        if direction == "older":
            # exclusive upper bound: H + 1 for the latest page so that H itself is on it
            upper = high + 1 if anchor is None else min(anchor, high + 1)
            return (yield from self._older(tenant_id, conversation_id, upper=upper, low=low, limit=limit))
        # anchor None for newer is the pseudo-code's "anchor := H": nothing is newer than H
        lower = high if anchor is None else max(anchor, low - 1)
        return (yield from self._newer(tenant_id, conversation_id, lower=lower, high=high, limit=limit))

    def _older(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID, *, upper: int, low: int,
               limit: int, walk: _Walk | None = None, first: BucketRead | None = None) -> Walk[HistoryPage]:
        """The older walk from ``upper`` (exclusive) down to ``low``; ``first``: the first bucket's
        read, already issued (the one-round-trip page), ``walk`` the counts so far."""
        width = self.constants.message_seq_bucket_width
        walk = walk if walk is not None else _Walk(limit=limit)
        if upper - 1 < low:  # the anchor is at or below E: nothing older is available
            return walk.page(has_more=False)
        bucket = (upper - 1) // width
        continued = False
        while True:
            if first is not None:
                read, first = first, None
            else:
                read = yield from self._read(BucketQuery(
                    tenant_id=tenant_id, conversation_id=conversation_id, bucket=bucket, direction="older",
                    anchor=upper, bound=low, fetch=limit - walk.collected))
            walk.take(read.messages, continued=continued, more=read.more)
            if walk.collected >= limit:
                return walk.page(has_more=walk.messages[-1].conversation_seq > low)
            if read.more:  # partial rows were skipped from a full read: the bucket goes on below
                upper, continued = min(read.last_seq, upper), True
                continue
            continued = False
            if bucket * width <= low:  # the bucket reaches E: retention edge
                return walk.page(has_more=False)
            if walk.empty_run_exhausted(self.constants.history_max_empty_bucket_scan):
                self.ctx.alerts.incr("empty_bucket_stops")
                return walk.page(has_more=False, stopped_on_empty=True)
            bucket -= 1
            upper = (bucket + 1) * width

    def _first_read_guess(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID,
                          anchor: int | None) -> tuple[int, int] | None:
        """(bucket, exclusive upper seq) an older page's first read can be issued with before H
        and E are known, or None. An anchored page knows its bucket; the latest page guesses the
        one holding the H this reader last saw or this store last wrote (none known: None)."""
        width = self.constants.message_seq_bucket_width
        if anchor is not None:
            return None if anchor <= FIRST_CONVERSATION_SEQ else ((anchor - 1) // width, anchor)
        hints = [h for h in (self._seen.get((tenant_id.int, conversation_id.int)),
                             self._written_head(tenant_id, conversation_id)) if h]
        if not hints:
            return None
        bucket = max(hints) // width
        return bucket, (bucket + 1) * width

    def _older_in_one_round_trip(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID, bucket: int, guess: int,
                                 *, anchor: int | None, limit: int) -> Walk[HistoryPage]:
        """An older page whose first bucket read runs concurrently with the conversation_head read:
        the rows of ``bucket`` below ``guess`` (at most ``limit``), clamped to [E, H] once the head
        answered. When the page's first bucket turns out to be another one (H moved on since the
        guess, or the anchor lies above H + 1 in another bucket) the read is spent (counted in
        ``requests`` and ``buckets_scanned``, never as an empty bucket) and the walk reads as usual."""
        issued = older_params(tenant_id, conversation_id, bucket, anchor=guess, bound=FIRST_CONVERSATION_SEQ, fetch=limit)
        head, rows = yield Cql(((self._stmt("bounds"), (tenant_id, conversation_id)), (self._stmt("older"), issued)))
        walk = _Walk(limit=limit)
        bounds = self._head_of(tenant_id, conversation_id, head[0] if head else None)
        if bounds is None:
            walk.spent()
            return walk.page(has_more=False)
        high, earliest = bounds
        low = max(earliest, FIRST_CONVERSATION_SEQ)
        upper = high + 1 if anchor is None else min(anchor, high + 1)
        width = self.constants.message_seq_bucket_width
        if upper - 1 < low or (upper - 1) // width != bucket:
            walk.spent()
            return (yield from self._older(tenant_id, conversation_id, upper=upper, low=low, limit=limit, walk=walk))
        check_bucket_rows(rows, width=width, table="message_record", tenant_id=tenant_id,
                          conversation_id=conversation_id, seq_bucket=bucket)
        last_seq = rows[-1].conversation_seq if rows else None
        # cut by its LIMIT above E: the bucket may go on below the last row (rows above H took places)
        more = len(rows) == limit and last_seq > low
        page_query = BucketQuery(tenant_id=tenant_id, conversation_id=conversation_id, bucket=bucket,
                                 direction="older", anchor=upper, bound=low, fetch=limit)
        # one partition's rows come newest first (the statement's ORDER BY), so the rows in [low, upper) are
        # one run of them: when the first and the last are inside, all are (the common case, no pass per row)
        inside = not rows or (rows[0].conversation_seq < upper and last_seq >= low)
        read = yield from self._decoded(page_query, rows if inside else
                                        [row for row in rows if low <= row.conversation_seq < upper], more=more,
                                        last_seq=last_seq)
        return (yield from self._older(tenant_id, conversation_id, upper=upper, low=low, limit=limit, walk=walk,
                                       first=read))

    def _newer(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID, *, lower: int, high: int,
               limit: int) -> Walk[HistoryPage]:
        width = self.constants.message_seq_bucket_width
        if lower + 1 > high:  # nothing newer than the anchor up to H
            return _empty_page(requests=1)
        bucket = (lower + 1) // width
        walk = _Walk(limit=limit)
        continued = False
        while True:
            read = yield from self._read(BucketQuery(tenant_id=tenant_id, conversation_id=conversation_id, bucket=bucket,
                                                     direction="newer", anchor=lower, bound=high,
                                                     fetch=limit - walk.collected))
            walk.take(read.messages, continued=continued, more=read.more)
            if walk.collected >= limit:
                return walk.page(has_more=walk.messages[-1].conversation_seq < high)
            if read.more:
                lower, continued = read.last_seq, True
                continue
            continued = False
            if bucket * width + width - 1 >= high:  # the bucket reaches H
                return walk.page(has_more=False)
            if walk.empty_run_exhausted(self.constants.history_max_empty_bucket_scan):
                self.ctx.alerts.incr("empty_bucket_stops")
                return walk.page(has_more=False, stopped_on_empty=True)
            bucket += 1
            lower = bucket * width - 1

    def _read(self, q: BucketQuery) -> Walk[BucketRead]:
        """One bucket read, S-4 checked, decoded, merged with the hot layer."""
        (rows,) = yield Cql(((self._stmt(q.direction), q.params()),))
        check_bucket_rows(rows, width=self.constants.message_seq_bucket_width, table="message_record",
                          tenant_id=q.tenant_id, conversation_id=q.conversation_id, seq_bucket=q.bucket)
        return (yield from self._decoded(q, rows, more=len(rows) == q.fetch,
                                         last_seq=rows[-1].conversation_seq if rows else None))

    def _decoded(self, q: BucketQuery, rows: list[Any], *, more: bool, last_seq: int | None) -> Walk[BucketRead]:
        encryptor, partition = self.ctx.encryptor, (q.tenant_id, q.conversation_id, q.bucket)
        # partial rows (no message_id) left out in the decode's own pass; keys from the cache only, so that
        # a page on the driver's loop never waits for the key store there: a key not held is read in a
        # blocking step, and the page decoded again
        try:
            messages = decode_rows(rows, encryptor, partition=partition, skip_partial=True, cached_only=True)
        except KeyNotCached:
            yield Blocking(lambda: encryptor.load_keys({row.dek_id for row in rows}))
            messages = decode_rows(rows, encryptor, partition=partition, skip_partial=True)
        if len(messages) != len(rows):  # partial rows left out (lab.store.read.bucket.whole_rows counts them alike)
            self.ctx.alerts.incr("partial_rows_skipped", len(rows) - len(messages))
        if self._hot is not None:
            # the hot layer is merged over the range this read covered
            low, high = q.covered(last_seq, more=more)
            hot = yield Blocking(partial(self._hot.bucket_range, q.tenant_id, q.conversation_id, q.bucket, low=low,
                                         high=high, limit=q.fetch, descending=q.descending))
            messages = merge_rows(messages, hot, descending=q.descending, limit=q.fetch)
        return BucketRead(messages=messages, more=more, last_seq=last_seq)

    # -- whole partitions ------------------------------------------------------------------------

    def read_bucket(self, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str,
                    bucket: int) -> list[Message]:
        """Every row of one message_record partition (newest first), S-4 checked.

        Asks for ``W + 1`` rows so that an over-full partition shows itself instead of
        being cut at the limit; admin / verification use, not a page.
        """
        tenant_id, conversation_id = parse_uuid(tenant_id), parse_uuid(conversation_id)
        bucket = check_bigint(bucket, column="seq_bucket")
        width = self.constants.message_seq_bucket_width
        rows = list(self.connection.execute(self._stmt("bucket"), (tenant_id, conversation_id, bucket, width + 1)))
        check_bucket_rows(rows, width=width, table="message_record", tenant_id=tenant_id,
                          conversation_id=conversation_id, seq_bucket=bucket)
        return decode_rows(whole_rows(rows, self.ctx), self.ctx.encryptor)  # type: ignore[return-value]

    def bucket_statement(self) -> tuple[Stmt, Callable[..., tuple[Any, ...]]]:
        """The whole-partition SELECT and a binder ``(tenant, conversation, bucket) -> params``,
        for traced reads (S-6) that must issue exactly what :meth:`read_bucket` issues."""
        width = self.constants.message_seq_bucket_width
        return self._stmt("bucket"), lambda t, c, b: (parse_uuid(t), parse_uuid(c), b, width + 1)


class _Walk:
    """Accumulator of one page walk: rows, empty runs and the counts the page reports."""

    def __init__(self, *, limit: int) -> None:
        self.limit = limit
        self.messages: list[Message] = []
        self.empty_run = 0
        self.buckets = 0
        self.empty_buckets = 0
        self._bucket_messages = 0

    @property
    def collected(self) -> int:
        return len(self.messages)

    def spent(self) -> None:
        """A partition read that turned out not to be the walk's (a one-round-trip guess that
        missed): a request and a bucket scanned, not a step of the empty run."""
        self.buckets += 1

    def take(self, rows: list[Message], *, continued: bool = False, more: bool = False) -> None:
        """One partition read's rows; ``continued``: another read of the bucket just read;
        ``more``: the bucket goes on below this read (it was cut by its LIMIT). A bucket is
        empty when its last read ends with no message from any of its reads: a full read of
        rows the page cannot use (partial rows, rows above a lagging H) is not yet an empty one."""
        self.buckets += 1
        if not continued:
            self._bucket_messages = 0
        self._bucket_messages += len(rows)
        if rows:
            self.empty_run = 0
        elif not more and self._bucket_messages == 0:
            self.empty_run += 1
            self.empty_buckets += 1
        self.messages.extend(rows)

    def empty_run_exhausted(self, max_empty: int) -> bool:
        """S-3: the current run of empty buckets used the whole allowance (see the module
        docstring for ``>=`` vs the pseudo-code's ``>``); a run of 0 never stops a page."""
        return self.empty_run > 0 and self.empty_run >= max_empty

    def page(self, *, has_more: bool, stopped_on_empty: bool = False) -> HistoryPage:
        return HistoryPage(messages=tuple(self.messages), has_more=has_more,
                           next_anchor=self.messages[-1].conversation_seq if has_more and self.messages else None,
                           buckets_scanned=self.buckets, empty_buckets_scanned=self.empty_buckets,
                           requests=1 + self.buckets, stopped_on_empty=stopped_on_empty)


def _empty_page(*, requests: int) -> HistoryPage:
    return HistoryPage(messages=(), has_more=False, next_anchor=None, buckets_scanned=0,
                       empty_buckets_scanned=0, requests=requests, stopped_on_empty=False)
