"""FaultPlan (lab.store.plumbing.faults): armed points fire the requested number of times; unknown names are refused."""
from __future__ import annotations

import pytest

from lab.errors import CrashInjected, ValidationError
from lab.store import CRASH_POINTS, FaultPlan


def test_armed_point_fires_then_disarms():
    plan = FaultPlan().arm("after_record", times=2)
    for _ in range(2):
        with pytest.raises(CrashInjected) as info:
            plan.hit("after_record")
        assert info.value.point == "after_record"
    plan.hit("after_record")  # spent
    plan.hit("after_outbox")  # never armed
    assert plan.hits["after_record"] == 3 and plan.fired["after_record"] == 2


def test_always_armed_and_disarm():
    plan = FaultPlan(["after_recall_log"]).arm("after_recall_log", times=None)
    for _ in range(3):
        with pytest.raises(CrashInjected):
            plan.hit("after_recall_log")
    plan.disarm()
    plan.hit("after_recall_log")


def test_unknown_points_are_refused_on_both_sides():
    with pytest.raises(ValidationError):
        FaultPlan().arm("after_recrod")
    with pytest.raises(ValidationError):
        FaultPlan().hit("after_recrod")


def test_every_point_the_paths_hit_is_declared():
    import inspect
    import re

    from lab.store.write import archiver, head_writer, recall, send
    used = set()
    for module in (archiver, head_writer, recall, send):
        used |= set(re.findall(r'faults\.hit\("(\w+)"\)', inspect.getsource(module)))
    assert used == set(CRASH_POINTS)


def test_interleave_runs_once_at_the_point_and_does_not_crash():
    ran = []
    plan = FaultPlan().interleave("after_edit_log", lambda: ran.append("recall"))
    plan.hit("after_edit_log")
    plan.hit("after_edit_log")
    assert ran == ["recall"] and plan.hits["after_edit_log"] == 2 and plan.fired["after_edit_log"] == 0
    with pytest.raises(ValidationError):
        FaultPlan().interleave("no_such_point", lambda: None)
