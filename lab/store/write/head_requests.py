"""The head writer's requests in groups: the heads of one batch's conversations read
with one ``conversation_id IN ?`` per tenant and up to :data:`HEAD_GROUP_PARTITIONS`
conversations, and their writes sent as one UNLOGGED batch per :data:`HEAD_GROUP_PARTITIONS`
updates, the groups concurrently; a group of one is the single-partition read or write.

More: docs/store-internals.md.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from lab.cluster.connection import Connection, Stmt
from lab.cluster.driver_errors import map_driver_errors
from lab.errors import InListTooLong
from lab.store.write.head import HeadUpdate

__all__ = ["HEAD_GROUP_PARTITIONS", "ReadGroupSize", "accepted_size", "gather", "read_heads", "write_heads"]

HEAD_GROUP_PARTITIONS = 10
_TABLE = "conversation_head"


def accepted_size(refused: int, limit: int | None) -> int:
    """The IN list size to use after the server refused one of ``refused`` partition keys: the
    ``limit`` it said it accepts (when known, >= 1 and below ``refused``), else half the refused
    size; never below 1."""
    if limit is not None and 1 <= limit < refused:
        return limit
    return max(1, refused // 2)


class ReadGroupSize:
    """One writer's read group size (conversations per IN read); thread-safe. Starts at
    ``size``, only ever lowered (module docstring: "A read refused as too long")."""

    def __init__(self, size: int = HEAD_GROUP_PARTITIONS) -> None:
        self._lock = threading.Lock()
        self._size = max(1, size)

    @property
    def size(self) -> int:
        with self._lock:
            return self._size

    def refused(self, error: InListTooLong, *, sent: int) -> int | None:
        """The server refused an IN read (``sent``: the group size it was sent with, used when
        the error does not carry the refused size): the new, smaller size, or None when the
        size is already there (another group of the same batch was refused first)."""
        size = getattr(error, "size", None)
        new = accepted_size(size if isinstance(size, int) and size >= 1 else sent, getattr(error, "limit", None))
        with self._lock:
            if new >= self._size:
                return None
            self._size = new
            return new


def gather(conn: Connection, requests: Sequence[Callable[[], Any]], *, concurrency: int,
           rows: bool = False) -> list[tuple[Any, BaseException | None]]:
    """Each request's result (its first row or None; ``rows``: all its rows) and error,
    ``concurrency`` in flight; unlike ``execute_concurrent`` one failure does not cost the others
    their results. A request is a call that sends it and returns the driver's future."""
    out: list[tuple[Any, BaseException | None]] = []
    for start in range(0, len(requests), concurrency):
        sent: list[tuple[Any, BaseException | None]] = []
        for request in requests[start:start + concurrency]:
            try:
                sent.append((request(), None))
            except Exception as exc:  # refused while sending (already a lab error): that request failed
                sent.append((None, exc))
        for future, error in sent:
            if error is not None:
                out.append((None, error))
                continue
            try:
                with map_driver_errors(_TABLE, conn.dialect):
                    result = future.result()
                    out.append((list(result) if rows else result.one(), None))
            except Exception as exc:  # the writer's one-at-a-time retry sorts transient from fatal
                out.append((None, exc))
    return out


def read_heads(conn: Connection, updates: Sequence[HeadUpdate], *, single: Stmt, grouped: Stmt,
               group_size: int = HEAD_GROUP_PARTITIONS, concurrency: int) -> list[tuple[Any, BaseException | None]]:
    """Per update (in order), its conversation's head row as read (None: no head yet) or the
    error of its group's read. ``single`` reads one head by (tenant_id, conversation_id);
    ``grouped`` reads a tenant's heads by ``conversation_id IN ?`` and selects conversation_id."""
    by_tenant: dict[Any, list[int]] = {}
    for i, update in enumerate(updates):
        by_tenant.setdefault(update.tenant_id, []).append(i)
    groups = [(tenant, members[j:j + group_size]) for tenant, members in by_tenant.items()
              for j in range(0, len(members), group_size)]
    requests = [(lambda t=tenant, c=updates[members[0]].conversation_id: conn.execute_async(single, (t, c)))
                if len(members) == 1 else
                (lambda t=tenant, cs=[updates[i].conversation_id for i in members]: conn.execute_async(grouped, (t, cs)))
                for tenant, members in groups]
    out: list[tuple[Any, BaseException | None]] = [(None, None)] * len(updates)
    for (_, members), (found, error) in zip(groups, gather(conn, requests, concurrency=concurrency, rows=True)):
        by_conversation = {} if error is not None else {row.conversation_id: row for row in found} \
            if len(members) > 1 else {updates[members[0]].conversation_id: found[0] if found else None}
        for i in members:
            out[i] = (by_conversation.get(updates[i].conversation_id), error)
    return out


def write_heads(conn: Connection, statements: Sequence[tuple[Stmt, tuple]], *,
                group_size: int = HEAD_GROUP_PARTITIONS, concurrency: int) -> list[BaseException | None]:
    """Per statement (in order), None when its group's write succeeded or that write's error:
    one unlogged batch per ``group_size`` statements (a group of one is sent alone)."""
    groups = [statements[i:i + group_size] for i in range(0, len(statements), group_size)]
    requests = [(lambda g=group: conn.execute_async(*g[0])) if len(group) == 1 else (lambda g=group: conn.batch_async(g))
                for group in groups]
    out: list[BaseException | None] = []
    for group, (_, error) in zip(groups, gather(conn, requests, concurrency=concurrency)):
        out.extend([error] * len(group))
    return out
