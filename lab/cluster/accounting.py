"""Request accounting: every CQL request the lab sends, counted by table and kind.

The store's acceptance tests assert on these counts ("at most 2 reads of message_record,
zero of message_index") and cross-check them against the server's own counters.
Kinds: point_read (the whole primary key by equality), range_read (a slice of one
partition, or more), in_read (an IN list), write, lwt (``IF`` conditions), schema, other.
"""
from __future__ import annotations

import re
import threading
from collections import Counter
from dataclasses import dataclass

KINDS = ("point_read", "range_read", "in_read", "write", "lwt", "schema", "other")
READ_KINDS = ("point_read", "range_read", "in_read")

_TABLE_RE = re.compile(r"\b(?:FROM|INTO|UPDATE|TABLE(?:\s+IF\s+(?:NOT\s+)?EXISTS)?)\s+(?:\"?(\w+)\"?\.)?\"?(\w+)\"?",
                       re.IGNORECASE)
_LITERAL_RE = re.compile(r"'(?:[^']|'')*'|\$\$.*?\$\$", re.DOTALL)


@dataclass(frozen=True, kw_only=True)
class StatementInfo:
    """What accounting knows about one statement: its table and kind."""

    table: str
    kind: str


def classify(cql: str, *, key_columns: tuple[str, ...] = ()) -> StatementInfo:
    """Table and kind of a CQL text. ``key_columns`` (the full primary key) tells a point
    read (every key column restricted by ``=``) from a range read."""
    # string literals out first: a value (a role's password) must never become a "table"
    text = " ".join(_LITERAL_RE.sub("''", cql).split())
    upper = text.upper()
    m = _TABLE_RE.search(text)
    table = m.group(2).lower() if m else "?"
    verb = upper.split(" ", 1)[0]
    if verb in ("CREATE", "ALTER", "DROP", "TRUNCATE", "USE", "GRANT", "REVOKE"):
        return StatementInfo(table=table, kind="schema")
    if verb in ("INSERT", "UPDATE", "DELETE", "BEGIN"):
        is_lwt = re.search(r"\bIF\s+(NOT\s+EXISTS|EXISTS|\w+\s*(=|<|>|!=|IN\b))", upper) is not None
        return StatementInfo(table=table, kind="lwt" if is_lwt else "write")
    if verb == "SELECT":
        if re.search(r"\bIN\s*(\(|\?)", upper):
            return StatementInfo(table=table, kind="in_read")
        where = upper.split(" WHERE ", 1)[1] if " WHERE " in upper else ""
        if key_columns and all(re.search(rf"\b{c.upper()}\s*=\s*", where) for c in key_columns):
            return StatementInfo(table=table, kind="point_read")
        return StatementInfo(table=table, kind="range_read")
    return StatementInfo(table=table, kind="other")


class RequestCounter:
    """Thread-safe counts of requests by (table, kind)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str]] = Counter()

    def add(self, info: StatementInfo, n: int = 1) -> None:
        with self._lock:
            self._counts[(info.table, info.kind)] += n

    def count(self, table: str | None = None, kind: str | None = None) -> int:
        with self._lock:
            return sum(v for (t, k), v in self._counts.items()
                       if (table is None or t == table) and (kind is None or k == kind))

    def reads(self, table: str) -> int:
        return sum(self.count(table, k) for k in READ_KINDS)

    def snapshot(self) -> dict[str, dict[str, int]]:
        with self._lock:
            out: dict[str, dict[str, int]] = {}
            for (t, k), v in sorted(self._counts.items()):
                out.setdefault(t, {})[k] = v
            return out

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()
