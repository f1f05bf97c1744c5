"""The head writer's read group size after the server refuses an IN list as too long
(lab.store.write.head_requests: accepted_size, ReadGroupSize)."""
from __future__ import annotations

import threading

from lab.errors import InListTooLong
from lab.store.write.head_requests import HEAD_GROUP_PARTITIONS, ReadGroupSize, accepted_size


def _refusal(size=None, limit=None):
    return InListTooLong("refused", size=size, limit=limit, setting="partition_keys_in_select_fail_threshold")


def test_the_limit_the_server_says_when_it_is_below_the_refused_size():
    assert accepted_size(10, 4) == 4
    assert accepted_size(10, 1) == 1
    assert accepted_size(10, 9) == 9


def test_half_the_refused_size_when_the_limit_is_unknown_or_unusable():
    assert accepted_size(10, None) == 5
    assert accepted_size(9, None) == 4
    assert accepted_size(10, 0) == 5     # a limit below 1 says nothing usable
    assert accepted_size(10, -1) == 5
    assert accepted_size(4, 4) == 2      # refused at its own "limit": not what the server accepts


def test_never_below_one():
    assert accepted_size(1, None) == 1
    assert accepted_size(2, None) == 1
    assert accepted_size(1, 0) == 1


def test_group_size_starts_at_the_writers_groups_and_is_at_least_one():
    assert ReadGroupSize().size == HEAD_GROUP_PARTITIONS
    assert ReadGroupSize(0).size == 1


def test_refusals_of_one_batch_lower_it_once():
    groups = ReadGroupSize(10)
    assert groups.refused(_refusal(size=10, limit=4), sent=10) == 4
    assert groups.refused(_refusal(size=10, limit=4), sent=10) is None  # the same batch's next group
    assert groups.size == 4


def test_without_the_refused_size_the_size_sent_is_halved():
    groups = ReadGroupSize(10)
    assert groups.refused(_refusal(), sent=10) == 5
    assert groups.refused(_refusal(), sent=10) is None  # a group of the same batch: not halved again
    assert groups.refused(_refusal(), sent=5) == 2       # a later batch refused at 5
    assert groups.refused(_refusal(), sent=2) == 1
    assert groups.refused(_refusal(), sent=1) is None
    assert groups.size == 1


def test_it_never_grows_back():
    groups = ReadGroupSize(10)
    groups.refused(_refusal(size=10, limit=3), sent=10)
    # a refusal of a group sent at the old size, with a higher limit (raised meanwhile): stays at 3
    assert groups.refused(_refusal(size=10, limit=8), sent=10) is None
    assert groups.size == 3


def test_concurrent_refusals_agree_on_one_lowering():
    groups = ReadGroupSize(10)
    results, start = [], threading.Barrier(8)

    def refuse():
        start.wait()
        results.append(groups.refused(_refusal(size=10, limit=4), sent=10))

    threads = [threading.Thread(target=refuse) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results, key=str) == [4] + [None] * 7
    assert groups.size == 4
