"""The statistics of the measurement layer: clock, mean CI, bootstrap, Holm, ratios."""
from __future__ import annotations

import math
import time

import numpy as np
import pytest

from lab.measure import Stopwatch, a_over_b, bootstrap_ci, holm, mean_ci, percentile, timed


def test_timed_measures_on_the_monotonic_clock_and_keeps_failures():
    result, t = timed(lambda: time.sleep(0.01) or 7)
    assert result == 7 and t.error is None and t.elapsed_ms >= 9
    result, t = timed(lambda: 1 / 0, errors=True)
    assert result is None and t.error == "ZeroDivisionError" and t.elapsed_ns >= 0
    with pytest.raises(ZeroDivisionError):
        timed(lambda: 1 / 0)


def test_stopwatch_stops_at_the_end_of_its_block():
    with Stopwatch() as sw:
        time.sleep(0.01)
    frozen = sw.seconds()
    time.sleep(0.01)
    assert frozen >= 0.009 and sw.seconds() == frozen


def test_mean_ci_is_student_t():
    mean, low, high = mean_ci([10.0, 12.0, 14.0, 16.0, 18.0])
    # t(0.975, 4) = 2.7764, s = 3.1623: half-width 2.7764 * 3.1623 / sqrt(5) = 3.9265
    assert mean == 14.0 and (low, high) == pytest.approx((14 - 3.9265, 14 + 3.9265), abs=1e-3)
    few = mean_ci([10.0, 12.0, 14.0])  # fewer than five rounds: a mean, no interval
    assert few[0] == 12.0 and math.isnan(few[1]) and math.isnan(few[2])
    assert all(math.isnan(v) for v in mean_ci([]))


def test_bootstrap_interval_holds_the_statistic_and_is_reproducible():
    xs = np.random.default_rng(4).lognormal(0, 0.5, 300)
    low, high = bootstrap_ci(xs)
    assert low <= percentile(xs, 99) <= high and bootstrap_ci(xs) == (low, high)
    mlow, mhigh = bootstrap_ci(xs, np.mean)
    assert mlow < xs.mean() < mhigh and mhigh - mlow < high - low
    assert bootstrap_ci([1.0]) == (None, None)


def test_holm():
    rows = [{"p_value": 0.01}, {"p_value": 0.04}, {"p_value": 0.03}, {"p_value": None}]
    holm(rows)
    assert [r.get("p_adjusted") for r in rows] == pytest.approx([0.03, 0.06, 0.06, None])
    assert [r.get("significant") for r in rows] == [True, False, False, None]


def test_a_over_b_says_its_direction():
    assert a_over_b(6, 3) == 2.0 and a_over_b(1, 3, digits=3) == 0.333
    assert a_over_b(1, 0) is None and a_over_b(None, 2) is None and a_over_b(2, None) is None
    assert a_over_b("x", 2) is None and a_over_b(math.nan, 2) is None


def test_median_ci_is_the_p50_with_a_round_bootstrap():
    from lab.measure import median_ci, percentile

    xs = [5.0, 1.0, 4.0, 2.0, 3.0, 100.0]  # one burst: the median shrugs it off
    mid, low, high = median_ci(xs, resamples=300)
    assert mid == percentile(xs, 50) == 3.0
    assert low is not None and high is not None and 1.0 <= low <= mid <= high <= 100.0
    assert median_ci(xs, resamples=300) == (mid, low, high)  # seeded: a report is reproducible
    m1, l1, h1 = median_ci([7.0])
    assert (m1, l1, h1) == (7.0, None, None)
    m0, l0, h0 = median_ci([])
    assert math.isnan(m0) and (l0, h0) == (None, None)


def test_sample_std_divides_by_n_minus_one():
    from lab.measure import sample_std

    assert sample_std([1.0, 2.0, 3.0, 4.0]) == pytest.approx(1.2909944)
    assert sample_std([5.0]) == 0.0 and sample_std([]) == 0.0


def test_no_timer_or_statistic_outside_lab_measure():
    """One clock and one definition of each statistic: elsewhere a duration is a Stopwatch /
    now_ns / timed, a CPU time process_cpu_seconds / thread_cpu_ns / CpuMeter, a median is
    percentile(xs, 50), a spread sample_std (lab.measure)."""
    import ast
    from pathlib import Path

    lab_dir = Path(__file__).resolve().parents[2] / "lab"
    banned = {"perf_counter", "perf_counter_ns", "median", "quantile", "percentile", "nanpercentile", "std", "var",
              "process_time", "process_time_ns", "thread_time", "thread_time_ns"}  # CPU clocks: lab.measure.process_cpu
    found = []
    for path in sorted(lab_dir.rglob("*.py")):
        if "measure" in path.relative_to(lab_dir).parts[:1]:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "time":
                found += [f"{path.relative_to(lab_dir.parent)}:{node.lineno} from time import {a.name}"
                          for a in node.names if a.name in banned]
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in banned:
                owner = ast.unparse(node.func.value)
                if node.func.attr == "percentile" and owner not in ("np", "numpy"):
                    continue  # lab.measure's own, imported by name or module
                found.append(f"{path.relative_to(lab_dir.parent)}:{node.lineno} {owner}.{node.func.attr}")
    assert found == []
