"""Latency recording in µs: service vs CO-corrected latency, failures kept, interval logs, merging."""
from __future__ import annotations

import io
import json

from lab.load.pacing import FixedRateSchedule
from lab.measure.hdr import (
    IntervalLogWriter,
    LatencyRecorder,
    OpStats,
    latencies_us,
    merge_stats,
    parse_interval_log,
    percentiles_us,
    summarize,
)

MS = 1_000_000  # ns
S = 1_000_000_000


def test_coordinated_omission_is_corrected():
    """Open loop at 100/s, 1 ms calls, one 1 s stall: the stall delays the 100 calls due during
    it. Service time shows one slow call; corrected latency shows the queue behind it."""
    rec = LatencyRecorder(fixed_rate=True)
    sched = FixedRateSchedule.for_rate(100, start_ns=0)
    now = 0
    for k in range(1000):
        due = sched.due_ns(k)
        start = max(now, due)
        end = start + (S if k == 100 else MS)
        rec.record("send", started_ns=start, ended_ns=end, due_ns=due)
        now = end
    s = rec.totals["send"]
    assert percentiles_us(s.service)["p99"] < 1100
    assert percentiles_us(s.corrected)["p99"] > 500_000
    assert s.corrected.get_max_value() >= 1_000_000 * 0.999


def test_failures_are_counted_and_kept_in_the_latency():
    rec = LatencyRecorder(fixed_rate=False)
    rec.record("read", started_ns=0, ended_ns=MS)
    rec.record("read", started_ns=0, ended_ns=20 * S, error="RequestTimeout", timeout=True)
    rec.record("read", started_ns=0, ended_ns=2 * MS, error="Unavailable")
    s = rec.totals["read"]
    assert (s.count, s.ok, s.timeouts, s.errors) == (3, 1, 1, {"RequestTimeout": 1, "Unavailable": 1})
    assert s.service.get_total_count() == 3 and s.service.get_max_value() >= 19_990_000
    summary = summarize(rec.totals, elapsed_seconds=1.5, fixed_rate=False)["read"]
    assert summary.errors == 2 and summary.timeouts == 1 and summary.rate_per_second == 2.0
    assert summary.corrected_us is None and "corrected_us" not in summary.to_json()
    assert summary.service_us.count == 3 and summary.service_us.max >= 19_990_000


def test_interval_log_round_trip():
    rec = LatencyRecorder(fixed_rate=True)
    rec.record("send", started_ns=0, ended_ns=3 * MS, due_ns=-MS)
    buf = io.StringIO()
    w = IntervalLogWriter(buf, start_time_s=1000.0, comment="test")
    w.write_interval(rec.take_interval(), begin_s=1001.0, end_s=1002.0)
    lines = list(parse_interval_log(buf.getvalue()))
    assert [(iv.tag, iv.op, iv.kind, iv.start_s, iv.length_s) for iv in lines] == [
        ("send.service", "send", "service", 1.0, 1.0), ("send.corrected", "send", "corrected", 1.0, 1.0)]
    assert lines[1].histogram.get_max_value() >= 3990
    assert buf.getvalue().startswith("#[Histogram log format version 1.3]")


def test_intervals_reset_totals_do_not_and_merge_across_processes():
    a, b = LatencyRecorder(fixed_rate=True), LatencyRecorder(fixed_rate=True)
    for i in range(10):
        a.record("send", started_ns=0, ended_ns=(i + 1) * MS, due_ns=0)
    b.record("send", started_ns=0, ended_ns=MS, due_ns=0, error="X")
    first = a.take_interval()
    assert first["send"].count == 10 and a.take_interval() == {} and a.totals["send"].count == 10
    shipped = [{op: OpStats.from_json(json.loads(json.dumps(st.to_json()))) for op, st in r.totals.items()}
               for r in (a, b)]
    merged = merge_stats(shipped)["send"]
    assert (merged.ok, merged.errors, merged.service.get_total_count()) == (10, {"X": 1}, 11)


# ---- latency bookkeeping (pure) -----------------------------------------------------------------
def test_latencies_from_due_time_and_from_start():
    service, corrected = latencies_us(started_ns=10 * MS, ended_ns=12 * MS, due_ns=4 * MS)
    assert (service, corrected) == (2000, 8000)
    assert latencies_us(started_ns=0, ended_ns=1500, due_ns=None) == (2, None)  # rounds up to whole µs
    assert latencies_us(started_ns=5 * MS, ended_ns=6 * MS, due_ns=9 * MS)[1] == 1000  # early start: service
