"""Scratch keyspaces: every run (benchmark, experiment, round trip, test module) measures in a
keyspace of its own, created fresh and dropped at the end, so runs never see each other's rows
and a node shared by several engineers keeps no leftovers.

More: docs/measure-internals.md.
"""
from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

SUFFIX_HEX = 10


def scratch_name(prefix: str) -> str:
    """``<prefix>_<hex>``: a CQL identifier no other run uses."""
    return f"{prefix}_{uuid.uuid4().hex[:SUFFIX_HEX]}"


def drop_keyspace(connection: Any, keyspace: str) -> None:
    connection.execute(f"DROP KEYSPACE IF EXISTS {keyspace}")


@contextlib.contextmanager
def scratch_keyspace(connection: Any, prefix: str, *, create: bool = True, keep: bool = False) -> Iterator[str]:
    """A fresh keyspace name (created unless ``create=False``), dropped on exit unless ``keep``."""
    name = scratch_name(prefix)
    try:
        if create:
            connection.create_keyspace(name)  # the run's replication, as the server's dialect spells it
        yield name
    finally:
        if not keep:
            drop_keyspace(connection, name)
