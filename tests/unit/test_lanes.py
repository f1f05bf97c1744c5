"""Lanes (lab.store.plumbing.lanes): a lone caller uses lane 0; concurrent callers take free lanes,
so rounds run at once; callers beyond the lanes group into rounds; a failed round fails only its own
lane's callers. Pure: threads."""
from __future__ import annotations

import threading

import pytest
from concurrent_callers import call_at_once

from lab.errors import HotWindowError
from lab.store.plumbing.lanes import Lanes

WAIT_SECONDS = 30  # a deadlock guard only


def test_a_lone_caller_always_uses_lane_0():
    used: list[int] = []
    lanes = Lanes([lambda items, n=n: used.append(n) or items for n in range(4)])
    assert [lanes.submit(i) for i in range(5)] == list(range(5))
    assert used == [0] * 5 and lanes.rounds == 5 and lanes.most_in_flight == 1


def test_as_many_rounds_in_flight_as_lanes():
    """Every lane's round waits at one barrier: it is passed only if all three rounds run at once."""
    meet = threading.Barrier(3, timeout=WAIT_SECONDS)
    used: list[int] = []

    def lane(n: int):
        def run(items: list[int]) -> list[int]:
            used.append(n)
            meet.wait()
            return [i * 10 for i in items]
        return run
    lanes = Lanes([lane(n) for n in range(3)])
    assert call_at_once(lanes.submit, [1, 2, 3]) == {1: 10, 2: 20, 3: 30}
    assert sorted(used) == [0, 1, 2] and lanes.most_in_flight == 3


def test_callers_beyond_the_lanes_group_into_rounds():
    rounds: list[list[int]] = []
    release = threading.Event()

    def run(items: list[int]) -> list[int]:
        rounds.append(items)
        release.wait(WAIT_SECONDS)  # the first rounds stay in flight while the others queue
        return items
    lanes = Lanes([run, run])
    out: dict[int, object] = {}
    threads = [threading.Thread(target=lambda i=i: out.__setitem__(i, lanes.submit(i))) for i in range(10)]
    for t in threads:
        t.start()
    while sum(lanes._callers) < 10:  # every caller is in a lane (in a round or queued for one)
        threading.Event().wait(0.001)
    release.set()
    for t in threads:
        t.join(WAIT_SECONDS)
    assert out == {i: i for i in range(10)}
    assert sorted(i for r in rounds for i in r) == list(range(10))  # each item in exactly one round
    assert len(rounds) < 10 and lanes.rounds == len(rounds) and lanes.most_in_flight == 2


def test_a_failed_round_fails_only_its_own_lanes_callers():
    meet = threading.Barrier(2, timeout=WAIT_SECONDS)

    def good(items: list[int]) -> list[int]:
        meet.wait()
        return items

    def bad(items: list[int]) -> list[int]:
        meet.wait()
        raise HotWindowError("redis went away", namespace="ks")
    out = call_at_once(Lanes([good, bad]).submit, [1, 2])
    assert sorted(v for v in out.values() if isinstance(v, int)) in ([1], [2])
    assert sum(isinstance(v, HotWindowError) for v in out.values()) == 1


def test_no_lanes_is_an_error():
    with pytest.raises(ValueError):
        Lanes([])
