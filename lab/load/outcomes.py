"""Answers the design defines are not failures: which store answers a load counts as *outcomes*.

Under concurrent users some calls meet a state another user made, and the store answers as
the design says it must (docs/store-api.md). Counting those as errors made a healthy run look
broken (3 ``InvalidState`` on ``edit`` at 300 calls/s: edits of messages another user
had recalled). They are counted per kind, apart from successes and failures, in the summary
(``operations.<op>.outcomes``), the live counts and Locust's UI (request type ``outcome``):

    recalled            edit -> InvalidState: the message was recalled (recalled stays recalled)
    already_recalled    recall -> RecallResult.replayed: the message was recalled before
    not_found           edit / recall / react / unreact / self_reaction -> NotFound: no such
                        message (expired, or not there)
    replayed            send -> SendAck.replayed: answered from client_dedup (the same
                        client_message_id was sent before); on ``send_retry`` that is the
                        expected answer and counts as ok

Anything else that raises is a failure. Pure: the users call :func:`classify` after each call.
"""
from __future__ import annotations

from typing import Any

RECALLED = "recalled"
ALREADY_RECALLED = "already_recalled"
NOT_FOUND = "not_found"
REPLAYED = "replayed"
OUTCOME_REQUEST_TYPE = "outcome"  # Locust's request type for outcomes: their own rows in its UI
_MESSAGE_OPS = frozenset({"edit", "recall", "react", "unreact", "self_reaction"})


def classify(op: str, result: Any = None, error: BaseException | None = None) -> str | None:
    """The outcome kind of one finished call, or None (a plain success, or a failure when
    ``error`` is set and this returns None)."""
    from lab.errors import InvalidState, NotFound

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
