"""The knee's curve checked at a rate it did not measure, on synthetic steps: the interpolation,
the held-out rate and its prediction, and the verdict against the step that measured it."""
from __future__ import annotations

import pytest

from lab.load.knee_check import CPU_TOLERANCE, check, interpolate, predict
from lab.load.knee_search import Knee, KneeStep, SearchPlan, Slo
from lab.load.verdict import MACHINE_BOUND, VALID

SLO = Slo.parse("p99<=50ms")
PLAN = SearchPlan(start_rate=20, max_steps=8, min_calls=1000)


def step(n: int, rate: float, *, cores: float | None, latency: float | None = 10.0, verdict: str = VALID,
         achieved: float | None = None) -> KneeStep:
    return KneeStep(number=n, requested_rate=rate, achieved_rate=rate if achieved is None else achieved,
                    sends_per_second=rate / 4, calls=5000, latency_ms=latency, verdict=verdict, node_cores=cores)


def test_interpolation_is_linear_between_neighbours_and_extends_the_nearest_two():
    pts = [(10, 1.0), (20, 2.0), (40, 3.0)]
    assert interpolate(pts, 15) == pytest.approx(1.5)
    assert interpolate(pts, 30) == pytest.approx(2.5)
    assert interpolate(pts, 50) == pytest.approx(3.5)
    assert interpolate(pts, 5) == pytest.approx(0.5)
    assert interpolate([(10, 1.0)], 5) is None and interpolate([(10, 1.0), (10, 2.0)], 5) is None


def test_the_held_out_rate_is_a_share_of_the_knee_predicted_from_the_valid_steps_only():
    steps = (step(1, 20, cores=0.2, latency=5), step(2, 40, cores=0.4, latency=8),
             step(3, 80, cores=0.9, latency=30), step(4, 160, cores=1.9, verdict=MACHINE_BOUND))
    knee = Knee(slo=SLO, plan=PLAN, steps=steps)
    assert knee.step.number == 3
    p = predict(knee, 0.8)
    assert p.rate == pytest.approx(64) and p.from_steps == (1, 2, 3)
    assert p.node_cores == pytest.approx(0.4 + 0.5 * 24 / 40) and p.latency_ms == pytest.approx(8 + 22 * 24 / 40)


def test_no_knee_or_a_single_valid_step_predicts_nothing():
    assert predict(Knee(slo=SLO, plan=PLAN, steps=(step(1, 20, cores=0.2, latency=80),))) is None
    assert predict(Knee(slo=SLO, plan=PLAN, steps=(step(1, 20, cores=0.2),))) is None


def test_the_check_reinterpolates_at_the_achieved_rate_and_judges_cpu_within_its_tolerance():
    knee = Knee(slo=SLO, plan=PLAN, steps=(step(1, 20, cores=0.2), step(2, 40, cores=0.4), step(3, 80, cores=0.8)))
    p = predict(knee, 0.8)
    held = check(knee, p, step(4, p.rate, cores=0.6, achieved=60))  # asked 64, did 60: predicted 0.6 there
    assert held.predicted.rate == 60 and held.cpu_error == pytest.approx(0.0) and held.cpu_ok
    off = check(knee, p, step(4, p.rate, cores=0.6 / (1 + 2 * CPU_TOLERANCE), achieved=60))
    assert off.cpu_ok is False and "MISSED" in off.describe()
    bound = check(knee, p, step(4, p.rate, cores=0.6, verdict=MACHINE_BOUND))
    assert bound.cpu_ok is None and "not checked" in bound.describe()
    assert held.to_json()["cpu_ok"] is True and "met" in held.describe()
