"""``store.recover()``: what a writer restores from the log before it serves (S-7).

More: docs/store-internals.md.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

from lab.errors import CryptoError
from lab.store.outbox import CONTROL_KINDS, MessagePayload, Outbox, OutboxEntry
from lab.store.plumbing.context import StoreContext
from lab.store.plumbing.writer_marks import WriterMark
from lab.store.rows.ids import blob_to_u128
from lab.store.rows.records import decode_row
from lab.store.write.head import HeadUpdate
from lab.store.write.head_writer import HeadWriter
from lab.store.write.recall import RecallPath

__all__ = ["RECOVERY_BATCH", "RECOVERY_GROUP", "Recovery"]

RECOVERY_GROUP = "control-recovery"
RECOVERY_BATCH = 1000


class Recovery:
    def __init__(self, ctx: StoreContext, *, outbox: Outbox, recall_path: RecallPath, head: HeadWriter,
                 state_dir: Path) -> None:
        self.ctx = ctx
        self.outbox = outbox
        self.recall_path = recall_path
        self.head = head
        self.state_dir = Path(state_dir)
        self._mark: WriterMark | None = None

    def start(self, *, on_error: Callable[[], object] = lambda: None) -> int | None:
        """At open: leave this writer's mark in the state folder and, when a writer of that
        folder died without closing, :meth:`run` (then forget its mark; if it fails, ``on_error``
        runs and the error propagates). Returns what ``run`` returned, or None when there was
        nothing to recover."""
        self._mark, dead = WriterMark.claim(self.state_dir)
        if not dead:
            return None
        try:
            reemitted = self.run()
        except BaseException:
            on_error()
            raise
        WriterMark.clear(dead)
        return reemitted

    def stop(self) -> None:
        """At close: this writer left nothing to recover."""
        if self._mark is not None:
            self._mark.release()

    def run(self) -> int:
        """Walk the log from the group's position; returns the CONTROL events re-emitted
        (``recall_reemitted``); heads moved are counted in ``heads_restored``."""
        reemitted = 0
        while True:
            batch = self.outbox.consume(RECOVERY_GROUP, RECOVERY_BATCH)  # every partition
            if not batch:
                break
            newest: dict[tuple[uuid.UUID, uuid.UUID], OutboxEntry] = {}
            for entry in batch.entries:
                record = entry.record
                if record.kind in CONTROL_KINDS:
                    reemitted += self.recall_path.reemit(entry)
                elif isinstance(record.payload, MessagePayload):
                    key = (record.tenant_id, record.conversation_id)
                    held = newest.get(key)
                    if held is None or record.conversation_seq > held.record.conversation_seq:
                        newest[key] = entry
            restored = sum(self._restore_head(entry) for entry in newest.values())
            if restored:
                self.ctx.alerts.incr("heads_restored", restored)
            self.outbox.commit_batch(RECOVERY_GROUP, batch)
        if reemitted:
            self.ctx.alerts.incr("recall_reemitted", reemitted)
        return reemitted

    def _restore_head(self, entry: OutboxEntry) -> bool:
        """Apply the head update of one logged message (as step 7 would have); True if it moved."""
        record = entry.record
        row = record.payload.record  # the sealed row the commit path logged
        try:
            message = decode_row(row, self.ctx.encryptor)  # the preview is the body, as send submits it
            return self.head.apply(HeadUpdate(
                tenant_id=record.tenant_id, conversation_id=record.conversation_id,
                conversation_seq=record.conversation_seq, message_id=blob_to_u128(row.message_id),
                last_activity_id=blob_to_u128(row.last_activity_id), sender_id=row.sender_id,
                preview=message.body, e2ee=message.e2ee), replay=True) == "written"
        except CryptoError:  # an erased conversation: no preview can be sealed, as on the send path
            self.ctx.alerts.incr("head_update_failures")
            return False
