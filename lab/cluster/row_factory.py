"""The row factory of the lab's sessions: the driver's named tuples, one class per column list.

The driver's default ``named_tuple_factory`` builds a new ``namedtuple`` class for every result
it parses. That costs about 145 µs for message_record's 22 columns on the lab machine, more than
parsing a 50-row page, and it was the largest single frame of the client's CPU in the issue-13
profiles (13% of the GIL samples of a send, 23% of a grouped batch read: every response builds one).
:func:`cached_named_tuple_factory` keeps the class per column-name tuple, so rows are the same
named tuples (same field names, positional access, ``_asdict``) at the price of one dict lookup.
"""
from __future__ import annotations

import functools
from collections import namedtuple
from collections.abc import Sequence
from typing import Any

from cassandra.query import _clean_column_name, named_tuple_factory

__all__ = ["ROW_CLASS_CACHE_ENTRIES", "cached_named_tuple_factory"]

# distinct column lists a process selects; far above the lab's few dozen statements
ROW_CLASS_CACHE_ENTRIES = 4096


@functools.lru_cache(maxsize=ROW_CLASS_CACHE_ENTRIES)
def _row_class(colnames: tuple[str, ...]) -> Any:
    try:
        return namedtuple("Row", [_clean_column_name(name) for name in colnames])
    except Exception:  # names namedtuple refuses: the driver's own factory sanitises them (and warns)
        return None


def cached_named_tuple_factory(colnames: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[Any]:
    """Rows as named tuples, exactly what the driver's ``named_tuple_factory`` returns."""
    row_class = _row_class(tuple(colnames))
    if row_class is None:
        return named_tuple_factory(colnames, rows)
    return list(map(row_class._make, rows))
