"""Loader CPU per operation (lab.load.operation_cpu): the caller CPU measured, the rest shared out."""
from __future__ import annotations

import pytest

from lab.load.operation_cpu import FUTURE, THREAD, apportion


def test_the_process_cpu_is_shared_in_proportion_to_the_callers():
    got = apportion({"send": 100, "history_latest": 300, "idle": 0},
                    {"send": 0.2, "history_latest": 0.2, "idle": 0.0}, process_cpu_seconds=1.0)
    assert set(got) == {"send", "history_latest"}
    send, page = got["send"], got["history_latest"]
    assert send.caller_cpu_ms_per_call == pytest.approx(2.0) and page.caller_cpu_ms_per_call == pytest.approx(2 / 3)
    # 0.4 s of callers in 1.0 s of process: every operation's share is 2.5x its caller CPU
    assert send.loader_cpu_ms_per_call == pytest.approx(5.0) and page.loader_cpu_ms_per_call == pytest.approx(5 / 3)
    assert send.calls_per_loader_core_second == pytest.approx(200.0)
    # the shares add up to the process's CPU
    total = sum(o.loader_cpu_ms_per_call * o.calls for o in got.values()) / 1000
    assert total == pytest.approx(1.0)


def test_without_a_process_sample_only_the_caller_part_is_reported():
    [(op, cost)] = apportion({"send": 10}, {"send": 0.05}, process_cpu_seconds=None).items()
    assert op == "send" and cost.caller_cpu_ms_per_call == pytest.approx(5.0)
    assert cost.loader_cpu_ms_per_call is None and cost.calls_per_loader_core_second is None
    assert cost.to_json()["loader_cpu_ms_per_call"] is None


def test_a_process_sample_below_the_callers_never_makes_a_call_cheaper_than_its_thread():
    cost = apportion({"send": 10}, {"send": 0.05}, process_cpu_seconds=0.01)["send"]
    assert cost.loader_cpu_ms_per_call == pytest.approx(cost.caller_cpu_ms_per_call)


def test_a_future_among_several_operations_leaves_every_loader_cost_not_measured():
    """A future's caller CPU is its submission: its steps run on the driver's loop thread with every
    other call's I/O, so a share in proportion to the callers would be wrong for every operation."""
    got = apportion({"send": 100, "history_latest": 300}, {"send": 0.2, "history_latest": 0.01},
                    process_cpu_seconds=1.0, paths={"send": THREAD, "history_latest": FUTURE})
    assert got["history_latest"].path == FUTURE and got["send"].path == THREAD
    assert got["history_latest"].caller_cpu_ms_per_call == pytest.approx(1 / 30)  # measured, as named
    assert all(c.loader_cpu_ms_per_call is None and c.calls_per_loader_core_second is None for c in got.values())
    assert got["history_latest"].to_json()["path"] == "future"


def test_a_single_operation_on_futures_gets_the_process_cpu_over_its_calls():
    cost = apportion({"history_latest": 400}, {"history_latest": 0.02}, process_cpu_seconds=0.8,
                     paths={"history_latest": FUTURE})["history_latest"]
    assert cost.loader_cpu_ms_per_call == pytest.approx(2.0) and cost.calls_per_loader_core_second == pytest.approx(500)
