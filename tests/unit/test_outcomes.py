"""Which store answers a load counts as outcomes, not failures (lab.load.outcomes)."""
from __future__ import annotations

from types import SimpleNamespace

from lab.errors import InvalidState, NotFound, RequestTimeout
from lab.load.outcomes import ALREADY_RECALLED, NOT_FOUND, RECALLED, REPLAYED, classify, locust_name


def test_an_edit_of_a_recalled_message_is_an_outcome():
    assert classify("edit", error=InvalidState("a recalled message cannot be edited")) == RECALLED


def test_a_recall_of_a_recalled_message_is_an_outcome():
    assert classify("recall", SimpleNamespace(replayed=True)) == ALREADY_RECALLED
    assert classify("recall", SimpleNamespace(replayed=False)) is None


def test_a_replayed_send_is_an_outcome_and_a_replayed_retry_is_its_success():
    assert classify("send", SimpleNamespace(replayed=True)) == REPLAYED
    assert classify("send_retry", SimpleNamespace(replayed=True)) is None


def test_a_reaction_on_a_missing_message_is_an_outcome():
    for op in ("react", "unreact", "self_reaction", "edit", "recall"):
        assert classify(op, error=NotFound("no message")) == NOT_FOUND


def test_everything_else_that_raises_is_a_failure():
    assert classify("send", error=RequestTimeout("timed out")) is None
    assert classify("send", error=InvalidState("?")) is None
    assert classify("history_latest", error=NotFound("?")) is None


def test_outcomes_have_their_own_rows_in_locust():
    assert locust_name("edit", RECALLED) == "edit: recalled"
