"""Loader sizing from a measured CPU per call (lab.load.loader_sizing)."""
from __future__ import annotations

import pytest

from lab.load.loader_sizing import (LoaderCost, SizingBook, auto_processes, measured_cost, size, steady_window,
                                     warmup_cost, window_cost)


def cost(ms: float) -> LoaderCost:
    return LoaderCost(profile="chat", driver="threads", cpu_ms_per_call=ms, calls=1000)


def test_capacity_is_the_cpu_limit_over_the_cpu_per_call():
    c = cost(6.0)  # ~6 ms of loader CPU per call of the chat profile
    assert c.calls_per_core_second() == pytest.approx(166.7, abs=0.1)
    assert c.capacity_per_process() == pytest.approx(116.7, abs=0.1)
    assert c.capacity_per_process(50) == pytest.approx(83.3, abs=0.1)


def test_a_rate_beyond_one_machine_names_the_machines_it_needs():
    s = size(2000, cost(6.0), processes=2, cores=2)
    assert s.processes_needed == 18 and s.machines_needed == 9 and not s.enough
    text = s.advice()
    assert "--master --expect-workers 18" in text and "9 machines" in text


def test_a_rate_within_the_machine_names_the_processes():
    s = size(200, cost(6.0), processes=1, cores=4)
    assert s.processes_needed == 2 and "--processes 2" in s.advice()
    assert size(100, cost(6.0), processes=1, cores=4).enough


def test_auto_takes_what_the_rate_needs_up_to_the_cores():
    assert auto_processes(100, cost(6.0), cores=4) == 1
    assert auto_processes(300, cost(6.0), cores=4) == 3
    assert auto_processes(3000, cost(6.0), cores=4) == 4
    assert auto_processes(300, None, cores=2) == 2       # nothing learned: every core, measured in the warmup
    assert auto_processes(None, cost(6.0), cores=8) == 1  # closed loop


def test_too_few_calls_teach_nothing():
    assert measured_cost(profile="chat", driver="threads", cpu_seconds=0.1, calls=5) is None
    assert measured_cost(profile="chat", driver="threads", cpu_seconds=None, calls=500) is None
    c = measured_cost(profile="chat", driver="threads", cpu_seconds=3.0, calls=500)
    assert c.cpu_ms_per_call == pytest.approx(6.0)


def test_the_book_keeps_the_latest_cost_per_profile_and_driver(tmp_path):
    book = SizingBook(tmp_path)
    assert book.get("chat", "threads") is None
    book.put(cost(6.0))
    book.put(LoaderCost(profile="send_only", driver="threads", cpu_ms_per_call=4.0, calls=300))
    book.put(cost(5.0))
    assert book.get("chat", "threads").cpu_ms_per_call == 5.0
    assert book.get("send_only", "threads").cpu_ms_per_call == 4.0
    assert book.get("chat", "gevent") is None
    (tmp_path / "load-sizing.json").write_text("{broken")
    assert book.get("chat", "threads") is None


def test_a_window_whose_calls_pile_up_in_flight_measures_no_cost():
    """lab load --rate 2000 on 2 cores: 510 calls finished in the window while ~2,200
    started (the store did not keep up); CPU / finished calls gave 14.3 ms per call, 2.3 x the
    steady 6.3 ms, and --processes auto learned it. A window is a steady measure only when about
    as many calls started as finished in it."""
    assert steady_window(finished=2069, started=2070) and steady_window(finished=80, started=84)
    assert not steady_window(finished=510, started=2219)
    assert not steady_window(finished=0, started=0) and steady_window(finished=100, started=None)
    kw = dict(profile="chat", driver="threads")
    assert window_cost(cpu_seconds=7.3, finished=510, started=2219, **kw) is None
    assert window_cost(cpu_seconds=11.0, finished=2069, started=2070, **kw).cpu_ms_per_call == pytest.approx(5.32, abs=0.01)


def test_the_warmup_cost_counts_the_calls_it_started():
    """A warmup starts from no call in flight: at 150 calls/s against a slow node 21 calls
    finished and 165 started; CPU / finished said 46 ms per call ("10 processes, 5 machines"),
    the measured window then 6.3 ms."""
    c = warmup_cost(profile="chat", driver="threads", cpu_seconds=0.968, finished=21, started=165)
    assert c.cpu_ms_per_call == pytest.approx(5.87, abs=0.01) and c.calls == 165
    assert warmup_cost(profile="chat", driver="threads", cpu_seconds=0.968, finished=21, started=None
                       ).cpu_ms_per_call == pytest.approx(46.1, abs=0.1)  # an older worker: finished calls


def test_a_changed_process_count_says_which_figure_it_came_from():
    from lab.load.loader_sizing import LoaderCost, changed_note, size

    warm = LoaderCost(profile="chat", driver="gevent", cpu_ms_per_call=2.0, calls=500, source="warmup")
    window = LoaderCost(profile="chat", driver="gevent", cpu_ms_per_call=3.5, calls=9000, run_id="r1")
    at_warmup = size(1000.0, warm, processes=4, cores=8)
    at_end = size(1000.0, window, processes=4, cores=8)
    assert at_warmup.processes_needed != at_end.processes_needed
    note = changed_note(at_warmup.processes_needed, "at the end of the warmup", at_end)
    assert f"changed from {at_warmup.processes_needed} at the end of the warmup" in note
    assert "measured window 3.50 ms of loader CPU per call over 9,000 calls of run r1" in note
    assert changed_note(at_end.processes_needed, "before", at_end) == ""
