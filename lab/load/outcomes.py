"""Answers the design defines are not failures: which store answers a load counts as *outcomes*.

More: docs/load-internals.md.
"""
from __future__ import annotations

from typing import Any

from lab.errors import InvalidState, NotFound

RECALLED = "recalled"
ALREADY_RECALLED = "already_recalled"
NOT_FOUND = "not_found"
REPLAYED = "replayed"
OUTCOME_REQUEST_TYPE = "outcome"  # Locust's request type for outcomes: their own rows in its UI
_MESSAGE_OPS = frozenset({"edit", "recall", "react", "unreact", "self_reaction"})


def classify(op: str, result: Any = None, error: BaseException | None = None) -> str | None:
    """The outcome kind of one finished call, or None (a plain success, or a failure when
    ``error`` is set and this returns None)."""

    if error is not None:
        if op == "edit" and isinstance(error, InvalidState):
            return RECALLED
        if op in _MESSAGE_OPS and isinstance(error, NotFound):
            return NOT_FOUND
        return None
    if op == "recall" and getattr(result, "replayed", False):
        return ALREADY_RECALLED
    if op == "send" and getattr(result, "replayed", False):
        return REPLAYED
    return None


def locust_name(op: str, outcome: str) -> str:
    """The row an outcome gets in Locust's statistics (request type ``outcome``)."""
    return f"{op}: {outcome}"
