"""Seeding (``store.seeding``): messages written the way the store's own paths write them,
without going through ``send``. For benchmarks, experiments, migrations and the read-side
tests, which need thousands of rows, or shapes (holes, old created_at, chosen seqs) that the
send path cannot make quickly.

What a seeded row shares with a sent one: it is sealed by the store's record encoder with the
store's DEKs (``lab.store.rows.records.encode_record``: same envelope, AAD, bit-63 guards) and
written by the statements the commit path and the archiver use
(``lab.store.write.send.record_statements``: message_record + message_index, per-row
``USING TTL``, UNSET instead of null so no tombstone cells). By default the TTL is the
*remaining* period of the message's retention class from its created_at, as the archiver
writes it (an already-expired message is skipped, as the archiver skips it).

What seeding skips: the client_dedup LWT (``dedup=True`` writes the COMMITTED row directly),
the outbox and the asynchronous head update. Set the head with ``store.apply_head`` and
seq floors (holes) with ``store.advance_seq``; ids for new messages come from the store's
own allocator (:meth:`Seeder.allocate`), so seeded and sent messages never share a seq.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from lab.cluster.connection import Stmt
from lab.errors import ValidationError
from lab.store.plumbing.context import StoreContext
from lab.store.rows.ids import IdLike, parse_uuid
from lab.store.rows.model import DedupState
from lab.store.rows.records import Message, encode_record
from lab.store.write.sequence import Allocation, SequenceAllocator
from lab.store.write.send import record_statements

__all__ = ["SEED_CONCURRENCY", "Seeder"]

SEED_CONCURRENCY = 64  # plain upserts in flight while seeding


class Seeder:
    """Writes pre-built :class:`~lab.store.rows.records.Message` rows into one store's tables."""

    def __init__(self, ctx: StoreContext, sequences: SequenceAllocator) -> None:
        self._ctx = ctx
        self._sequences = sequences

    def allocate(self, tenant_id: IdLike, conversation_id: IdLike) -> Allocation:
        """The next conversation_seq of this writer with fresh message_id / last_activity_id,
        exactly as ``send`` would allocate them (§5.1 step 2)."""
        return self._sequences.allocate(parse_uuid(tenant_id), parse_uuid(conversation_id))

    def statements(self, message: Message, *, ttl_seconds: int | None = None, timestamp_us: int | None = None,
                   index: bool = True, dedup: bool = False) -> list[tuple[Stmt, tuple]]:
        """The upserts of one message, for callers that batch their own concurrency.

        ``ttl_seconds``: None = the remaining period of the message's class from its
        created_at (an expired message yields no statement); an int = that TTL (0 = none).
        ``timestamp_us`` pins the write time (``USING TIMESTAMP``); ``index`` writes
        message_index too; ``dedup`` adds the client_dedup row in state COMMITTED.
        """
        if not isinstance(message, Message):
            raise ValidationError(f"seeding takes lab.store.rows.records.Message rows, got {type(message).__name__}",
                                  field="message")
        ctx = self._ctx
        if ttl_seconds is None:
            ttl_seconds = ctx.retention.remaining_ttl_seconds(message.retention_class, message.tenant_id,
                                                              created_at_ms=message.created_at_ms,
                                                              now_ms=ctx.clock_ms())
            if ttl_seconds is None:
                return []
        columns = encode_record(message, ctx.encryptor, bucket_width=ctx.bucket_width,
                                thumbnail_max_bytes=ctx.constants.media_thumbnail_max_bytes)
        items = record_statements(ctx, columns, ttl_seconds, timestamp_us=timestamp_us, index=index)
        if dedup:
            using = "" if timestamp_us is None else " USING TIMESTAMP ?"
            stmt = ctx.prepare("INSERT INTO {ks}.client_dedup (tenant_id, sender_id, client_message_id, message_id, "
                               f"conversation_seq, state, created_at) VALUES (?, ?, ?, ?, ?, ?, ?){using}")
            values = (columns["tenant_id"], columns["sender_id"], columns["client_message_id"], columns["message_id"],
                      columns["conversation_seq"], int(DedupState.COMMITTED), columns["created_at"])
            items.append((stmt, values + (() if timestamp_us is None else (timestamp_us,))))
        return items

    def write(self, messages: Iterable[Message], *, ttl_seconds: int | None = None,
              timestamp_us: int | None = None, index: bool = True, dedup: bool = False,
              concurrency: int = SEED_CONCURRENCY) -> int:
        """Write every message (see :meth:`statements`), ``concurrency`` upserts in flight;
        returns how many were written (expired ones are not)."""
        written = 0
        chunk: list[tuple[Stmt, tuple]] = []
        for message in messages:
            items = self.statements(message, ttl_seconds=ttl_seconds, timestamp_us=timestamp_us, index=index,
                                    dedup=dedup)
            written += bool(items)
            chunk += items
            if len(chunk) >= 4 * concurrency:
                self._execute(chunk, concurrency)
                chunk = []
        if chunk:
            self._execute(chunk, concurrency)
        return written

    def _execute(self, statements: list[tuple[Stmt, tuple]], concurrency: int) -> Any:
        return self._ctx.connection.execute_concurrent(statements, concurrency=concurrency)
