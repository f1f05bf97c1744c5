"""Fencing: the conversations this writer has lost to a higher epoch (design §2.4).

More: docs/store-internals.md.
"""
from __future__ import annotations

import threading
import uuid
from typing import Any

from lab.cluster.connection import Stmt
from lab.errors import Fenced
from lab.store.plumbing.context import StoreContext
from lab.store.plumbing.lru import Lru
from lab.store.plumbing.steps import Cql, Walk, run
from lab.store.rows.ids import check_bigint, parse_uuid

__all__ = ["EPOCH_READ_CQL", "FENCING_VERIFIED_ENTRIES", "Fencing"]

FENCING_VERIFIED_ENTRIES = 65536  # conversations whose head epoch one writer has checked
_HEAD_KEY = ("tenant_id", "conversation_id")
# admit()'s first read per conversation (a module constant: the benchmark's like-for-like send floor issues it)
EPOCH_READ_CQL = "SELECT fencing_epoch FROM {ks}.conversation_head WHERE tenant_id = ? AND conversation_id = ?"

Key = tuple[uuid.UUID, uuid.UUID]


class Fencing:
    """This writer's epoch and what it knows about higher ones. Thread-safe."""

    def __init__(self, ctx: StoreContext, *, epoch: int, verified_entries: int = FENCING_VERIFIED_ENTRIES) -> None:
        self.ctx = ctx
        self.epoch = check_bigint(epoch, column="fencing_epoch")
        self._verified: Lru[Key, bool] = Lru(verified_entries)
        self._lock = threading.Lock()
        self._fenced: dict[Key, int] = {}  # conversation -> the higher epoch that owns it

    def saw(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID, head_epoch: int | None) -> bool:
        """Record the epoch a head read found; True when it fences this writer out."""
        if head_epoch is None or head_epoch <= self.epoch:
            return False
        with self._lock:
            key = (tenant_id, conversation_id)
            self._fenced[key] = max(head_epoch, self._fenced.get(key, head_epoch))
        return True

    def fenced_by(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID) -> int | None:
        """The higher epoch this writer knows owns the conversation, or None."""
        with self._lock:
            return self._fenced.get((parse_uuid(tenant_id), parse_uuid(conversation_id)))

    def admit(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID) -> None:
        """Raise :class:`Fenced` unless this writer may write the conversation (see the module
        docstring); the first call per conversation reads the head's epoch."""
        run(self.admit_steps(tenant_id, conversation_id), self.ctx.connection)

    def prepare(self) -> Stmt:
        """The epoch read (prepared on first use: a caller on the driver's loop prepares it first)."""
        return self.ctx.prepare(EPOCH_READ_CQL, key_columns=_HEAD_KEY)

    def admit_steps(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID) -> Walk[None]:
        """:meth:`admit` as a walk (lab.store.plumbing.steps): the head's epoch read is its one step."""
        key = (tenant_id, conversation_id)
        if self._verified.get(key) is None and self.fenced_by(*key) is None:
            (rows,) = yield Cql(((self.prepare(), key),))
            row: Any = rows[0] if rows else None
            self.saw(tenant_id, conversation_id, None if row is None else row.fencing_epoch)
            self._verified.put(key, True)
        owner = self.fenced_by(*key)
        if owner is not None:
            self.ctx.alerts.incr("fenced_refusals")
            raise Fenced(f"conversation {conversation_id} is owned by fencing epoch {owner}; this writer's epoch is "
                         f"{self.epoch}: nothing was written", tenant_id=tenant_id, conversation_id=conversation_id,
                         epoch=self.epoch, head_epoch=owner)
