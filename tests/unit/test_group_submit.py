"""Group submit (lab.store.plumbing.group_submit): concurrent callers share rounds, each gets its own
result after the round that holds its item, a failed round fails each of its callers. Pure: threads."""
from __future__ import annotations

import threading
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


def test_async_callers_share_rounds_on_the_worker_and_never_lead_on_their_own_thread():
    rounds: list[tuple[list[int], str]] = []
    gate = threading.Event()

    def batch(items: list[int]) -> list[int]:
        rounds.append((items, threading.current_thread().name))
        gate.wait(5)  # the first round holds: every later item queues for the next
        return [i * 10 for i in items]
    group = GroupSubmit(batch, max_batch=64)
    futures = [group.submit_async(i) for i in range(50)]
    gate.set()
    assert [f.result(timeout=5) for f in futures] == [i * 10 for i in range(50)]
    assert sorted(i for r, _ in rounds for i in r) == list(range(50))
    assert len(rounds) < 50, "no round was shared"
    assert all(name.startswith("group-submit") for _, name in rounds), "a round ran on a caller's thread"
    group.close()


def test_sync_and_async_callers_mixed_each_get_their_own_result_or_error():
    def batch(items: list[int]) -> list[int]:
        time.sleep(0.005)
        if 13 in items:
            raise HotWindowError("unlucky round", namespace="ks")
        return [i + 1 for i in items]
    group = GroupSubmit(batch, max_batch=4)
    futures = {i: group.submit_async(i) for i in range(0, 40, 2)}
    out = call_at_once(group.submit, list(range(1, 40, 2)))
    for i, f in futures.items():
        error = f.exception(timeout=5)
        assert (error is None and f.result() == i + 1) or isinstance(error, HotWindowError)
    failed = [i for i, r in out.items() if isinstance(r, HotWindowError)] + \
        [i for i, f in futures.items() if f.exception() is not None]
    assert 13 in failed and all(out[i] == i + 1 for i in out if i not in failed)
    assert len(failed) <= 4, "an error reached callers outside its round"
    group.close()


def test_after_close_an_asynchronous_round_fails_on_the_callers_thread_and_the_queue_goes_on():
    """A closed group's worker refuses (InvalidState): the round fails without running and without
    a thread, and a blocking caller queued behind it still gets its own round."""
    from lab.errors import InvalidState

    ran: list[list[int]] = []
    group = GroupSubmit(lambda items: ran.append(list(items)) or list(items))
    group.close()
    threads = threading.active_count()
    future = group.submit_async(1)
    assert isinstance(future.exception(timeout=5), InvalidState)
    assert ran == [] and threading.active_count() == threads
    assert group.submit(2) == 2 and ran == [[2]]
