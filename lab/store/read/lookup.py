"""Admin / moderation lookup of a message by message_id (design §2.2).

More: docs/store-internals.md.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from lab.cluster.connection import Stmt
from lab.store.plumbing.context import StoreContext
from lab.errors import NotFound
from lab.store.rows.ids import blob_to_u128, parse_uuid, u128_to_blob
from lab.store.rows.records import MESSAGE_RECORD_COLUMNS, MESSAGE_RECORD_KEY, Message, decode_row

_INDEX_KEY = ("tenant_id", "message_id")


class AdminLookup:
    def __init__(self, ctx: StoreContext, *, decode: Callable[[Any], Message] | None = None) -> None:
        self.ctx = ctx
        self.connection = ctx.connection
        self._decode = decode if decode is not None else (lambda row: decode_row(row, ctx.encryptor))
        self._stmts: dict[str, Stmt] = {}

    def _stmt(self, name: str) -> Stmt:
        stmt = self._stmts.get(name)
        if stmt is None:
            if name == "index":
                stmt = self.ctx.prepare(
                    "SELECT conversation_id, conversation_seq, seq_bucket FROM {ks}.message_index "
                    "WHERE tenant_id = ? AND message_id = ?", key_columns=_INDEX_KEY)
            else:
                stmt = self.ctx.prepare(
                    f"SELECT {', '.join(MESSAGE_RECORD_COLUMNS)} FROM {{ks}}.message_record WHERE tenant_id = ? "
                    "AND conversation_id = ? AND seq_bucket = ? AND conversation_seq = ?",
                    key_columns=MESSAGE_RECORD_KEY)
            self._stmts[name] = stmt
        return stmt

    def lookup(self, tenant_id: uuid.UUID | str, message_id: int) -> Message:
        """The message, or NotFound (no index entry, or the record expired / moved)."""
        tenant_id = parse_uuid(tenant_id)
        blob = u128_to_blob(message_id)
        where = self.connection.execute(self._stmt("index"), (tenant_id, blob)).one()
        if where is None:
            raise NotFound(f"no message_index entry for message_id {message_id}", table="message_index",
                           tenant_id=tenant_id, message_id=message_id)
        row = self.connection.execute(self._stmt("record"), (tenant_id, where.conversation_id, where.seq_bucket,
                                                            where.conversation_seq)).one()
        # The index is written beside the record but expires differently (no TTL): a record
        # gone by TTL, or a slot holding another message, is "not found", not a wrong answer.
        if row is None or blob_to_u128(row.message_id) != message_id:
            raise NotFound(f"message_id {message_id} is indexed at ({where.conversation_id}, "
                           f"{where.conversation_seq}) but message_record has no such row there",
                           table="message_record", tenant_id=tenant_id, message_id=message_id,
                           conversation_id=where.conversation_id, conversation_seq=where.conversation_seq)
        return self._decode(row)
