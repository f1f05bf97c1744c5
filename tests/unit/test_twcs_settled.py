"""When a TWCS table counts as settled: its strategy's last check saw every live SSTable and
found nothing to do, and nothing runs (lab.cluster.admin.TwcsCheck)."""
from __future__ import annotations

import pytest

from lab.cluster.admin import TwcsCheck
from lab.cluster.admin.admin_interface import TWCS_BUCKETS_MAX


def check(*, live: int, pending: int = 0, active: int = 0, buckets: tuple[int, ...] | None = ()) -> TwcsCheck:
    return TwcsCheck(node="n1", live=live, pending=pending, active=active, buckets=buckets)


def test_last_check_saw_every_sstable_and_found_nothing():
    assert check(live=3, buckets=(1, 1, 1)).settled
    assert check(live=4, buckets=(2, 1, 1)).settled


def test_a_flush_the_check_has_not_seen_yet():
    # the flush made the 4th SSTable of the newest window; the check that compacts them is queued
    assert not check(live=4, buckets=(3,)).settled


def test_a_compaction_chosen_or_running():
    assert not check(live=4, pending=1, buckets=(4,)).settled
    assert not check(live=4, pending=1, active=1, buckets=(4,)).settled
    # done, the estimate still the chosen compaction's until the next check runs
    assert not check(live=1, pending=1, buckets=(4,)).settled


def test_an_expired_drop_in_flight_and_done():
    # the check left the expired SSTables out of its windows and is dropping them
    assert not check(live=8, active=1, buckets=(2,)).settled
    assert check(live=2, buckets=(2,)).settled


@pytest.mark.parametrize("buckets", [None, (1,) * TWCS_BUCKETS_MAX])
def test_unknown_windows_never_settle(buckets):
    # not TWCS, or more windows than the server reports: the check's view cannot be compared
    assert not check(live=len(buckets or (1,)), buckets=buckets).settled


def test_an_empty_table_is_settled():
    assert check(live=0, buckets=()).settled
    assert check(live=0, buckets=(3,)).settled  # all dropped since: no check runs on an empty table
