"""Group submit (lab.store.plumbing.group_submit): concurrent callers share rounds, each gets its own
result after the round that holds its item, a failed round fails each of its callers. Pure: threads."""
from __future__ import annotations

import time

import pytest
from concurrent_callers import call_at_once

from lab.errors import HotWindowError
from lab.store.plumbing.group_submit import GroupSubmit


def test_each_caller_gets_its_own_result_and_rounds_are_shared():
    rounds: list[list[int]] = []

    def batch(items: list[int]) -> list[int]:
        rounds.append(items)
        time.sleep(0.01)  # a round in progress: the others queue behind it
        return [i * 10 for i in items]
    group = GroupSubmit(batch, lambda i: batch([i])[0], max_batch=8)
    out = call_at_once(group.submit, list(range(40)))
    assert out == {i: i * 10 for i in range(40)}
    assert sorted(i for r in rounds for i in r) == list(range(40))  # every item in exactly one round
    assert max(len(r) for r in rounds) <= 8 and len(rounds) < 40 and group.rounds == len(rounds)


def test_a_lone_caller_runs_the_single_item_path():
    calls = []
    group = GroupSubmit(lambda items: calls.append(("batch", items)) or items, lambda i: calls.append(("one", i)) or i)
    assert group.submit(5) == 5 and calls == [("one", 5)]


def test_a_failed_round_fails_each_of_its_callers_with_an_error_of_its_own():
    def batch(items: list[int]) -> list[int]:
        time.sleep(0.01)
        raise HotWindowError("redis went away", namespace="ks")
    out = call_at_once(GroupSubmit(batch).submit, list(range(6)))
    errors = list(out.values())
    assert all(isinstance(e, HotWindowError) and e.facts["namespace"] == "ks" for e in errors)
    assert len({id(e) for e in errors}) == len(errors)  # never one instance raised in two threads


def test_a_round_with_the_wrong_number_of_results_is_an_error():
    with pytest.raises(RuntimeError, match="returned 0 results"):
        GroupSubmit(lambda items: []).submit(1)
