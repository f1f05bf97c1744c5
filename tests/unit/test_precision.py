"""Precision stated in advance: sampling stops on the target, the budget or the step limit and
says which; halves that disagree make a recommendation inconclusive (lab.calibration.precision,
lab.calibration.recommendations)."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lab.calibration.experiments.in_limit import recommend
from lab.calibration.recommendations import CONFIDENCE_LEGEND, CONFIDENCE_LEVELS, assess, confidence_of
from lab.calibration.precision import TARGETS, Halves, Precision, halves, sample_until
from lab.constants import read_entries
from lab.measure import mean_ci, relative_half_width


def _sampler(values):
    seen = []
    return seen, (lambda i: seen.append(values[i])), (lambda: relative_half_width(*mean_ci(seen)))


def test_sampling_stops_when_the_target_is_reached():
    seen, step, achieved = _sampler([100, 101, 99, 100, 100, 100, 100])
    p = sample_until(step, achieved, quantity="x", target=0.02, budget_seconds=60, min_steps=3, max_steps=7)
    # 3 and 4 values: too few rounds for an interval (lab.measure.stats.MIN_INTERVAL_ROUNDS); 5: ±0.9%
    assert p.status == "reached" and p.reached and p.steps == len(seen) == 5
    assert p.achieved_rel_half_width <= 0.02
    assert "target reached" in p.describe() and "±2%" in p.describe()


def test_too_few_rounds_for_an_interval_say_so():
    seen, step, achieved = _sampler([100, 101, 99, 100])
    p = sample_until(step, achieved, quantity="x", target=0.02, budget_seconds=60, min_steps=2, max_steps=2)
    assert p.status == "limit" and p.achieved_rel_half_width is None and p.too_few_rounds
    assert p.describe().startswith("too few rounds for an interval (2 rounds") and "confidence low" in p.describe()
    assert p.to_json()["too_few_rounds"] is True


def test_sampling_says_when_the_step_limit_or_the_budget_ended_it():
    rng = np.random.default_rng(1)
    noisy = list(rng.normal(100, 40, 50))
    _, step, achieved = _sampler(noisy)
    p = sample_until(step, achieved, quantity="x", target=0.001, budget_seconds=60, min_steps=2, max_steps=5)
    assert p.status == "limit" and p.steps == 5 and p.achieved_rel_half_width > 0.001

    def slow(i):
        time.sleep(0.05)
    p = sample_until(slow, lambda: 1.0, quantity="x", target=0.1, budget_seconds=0.12, min_steps=2, max_steps=50)
    assert p.status == "budget" and 2 <= p.steps < 50 and "budget" in p.describe()
    # min_steps run whatever the budget
    p = sample_until(slow, lambda: 1.0, quantity="x", target=0.1, budget_seconds=0.0, min_steps=3, max_steps=50)
    assert p.steps == 3 and p.status == "budget"


def test_the_target_needs_the_acceptance_too():
    calls = []
    p = sample_until(lambda i: calls.append(i), lambda: 0.0, quantity="x", target=0.1, budget_seconds=60,
                     min_steps=1, max_steps=4, accept=lambda: len(calls) >= 3)
    assert p.status == "reached" and p.steps == 3


def test_precision_round_trips_and_rejects_an_unknown_status():
    p = Precision(quantity="b_row_bytes", target_rel_half_width=0.02, achieved_rel_half_width=0.015,
                  status="reached", steps=6, seconds=120.0, budget_seconds=600)
    assert Precision.from_json(p.to_json()) == p and p.to_json()["reached"] is True
    with pytest.raises(ValueError):
        Precision(quantity="x", target_rel_half_width=0.1, achieved_rel_half_width=None, status="done", steps=1,
                  seconds=1, budget_seconds=1)
    assert TARGETS["b_row_bytes"].for_mode(quick=False) == 0.02 and TARGETS["b_row_bytes"].for_mode(quick=True) == 0.10


def test_halves_split_the_rounds_in_two():
    h = halves(10, lambda rounds: 1 if max(rounds) < 5 else 2)
    assert h == Halves(first=1, second=2) and not h.agree and h.to_json()["agree"] is False
    assert halves(1, lambda r: 0) is None
    assert halves(4, lambda r: len(r)).agree


def test_in_limit_recommends_the_knee_not_the_flat_minimum():
    per_size = pd.DataFrame({"in_size": [1, 10, 50, 100, 300], "per_row_us": [2000.0, 220.0, 60.0, 52.0, 50.0],
                             "p99_ms": [2, 5, 8, 12, 30], "ok": [True] * 5})
    assert recommend(per_size, p99_budget_ms=50, server_limit=None, tolerance=0.10) == 100
    assert recommend(per_size, p99_budget_ms=50, server_limit=None, tolerance=0.0) == 300
    assert recommend(per_size, p99_budget_ms=20, server_limit=None, tolerance=0.0) == 100  # p99 budget
    assert recommend(per_size, p99_budget_ms=50, server_limit=50, tolerance=0.10) == 50    # server limit
    assert recommend(per_size, p99_budget_ms=1, server_limit=None) is None


def test_confidence_follows_the_legend():
    assert set(CONFIDENCE_LEGEND) == set(CONFIDENCE_LEVELS)
    reached, budget = {"status": "reached"}, {"status": "budget"}
    assert confidence_of(100, (99, 101), quick=True, precision=reached) == "low"           # quick: a smoke test
    assert confidence_of(100, (99, 101), quick=False, precision=reached) == "high"
    assert confidence_of(100, (95, 105), quick=False, precision=budget) == "medium"
    assert confidence_of(100, (50, 150), quick=False, precision=budget) == "low"
    assert confidence_of(100, (99, 101), quick=False, precision=reached, halves_agree=False) == "inconclusive"
    assert confidence_of(None, None, quick=False) == "none"


def test_halves_that_disagree_keep_the_constant(tmp_path: Path):
    values = {"recommended_in_limit": 300, "in_limit_halves": {"first": 300, "second": 50, "agree": False},
              "in_limit_precision": {"status": "reached", "target_rel_half_width": 0.1}}
    c = assess(read_entries(), {"in_limit": {"values": values, "dir": tmp_path}}, run_dir=tmp_path, run_id="r",
               quick=False)["batch_read_in_list_limit"]
    assert c.inconclusive and c.confidence == "inconclusive" and not c.changed
    assert c.recommended == c.current == 100 and c.measured == 300
    assert "inconclusive: first half 300, second half 50" in c.evidence
    values["in_limit_halves"] = {"first": 300, "second": 300, "agree": True}
    c = assess(read_entries(), {"in_limit": {"values": values, "dir": tmp_path}}, run_dir=tmp_path, run_id="r",
               quick=False)["batch_read_in_list_limit"]
    assert not c.inconclusive and c.confidence == "high" and c.recommended == 300 and c.changed
    assert c.precision["status"] == "reached" and c.halves["agree"] is True


def test_halves_of_a_continuous_recommendation_agree_within_their_tolerance():
    assert Halves(first=0.44, second=0.47, tolerance=0.1).agree
    assert not Halves(first=0.44, second=0.58, tolerance=0.1).agree
    assert not Halves(first=0.44, second=0.47).agree                     # no tolerance: equality
    assert Halves.from_json(Halves(first=0.4, second=0.45, tolerance=0.1).to_json()).agree
    assert not Halves(first=None, second=0.4, tolerance=1.0).agree


def _sweep(range_us_by_round: list[list[float]], in_us: float = 5000.0):
    """A density sweep with traces: range server time a + b / density (per round), IN flat."""
    densities = [1.0, 0.75, 0.5, 0.3, 0.2, 0.1]
    traces = pd.DataFrame([{"density": d, "trace": r, "range_server_us": us[i], "in_server_us": in_us}
                           for r, us in enumerate(range_us_by_round) for i, d in enumerate(densities)])
    med = traces.groupby("density", as_index=False).median()
    density = med[["density", "range_server_us", "in_server_us"]].assign(range_rows=0)
    return density, traces


def test_the_range_density_threshold_per_trace_round():
    from lab.calibration.experiments.grouped_reads import rounds_recommender

    cheap = [1000 + 2000 / d for d in (1.0, 0.75, 0.5, 0.3, 0.2, 0.1)]    # crossover 2000 / 4000 = 0.5
    dear = [1000 + 3200 / d for d in (1.0, 0.75, 0.5, 0.3, 0.2, 0.1)]     # crossover 0.8
    density, traces = _sweep([cheap, cheap, dear, dear])
    over = rounds_recommender(density, traces)
    assert over([0, 1]) == 0.5
    assert over([2, 3]) == 0.8
    assert over([0, 0]) == 0.5  # a resample repeats rounds
    split = halves(4, over, tolerance=0.1)
    assert (split.first, split.second) == (0.5, 0.8) and not split.agree


def test_a_density_threshold_whose_halves_disagree_is_kept(tmp_path: Path):
    values = {"recommended_range_min_density": 0.8, "recommended_range_min_density_ci_low": 0.45,
              "recommended_range_min_density_ci_high": 0.85,
              "range_density_halves": {"first": 0.5, "second": 0.8, "tolerance": 0.1, "agree": False}}
    c = assess(read_entries(), {"grouped_reads": {"values": values, "dir": tmp_path}}, run_dir=tmp_path,
               run_id="r", quick=False)["batch_read_range_min_density"]
    assert c.inconclusive and c.confidence == "inconclusive" and c.recommended == c.current
    assert (c.recommended_ci_low, c.recommended_ci_high) == (0.45, 0.85)
    values["range_density_halves"] = {"first": 0.5, "second": 0.55, "tolerance": 0.1, "agree": True}
    c = assess(read_entries(), {"grouped_reads": {"values": values, "dir": tmp_path}}, run_dir=tmp_path,
               run_id="r", quick=False)["batch_read_range_min_density"]
    assert not c.inconclusive and c.recommended == 0.8 and c.confidence == "medium"


def test_an_interval_rule_without_an_interval_recommends_nothing(tmp_path: Path):
    """Two rounds give a mean and no interval: the constant is kept and the evidence says why
    (it was replaced by the measured mean, a change from two rounds)."""
    values = {"b_row_bytes": 1290.0, "b_row_ci_low_bytes": None, "b_row_ci_high_bytes": None}
    c = assess(read_entries(), {"b_row": {"values": values, "dir": tmp_path}}, run_dir=tmp_path, run_id="r",
               quick=False)["b_row_bytes"]
    assert c.measured == 1290 and c.ci_low is None and c.recommended == c.current and not c.changed
    assert "too few rounds for an interval" in c.evidence
    values.update(b_row_ci_low_bytes=1280.0, b_row_ci_high_bytes=1300.0)
    c = assess(read_entries(), {"b_row": {"values": values, "dir": tmp_path}}, run_dir=tmp_path, run_id="r",
               quick=False)["b_row_bytes"]
    assert c.changed and c.recommended == 1290


def test_a_step_is_called_what_it_is():
    # space_amp samples in batches of replicates: one batch of one replicate is neither "1 round"
    # nor an interval; 2 batches of 5 replicates are "2 batches"
    one = Precision(quantity="lsm_space_amp", target_rel_half_width=0.5, achieved_rel_half_width=None,
                    status="limit", steps=1, seconds=60.0, budget_seconds=900, step_unit="batch", samples_per_step=1,
                    sample_unit="replicate")
    assert one.too_few_rounds and "round" not in one.describe()
    assert one.describe().startswith("too few replicates for an interval (1 batch of 1 replicate, at least 5 "
                                     "replicates needed")
    two = Precision(quantity="lsm_space_amp", target_rel_half_width=0.05, achieved_rel_half_width=0.08,
                    status="limit", steps=2, seconds=600.0, budget_seconds=900, step_unit="batch", samples_per_step=5,
                    sample_unit="replicate")
    assert "after 2 batches, 600 s" in two.describe() and "round" not in two.describe()
    # one batch of 5 replicates carries an interval: not "too few"
    assert not Precision(quantity="x", target_rel_half_width=0.05, achieved_rel_half_width=None, status="limit",
                         steps=1, seconds=1, budget_seconds=1, step_unit="batch", samples_per_step=5,
                         sample_unit="replicate").too_few_rounds
    assert Precision.from_json(two.to_json()) == two
    # the callers that sample rounds keep their words
    _, step, achieved = _sampler([100, 101, 99, 100])
    p = sample_until(step, achieved, quantity="x", target=0.02, budget_seconds=60, min_steps=3, max_steps=3,
                     step_unit="repeat")
    assert "3 repeats" in p.describe() and p.step_unit == "repeat"
