"""The one formatting of numbers and units (lab.results.units) and the texts built on it: the
live status line, `lab load`'s summary (labels for corrected vs service latency, seed vs
measured sends) and the result pages' fmt, which is the same function."""
from __future__ import annotations

import re

import pytest

from lab.cli.load_text import acks_line, summary_lines
from lab.cli.status_line import status_text
from lab.load.progress import LiveStatus
from lab.load.summary import AckCounts, LoadSummary
from lab.measure.hdr import OperationSummary
from lab.measure.percentiles import LatencySummary
from lab.results import html, units


@pytest.mark.parametrize("value, text", [
    (20000000.0, "20,000,000"), (2.0e7, "20,000,000"), (1255.3, "1,255"), (12345, "12,345"), (0.01234, "0.0123"),
    (1.5e-5, "0.000015"), (600, "600"), (0.0, "0"), (None, "—"), (float("nan"), "—"), (True, "True"),
    ("text", "text"), (float("inf"), "∞")])
def test_fmt_never_prints_an_exponent(value, text):
    assert units.fmt(value) == text


@pytest.mark.parametrize("fn, value, text", [
    (units.si, 2.0e7, "20 M"), (units.si, 1530, "1.53 k"), (units.si, 12, "12"),
    (units.ms, 67967, "68.0 ms"), (units.ms, 1234567, "1,235 ms"), (units.ms, 850, "0.85 ms"),
    (units.ms, 5432, "5.43 ms"), (units.ms, None, "—"),
    (units.seconds, 8.04, "8.0 s"), (units.seconds, 135, "2 min 15 s"), (units.seconds, 3725, "1 h 02 min"),
    (units.seconds, 1.8e-05, "0 s"), (units.seconds, 0.35, "0.35 s"),
    (units.rate, 93.94, "93.9/s"), (units.rate, 1234.5, "1,234/s"), (units.count, 12345, "12,345"),
    (units.percent, 0.9912, "99.1%")])
def test_human_units(fn, value, text):
    assert fn(value) == text


@pytest.mark.parametrize("value, digits, kw, text", [
    (121.7367, 2, {}, "122"), (99.5, 2, {}, "100"), (12.34, 2, {}, "12"), (1.9169, 2, {}, "1.9"),
    (1234.5, 3, {"unit": "B"}, "1,234 B"), (0.5, 3, {"signed": True}, "+0.5"), (-3.0, 3, {"signed": True}, "-3"),
    (12, 3, {"unit": "µs", "signed": True}, "+12 µs"), (None, 3, {"unit": "B"}, "—")])
def test_fmt_digits_units_and_signs(value, digits, kw, text):
    assert units.fmt(value, digits, **kw) == text


def test_the_result_pages_use_the_same_fmt():
    assert html.fmt is units.fmt


def _lat(p50: float, p99: float, count: int = 20_000) -> LatencySummary:
    return LatencySummary(count=count, p50=p50, p90=p99, p99=p99, p999=p99, max=p99 * 2, mean=p50)


def _summary(*, fixed: bool, acks: AckCounts, count: int = 20_000, op_name: str = "send") -> LoadSummary:
    op = OperationSummary(count=count, ok=count - 2, errors=2, errors_by_type={"RequestTimeout": 2}, timeouts=2,
                          rate_per_second=20.5, service_us=_lat(11000, 40000, count),
                          corrected_us=_lat(67967, 1234567, count) if fixed else None)
    return LoadSummary(run_id="r", profile="chat", mode="fixed-rate" if fixed else "closed-loop", users=30,
                       processes=1, warmup_seconds=10, measured_seconds=60, requested_rate=30.0 if fixed else None,
                       achieved_rate=29.8, achieved_over_requested=0.9933 if fixed else None, operations={op_name: op},
                       all_operations=op, acks=acks, workers=(), workers_expected=1)


def test_fixed_rate_summary_says_which_latency_is_corrected():
    text = "\n".join(summary_lines(_summary(fixed=True, acks=AckCounts(seed=280, warmup=26, measured=1232))))
    assert "coordinated omission corrected" in text and "corrected p50" in text and "service p50" in text
    assert "68.0 ms" in text and "1,235 ms" in text and "11.0 ms" in text  # corrected, then service
    assert "29.8 calls/s achieved of 30 calls/s requested (99.3%)" in text
    assert "measured 1 min 00 s after a 10.0 s warmup" in text and "20,000" in text and "too few" not in text
    assert "errors by type: RequestTimeout 2" in text
    assert not re.search(r"\b67967\b|\bus\b", text), "no raw microseconds"


def test_a_tail_percentile_of_few_calls_reads_too_few():
    """Not "send_retry 7 ... 68.5 ms 68.5 ms 68.5 ms" (p99 = p99.9 = max of 7 calls): too few."""
    text = "\n".join(summary_lines(_summary(fixed=True, acks=AckCounts(measured=5), count=7, op_name="send_retry")))
    row = next(line for line in text.splitlines() if line.strip().startswith("send_retry"))
    assert row.split()[4:] == ["68.0", "ms", "too", "few", "too", "few", "2,469", "ms", "11.0", "ms", "too", "few"]
    assert "too few: n=7: too few for p99 (send_retry, the most calls among them)" in text
    assert "p99 from 1,000 calls, p99.9 from 10,000" in text


def test_calls_in_flight_at_the_end_are_counted_in_words():
    import dataclasses

    base = _summary(fixed=True, acks=AckCounts(measured=5))
    for n, words in ((1, "in flight at the end: 1 call finished"), (4, "in flight at the end: 4 calls finished")):
        late = dataclasses.replace(base.operations["send"], count=n)
        assert words in "\n".join(summary_lines(dataclasses.replace(base, in_flight_at_end=late)))


def test_closed_loop_summary_says_it_is_service_time():
    text = "\n".join(summary_lines(_summary(fixed=False, acks=AckCounts(seed=28, measured=100))))
    assert "service time (closed loop" in text and "corrected p50" not in text


def test_acks_say_seed_and_prior_apart_from_measured():
    line = acks_line(_summary(fixed=True, acks=AckCounts(prior=500, seed=0, measured=120, replayed=3)))
    assert line == ("  acknowledged sends: 620 = 500 prior (earlier loads of this run id) + 0 seed (before Locust "
                    "started) + 120 measured; 3 retries answered from client_dedup (replays)")


def test_status_line():
    s = LiveStatus(elapsed_seconds=12.3, total_seconds=60, warmup_seconds=10, calls=1234, errors=0,
                   calls_per_second=98.14, requested_rate=100, in_flight=3, loader_cpu_percent=41.3)
    assert status_text(s) == ("  measured   12.3 s / 1 min 00 s  1,234 calls  98.1 calls/s of 100/s  0 errors  "
                              "3 in flight  loader CPU 41%")
    warm = LiveStatus(elapsed_seconds=4, total_seconds=60, warmup_seconds=10, warmup_calls=400, outcomes=2)
    assert status_text(warm) == "  warmup     4.0 s / 1 min 00 s  400 warmup calls (not measured)  0 errors  2 outcomes"
    assert status_text(LiveStatus(elapsed_seconds=70, total_seconds=60, late=4)).startswith(
        "  stopping   1 min 00 s / 1 min 00 s  0 calls  0 errors  4 finished after the end (not counted)")
    assert "idle" in status_text(LiveStatus(elapsed_seconds=5, total_seconds=None, active=False))
