"""The prepared statements the store's own paths issue, for floors that issue them raw (``lab bench
store``): :class:`BaselineStatements`, built by :func:`baseline_statements` with the store's own
``prepare`` (the same texts and key columns, so the same prepared statements the paths use)."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from lab.cluster.connection import Stmt
from lab.store.plumbing.context import StoreContext
from lab.store.read.batch import BatchEntry, BatchReader
from lab.store.read.history import BOUNDS_CQL, OLDER_PAGE_CQL
from lab.store.rows.ids import IdLike
from lab.store.write.fencing import EPOCH_READ_CQL
from lab.store.write.head import HEAD_KEY
from lab.store.write.head_writer import HEAD_READ_CQL, HEAD_WRITE_CQL
from lab.store.write.send import COMMIT_CQL, RESERVE_CQL

__all__ = ["BaselineStatements", "baseline_statements"]


@dataclass(frozen=True, kw_only=True)
class BaselineStatements:
    """A floor differs from the path only by what the path does around these statements. Bind
    values in each statement's column order; ``batch_read(tenant_id, entries)``: what batch_read
    issues, nothing cached."""

    reserve: Stmt          # send step 1: the client_dedup reservation, INSERT ... IF NOT EXISTS
    commit: Stmt           # send step 5: client_dedup state = COMMITTED, USING TTL
    head_write: Stmt       # step 7: the conversation_head blind write (not the failover form)
    head_read: Stmt        # step 7's read before each head write (§2.4's compare in the application, fencing)
    fencing_read: Stmt     # fencing's epoch read, once per conversation a writer has not checked (admit)
    history_bounds: Stmt   # a page's H and E from conversation_head
    history_older: Stmt    # an older page's read of one message_record bucket
    batch_read: Callable[[IdLike, Iterable[BatchEntry]], list[tuple[Stmt, tuple]]]


def baseline_statements(ctx: StoreContext, batch_reader: BatchReader) -> BaselineStatements:
    prepare = ctx.prepare
    return BaselineStatements(reserve=prepare(RESERVE_CQL), commit=prepare(COMMIT_CQL),
                              head_write=prepare(HEAD_WRITE_CQL), head_read=prepare(HEAD_READ_CQL, key_columns=HEAD_KEY),
                              fencing_read=prepare(EPOCH_READ_CQL, key_columns=HEAD_KEY),
                              history_bounds=prepare(BOUNDS_CQL, key_columns=HEAD_KEY),
                              history_older=prepare(OLDER_PAGE_CQL), batch_read=batch_reader.statements)
