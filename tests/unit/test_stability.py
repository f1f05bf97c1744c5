"""A value chosen from a curve is proposed only when it is stable: the share of bootstrap resamples
choosing it, and sampling that stops on a stable choice or goes on to its budget and ends
inconclusive (lab.calibration.stability; its use by the three notebooks that choose from a curve
and by the proposal path).

Statistical cases draw their data from a seeded generator (the same verdict on every run). The
clear and the threshold cases are also built with margins wide enough for any seed to pass with
odds far better than 1 in 10,000: the clear curve's knee is more than 10 standard errors inside
its line, the curve on a threshold alternates exactly (its share stays near 0.5). The flat noisy
curve holds by its seed alone: a flat curve looks stable in a few runs in a hundred
(docs/measurements.md), which is what the spaced looks and the stricter early stop limit."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lab.calibration.stability import (
    CHECK_RESAMPLES,
    MIN_STOP_UNITS,
    STABLE_SHARE,
    Stability,
    choice_stability,
    sample_until_stable,
    stops_early,
)
from lab.measure.stats import BOOTSTRAP_RESAMPLES

CANDIDATES = np.array([10, 50, 100, 200, 300])


def _knee(per_row: np.ndarray, tolerance: float = 0.10) -> int:
    """The in_limit rule on one resample: the smallest candidate within 10% of the lowest cost."""
    best = per_row.min()
    return int(CANDIDATES[per_row <= best * (1 + tolerance)].min())


class Curve:
    """Rounds of per-row costs, one column per candidate, drawn as sampling asks for them."""

    def __init__(self, means: list[float], sd: float, seed: int) -> None:
        self.means, self.sd = np.asarray(means, float), sd
        self.rng = np.random.default_rng(seed)
        self.rows: list[np.ndarray] = []

    def step(self, i: int) -> None:
        self.rows.append(self.rng.normal(self.means, self.sd))

    def stability(self, resamples: int) -> Stability:
        m = np.asarray(self.rows)
        return choice_stability(len(m), lambda idx: _knee(m[idx].mean(axis=0)), resamples=resamples)


def test_a_clearly_best_value_is_stable_and_sampling_stops_early():
    # the knee at 100 sits 1.55 µs inside the 10% line (22.55), a round's noise 0.3: more than 10
    # standard errors of a 10-round mean; 50 is 7 µs outside it
    curve = Curve([40.0, 30.0, 21.0, 20.6, 20.5], sd=0.3, seed=1)
    precision, verdict = sample_until_stable(curve.step, curve.stability, budget_seconds=1e9, min_steps=10,
                                             max_steps=200)
    assert precision is None  # no precision target given: stability alone
    assert verdict.stable and verdict.choice == 100 and verdict.share >= 0.99
    assert verdict.resamples == BOOTSTRAP_RESAMPLES and verdict.units == len(curve.rows) == MIN_STOP_UNITS
    assert verdict.describe().startswith("stable: ") and verdict.describe().endswith(
        "% of resamples choose 100 (needs 90%)")
    assert verdict.to_json()["stable"] is True


def test_a_choice_on_a_threshold_is_inconclusive_at_the_budget():
    # the shape: 150 sits exactly on the tolerance line of the lowest cost (20 x 1.25 = 25:
    # 24 in one round, 26 in the next, exact in floating point). A resample keeps it inside the line
    # only when it draws at least as many 24s as 26s: about half do, however many rounds there are,
    # so the share stays near 0.5, far from 0.9.
    costs = np.array([[40.0, 30.0, 24.0, 20.0, 20.5], [40.0, 30.0, 26.0, 20.0, 20.5]])
    rows: list[np.ndarray] = []
    looks: list[int] = []

    def step(i: int) -> None:
        rows.append(costs[i % 2])

    def stability(resamples: int) -> Stability:
        looks.append(len(rows))
        m = np.asarray(rows)
        choices = np.array([10, 50, 150, 200, 300])
        return choice_stability(len(m), lambda idx: int(choices[m[idx].mean(axis=0) <= 20.0 * 1.25].min()),
                                resamples=resamples)

    precision, verdict = sample_until_stable(step, stability, achieved=lambda: 0.01, quantity="per-row cost",
                                             target=0.10, budget_seconds=1e9, min_steps=10, max_steps=60)
    assert precision.status == "limit" and precision.steps == 60 == len(rows)  # the budget (steps) ended it
    assert verdict.choice == 150 and verdict.runner_up == 200
    assert not verdict.stable and 0.4 < verdict.share < 0.7 and verdict.units == 60
    assert verdict.describe() == (f"inconclusive: {100 * verdict.share:.0f}% of resamples choose 150 (needs 90%; "
                                  f"next 200 at {100 * verdict.runner_up_share:.0f}%)")
    # looks spaced out (each one a chance for a flat curve to look stable by luck), then the verdict
    assert looks[:-1] == [10, 15, 23, 35, 53] and looks[-1] == 60


def test_a_stable_choice_still_waits_for_the_halves_to_agree():
    curve = Curve([40.0, 30.0, 21.0, 20.6, 20.5], sd=0.3, seed=1)
    precision, verdict = sample_until_stable(curve.step, curve.stability, achieved=lambda: 0.01, quantity="x",
                                             target=0.1, budget_seconds=1e9, min_steps=10, max_steps=30,
                                             accept=lambda: False)
    assert precision.status == "limit" and precision.steps == 30 and verdict.stable  # stable, yet not stopped early


def test_a_flat_curve_with_exact_ties_chooses_the_smallest_every_time():
    # ties everywhere: the rule's "smallest within 10%" is deterministic, so the choice is stable
    flat = np.full((12, 5), 20.0)
    verdict = choice_stability(12, lambda idx: _knee(flat[idx].mean(axis=0)))
    assert verdict.stable and verdict.choice == 10 and verdict.share == 1.0


def test_a_flat_noisy_curve_is_rarely_stable():
    # five equal candidates, noise only: argmin flips between resamples
    rng = np.random.default_rng(7)
    m = rng.normal(20.0, 1.0, size=(60, 5))
    verdict = choice_stability(60, lambda idx: int(np.argmin(m[idx].mean(axis=0))))
    assert not verdict.stable and verdict.share < 0.7 and verdict.runner_up is not None


def test_one_candidate_is_always_stable():
    verdict = choice_stability(8, lambda idx: 100)
    assert verdict.stable and verdict.share == 1.0 and verdict.choice == 100


def test_too_few_rounds_are_never_stable_and_say_so():
    verdict = choice_stability(3, lambda idx: 100)
    assert verdict.too_few and verdict.share is None and not verdict.stable
    assert verdict.describe() == ("inconclusive: 3 rounds, too few to resample (at least 5; needs 90% of "
                                  "resamples choosing 100)")
    assert choice_stability(0, lambda idx: 100).choice is None
    # sampling with too few rounds for a bootstrap never stops early: it runs to its step limit
    rows: list[int] = []
    _, stop = sample_until_stable(rows.append, lambda n: choice_stability(len(rows), lambda idx: 1, resamples=n),
                                  budget_seconds=1e9, min_steps=1, max_steps=4)
    assert len(rows) == 4 and stop.too_few


def test_nothing_chosen_is_not_stable():
    verdict = choice_stability(10, lambda idx: None)
    assert verdict.choice is None and not verdict.stable and verdict.describe().startswith("nothing chosen")
    # a resample that chooses nothing (no size met the budget) counts against the choice
    verdict = choice_stability(10, lambda idx: None if 0 in idx else 100, choice=100)
    assert 0 < verdict.share < 0.5 and not verdict.stable


def test_a_continuous_choice_counts_resamples_within_its_tolerance():
    values = np.linspace(0.48, 0.52, 20)  # every resample's mean within 0.02 of 0.50
    verdict = choice_stability(20, lambda idx: round(float(values[idx].mean()), 2), tolerance=0.05)
    assert verdict.stable and verdict.choice == 0.5 and "(within 0.05)" in verdict.describe()
    exact = choice_stability(20, lambda idx: round(float(values[idx].mean()), 3))
    assert not exact.stable  # the same resamples without a tolerance: rarely the very same number


def test_the_required_share_is_inclusive_and_validated():
    assert Stability(choice=1, share=STABLE_SHARE, units=10).stable
    assert not Stability(choice=1, share=0.899, units=10).stable
    with pytest.raises(ValueError):
        choice_stability(10, lambda idx: 1, required=0)
    # an early stop is stricter than the verdict, and needs enough units
    assert not stops_early(Stability(choice=1, share=0.92, units=40))
    assert stops_early(Stability(choice=1, share=0.96, units=40))
    assert not stops_early(Stability(choice=1, share=1.0, units=MIN_STOP_UNITS - 1))


def test_the_verdict_is_seeded_and_round_trips():
    rng = np.random.default_rng(3)
    m = rng.normal([30.0, 25.0, 24.0], 2.0, size=(30, 3))
    a = choice_stability(30, lambda idx: int(np.argmin(m[idx].mean(axis=0))), resamples=CHECK_RESAMPLES)
    b = choice_stability(30, lambda idx: int(np.argmin(m[idx].mean(axis=0))), resamples=CHECK_RESAMPLES)
    assert a == b and Stability.from_json(a.to_json()) == a and Stability.from_json(None) is None
    assert a.to_json()["text"] == a.describe()


# ---- the three notebooks' choices ------------------------------------------------------------
def test_the_in_limit_rule_resampled_is_the_notebooks_rule():
    from lab.calibration.experiments.in_limit import Params, _recommend_rows, recommend

    rng = np.random.default_rng(11)
    sizes = [1, 10, 100, 200]
    m = rng.normal([0.5, 0.6, 2.5, 4.8], 0.05, size=(20, 4))  # ms per read: per row 500, 60, 25, 24 µs
    params = Params(per_row_tolerance=0.10, p99_budget_ms=50.0)
    frame = pd.DataFrame({"in_size": sizes, "per_row_us": m.mean(axis=0) * 1000 / np.asarray(sizes), "ok": True,
                          "p99_ms": m.max(axis=0)})
    assert _recommend_rows(m, sizes, params, None) == recommend(frame, p99_budget_ms=50.0, server_limit=None) == 100
    assert _recommend_rows(m, sizes, params, 10) == 10  # the server limit
    assert _recommend_rows(m, sizes, Params(p99_budget_ms=0.1), None) is None  # nothing within the p99 budget


def test_the_scan_limit_is_stable_when_the_design_covers_the_holes():
    from lab.calibration.experiments.empty_buckets import recommend_limit, scan_limit_stability

    short = pd.DataFrame({"empty_buckets": [0] * 900 + [1] * 80 + [3] * 20})
    assert recommend_limit(short, 0.001) == 4
    verdict = scan_limit_stability(short, 0.001, design=8)
    assert verdict.stable and verdict.choice == 8 and verdict.unit == "hole"
    # two holes of 9 in a thousand decide the required limit (10): only resamples drawing both agree
    rare = pd.DataFrame({"empty_buckets": [0] * 998 + [9, 9]})
    verdict = scan_limit_stability(rare, 0.001, design=8)
    assert verdict.choice == 10 and not verdict.stable and 0.5 < verdict.share < 0.75
    assert "inconclusive" in verdict.describe() and "next 8" in verdict.describe()


def test_recommend_limit_counts_holes_at_least_as_long_as_the_limit():
    from lab.calibration.experiments.empty_buckets import recommend_limit

    holes = pd.DataFrame({"empty_buckets": [0, 0, 1, 2, 5]})
    assert recommend_limit(holes, 0.2) == 3     # holes >= 3: 1 of 5 (20%)
    assert recommend_limit(holes, 0.0) == 6     # none may be >= the limit
    assert recommend_limit(pd.DataFrame({"empty_buckets": []}), 0.1) == 1
    assert recommend_limit(pd.DataFrame({"empty_buckets": [70]}), 0.0) == 71  # past the candidates


def test_the_range_density_is_stable_within_its_tolerance():
    from lab.calibration.experiments.grouped_reads import range_density_stability

    densities = [1.0, 0.75, 0.5, 0.3, 0.2, 0.1]

    def sweep(rounds: list[list[float]]):
        traces = pd.DataFrame([{"density": d, "trace": r, "range_server_us": us[i], "in_server_us": 5000.0}
                               for r, us in enumerate(rounds) for i, d in enumerate(densities)])
        density = traces.groupby("density", as_index=False).median()[["density", "range_server_us", "in_server_us"]]
        return density, traces

    steady = [[1000 + 2000 / d * (1 + 0.01 * (r % 3)) for d in densities] for r in range(8)]  # crossover ~0.5
    verdict = range_density_stability(*sweep(steady))
    assert verdict.stable and abs(verdict.choice - 0.5) <= 0.02 and verdict.unit == "trace round"
    split = [[1000 + (2000 if r % 2 else 3200) / d for d in densities] for r in range(8)]  # 0.5 or 0.8
    assert not range_density_stability(*sweep(split)).stable


# ---- the proposal path -----------------------------------------------------------------------
def _in_limit_values(share: float) -> dict:
    stability = Stability(choice=200, share=share, units=30, runner_up=150, runner_up_share=1 - share)
    return {"recommended_in_limit": 200, "in_limit_halves": {"first": 200, "second": 200, "agree": True},
            "in_limit_precision": {"status": "reached", "target_rel_half_width": 0.1},
            "in_limit_stability": stability.to_json()}


def test_an_unstable_choice_is_inconclusive_and_not_proposed(tmp_path: Path):
    from lab.calibration.recommendations import assess
    from lab.constants import read_entries

    c = assess(read_entries(), {"in_limit": {"values": _in_limit_values(0.66), "dir": tmp_path}}, run_dir=tmp_path,
               run_id="r", quick=False)["batch_read_in_list_limit"]
    assert c.inconclusive and c.confidence == "inconclusive" and not c.changed
    assert c.recommended == c.current == 100 and c.measured == 200
    text = "inconclusive: 66% of resamples choose 200 (needs 90%; next 150 at 34%)"
    assert c.inconclusive_reason == text and f"[{text}]" in c.evidence
    assert c.stability["stable"] is False
    stable = assess(read_entries(), {"in_limit": {"values": _in_limit_values(0.93), "dir": tmp_path}},
                    run_dir=tmp_path, run_id="r", quick=False)["batch_read_in_list_limit"]
    assert not stable.inconclusive and stable.recommended == 200 and stable.changed and stable.confidence == "high"


def test_the_proposal_and_the_decision_name_the_unstable_choice(tmp_path: Path):
    from lab.calibration.contract import CalibrationRun, write_calibration
    from lab.calibration.decisions import decision
    from lab.calibration.propose import propose
    from lab.calibration.recommendations import assess
    from lab.constants import APPENDIX_B_PATH, read_entries

    constants = assess(read_entries(), {"in_limit": {"values": _in_limit_values(0.66), "dir": tmp_path}},
                       run_dir=tmp_path, run_id="r", quick=False)
    row = constants["batch_read_in_list_limit"].to_json()
    assert decision("batch_read_in_list_limit", row).text.endswith(
        "inconclusive: 66% of resamples choose 200 (needs 90%; next 150 at 34%)")
    run = CalibrationRun.from_json({"run_id": "r", "mode": "full", "status": "ok", "started_at": "now",
                                    "constants": {k: v.to_json() for k, v in constants.items()}})
    write_calibration(tmp_path, run)
    proposal = propose(tmp_path, constants_path=APPENDIX_B_PATH)
    assert "batch_read_in_list_limit" not in proposal.changes
    assert ("Not proposed: batch_read_in_list_limit: inconclusive: 66% of resamples choose 200 (needs 90%"
            in proposal.path.read_text())
