"""The one source of a load's counts (lab.load.live_counts): snapshots, merging, CPU and lag of a stretch."""
from __future__ import annotations

import pytest

from lab.load.live_counts import LiveCounts, ProcessSnapshot, TimelinePoint, read_counts
from lab.measure.hdr import OpStats
from lab.results.jsonio import write_json


def stats(ok: int, *, errors: int = 0, outcomes: int = 0, us: int = 1000) -> OpStats:
    s = OpStats()
    for _ in range(ok):
        s.record(us, us + 10)
    for _ in range(errors):
        s.record(us, us, error="RequestTimeout", timeout=True)
    for _ in range(outcomes):
        s.record(us, us, outcome="recalled")
    return s


def timeline(cpu_per_second: float, calls_per_second: int, lag_ms: float, seconds: int = 10):
    return tuple(TimelinePoint(t=float(t), cpu_seconds=round(cpu_per_second * t, 4), calls=calls_per_second * t,
                               service_us=1000.0 * calls_per_second * t,
                               corrected_us=(1000.0 + 1000 * lag_ms) * calls_per_second * t)
                 for t in range(seconds + 1))


def snap(worker: str, *, ok: int, seconds: float, cpu: float = 0.3, lag: float = 2.0, final: bool = True,
         **kw) -> ProcessSnapshot:
    return ProcessSnapshot(worker=worker, pid=1, written_at=100.0, t0=90.0, final=final, measured_seconds=seconds,
                           operations={"send": stats(ok, **kw)}, timeline=timeline(cpu, int(ok / max(seconds, 1)),
                                                                                  lag))


def test_a_snapshot_round_trips_through_its_file(tmp_path):
    s = snap("worker-0", ok=50, seconds=10, errors=2, outcomes=3)
    s = ProcessSnapshot(**{**s.__dict__, "late": {"send": stats(4)}, "warmup_calls": 7, "in_flight": 2,
                           "extra": {"acks": 50, "driver": "native-threads"}})
    (tmp_path / "totals").mkdir()
    write_json(tmp_path / "totals" / "worker-0.json", s.to_json())
    (back,) = read_counts(tmp_path).processes
    assert back.calls == 55 and back.late["send"].count == 4 and back.warmup_calls == 7
    assert back.operations["send"].outcomes == {"recalled": 3}
    assert back.extra == {"acks": 50, "driver": "native-threads"} and back.timeline == s.timeline


def test_counts_merge_over_processes_and_rates_add_up():
    c = LiveCounts(processes=(snap("worker-0", ok=100, seconds=10, errors=5),
                              snap("worker-1", ok=50, seconds=5, outcomes=2)))
    assert c.calls == 157 and c.errors == 5 and c.outcomes == 2
    assert c.achieved_rate() == pytest.approx(105 / 10 + 52 / 5)
    assert c.operations["send"].count == 157 and c.final


def test_cpu_of_a_stretch_comes_from_the_timeline():
    s = snap("worker-0", ok=100, seconds=10, cpu=0.8)
    assert s.cpu_percent(2, 8) == pytest.approx(80.0)
    assert s.cpu_percent_max(0, 10) == pytest.approx(80.0)
    assert s.last_cpu_percent() == pytest.approx(80.0)
    assert s.cpu_percent(20, 30) is None


def test_a_window_gives_calls_cpu_and_the_lag_per_interval():
    c = LiveCounts(processes=(snap("worker-0", ok=100, seconds=10, cpu=0.5, lag=3.0),
                              snap("worker-1", ok=100, seconds=10, cpu=0.25, lag=3.0)))
    calls, cpu, lag = c.window(2, 6)
    assert calls == 80 and cpu == pytest.approx(3.0)
    assert [t for t, _ in lag] == [1.0, 2.0, 3.0, 4.0] and all(v == pytest.approx(3.0) for _, v in lag)


def test_a_half_written_file_is_read_next_time(tmp_path):
    (tmp_path / "totals").mkdir()
    (tmp_path / "totals" / "worker-0.json").write_text('{"worker": ')
    assert read_counts(tmp_path).processes == ()


def test_the_timeline_counts_calls_started_and_reads_older_rows():
    """Calls started, beside calls finished: a stretch whose calls pile up in flight (a store
    that does not keep up) shows more started than finished (its loader CPU per finished
    call is not the loader's cost)."""
    p = TimelinePoint(t=1.0, cpu_seconds=0.5, calls=10, service_us=1e4, corrected_us=2e4, started=25)
    assert TimelinePoint.from_json(p.to_json()) == p
    assert TimelinePoint.from_json([1.0, 0.5, 10, 1e4, 2e4]).started is None  # a snapshot of an older run
    piled = tuple(TimelinePoint(t=float(t), cpu_seconds=0.1 * t, calls=5 * t, service_us=0.0, corrected_us=0.0,
                                started=20 * t) for t in range(11))
    s = ProcessSnapshot(worker="worker-0", pid=1, written_at=1.0, t0=0.0, final=True, measured_seconds=10,
                        operations={}, timeline=piled)
    c = LiveCounts(processes=(s, s))
    assert c.started_calls(2, 6) == 160 and c.window(2, 6)[0] == 40
    old = ProcessSnapshot(**{**s.__dict__, "timeline": timeline(0.3, 10, 2.0)})
    assert LiveCounts(processes=(s, old)).started_calls(2, 6) is None  # unknown for one process: unknown
