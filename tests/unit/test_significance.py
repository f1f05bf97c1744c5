"""The one significance test (lab.measure.significance): its size and power, measured on
synthetic runs whose answer is known.

Each synthetic run is a series of per-interval medians: log-normal around a level, with the
lag-1 autocorrelation ``rho`` between neighbouring intervals that a shared machine's load
gives real runs (0.3-0.8 in two `lab load --rate 50` runs). Pairs of runs with the same level
must be called different in about alpha of the cases; a known shift must be found."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import signal, stats

from lab.measure.significance import MIN_INTERVALS, change_words, interval_test, verdict, window_medians

ALPHA = 0.05
PAIRS = 300


def _runs(n: int, rho: float, *, pairs: int = PAIRS, sigma: float = 0.2, seed: int = 0) -> np.ndarray:
    """``pairs`` x 2 runs of ``n`` per-interval medians (ms, around 2 ms), AR(1) in log."""
    rng = np.random.default_rng(seed)
    noise = rng.normal(size=(pairs * 2, n + 200)) * np.sqrt(1 - rho ** 2) * sigma
    return np.exp(np.log(2.0) + signal.lfilter([1], [1, -rho], noise, axis=1)[:, 200:]).reshape(pairs, 2, n)


def _rejections(runs: np.ndarray, shift: float = 1.0) -> float:
    """Share of the pairs found different (a pair whose windows drift too much for a test is not)."""
    tests = [interval_test(a, b * shift) for a, b in runs]
    return float(np.mean([t.p_value is not None and t.p_value < ALPHA for t in tests]))


@pytest.mark.parametrize("rho", [0.0, 0.5, 0.8])
def test_false_positive_rate_stays_near_alpha_under_autocorrelation(rho):
    """Identical runs: rejected in at most about 5% of the pairs (alpha plus 2.5 binomial
    standard deviations), where a t-test that ignores the correlation rejects far more often
    (measured on 400 pairs: 0.02, 0.03, 0.04 against 0.06, 0.29, 0.53)."""
    runs = _runs(30, rho, seed=int(rho * 10))
    fpr = _rejections(runs)
    assert fpr <= ALPHA + 2.5 * np.sqrt(ALPHA * (1 - ALPHA) / PAIRS), fpr
    naive = float(np.mean([stats.ttest_ind(np.log(a), np.log(b)).pvalue < ALPHA for a, b in runs]))
    if rho >= 0.5:
        assert naive > 2 * fpr and naive > 0.2, (naive, fpr)


@pytest.mark.parametrize(("n", "rho", "shift", "power"), [(30, 0.0, 1.25, 0.85), (30, 0.5, 1.5, 0.7),
                                                         (60, 0.8, 2.0, 0.8)])
def test_a_known_shift_is_found(n, rho, shift, power):
    """The power at a known shift (log sd 0.2 per interval; measured on 400 pairs: 0.95, 0.82,
    0.92): 25% without correlation, 50% at rho 0.5, 2x at rho 0.8 over 60 intervals; and the
    interval holds the true ratio."""
    runs = _runs(n, rho, pairs=150, seed=n + int(rho * 10))
    assert _rejections(runs, shift) >= power
    t = interval_test(runs[0][0], runs[0][1] * shift)
    assert t.ratio_ci_low <= shift <= t.ratio_ci_high or t.p_value < ALPHA


def test_the_result_says_direction_size_and_interval():
    runs = _runs(40, 0.3, pairs=1, sigma=0.05, seed=3)
    a, b = runs[0]
    slower = interval_test(a, b * 1.25)
    assert slower.test and slower.p_value < 1e-6 and slower.ratio == pytest.approx(1.25, rel=0.05)
    assert slower.ratio_ci_low < slower.ratio < slower.ratio_ci_high
    assert verdict(slower, significant=True, p_adjusted=slower.p_value).startswith("B slower by 2")
    faster = interval_test(a, b * 0.8)
    assert faster.ratio == pytest.approx(0.8, rel=0.05) and change_words(faster.ratio).startswith("B faster by ")
    assert change_words(3.0) == "B slower by 200% (3.0x)"
    same = interval_test(a, a)
    assert same.p_value == pytest.approx(1.0) and same.ratio == pytest.approx(1.0)
    assert verdict(same, significant=False, p_adjusted=1.0).startswith("no difference found (p=1, 1 after Holm)")


def test_a_drift_seen_through_sampling_noise_is_no_difference_either():
    """Each second's median is a drifting level (AR(1), rho 0.8) plus its own sampling noise:
    the lag-1 autocorrelation understates the drift; the test reads the decay r2/r1 too."""
    rng = np.random.default_rng(21)
    runs = _runs(30, 0.8, sigma=0.3, seed=22) * np.exp(rng.normal(0, 0.1, (PAIRS, 2, 30)))
    assert _rejections(runs) <= 0.08


def test_too_few_intervals_is_said_not_tested():
    short = interval_test([1.0] * (MIN_INTERVALS - 1), [2.0] * 40)
    assert short.test is None and short.p_value is None
    assert short.reason == f"{MIN_INTERVALS - 1} intervals: too few for a test (needs {MIN_INTERVALS} per run)"
    assert verdict(short, significant=None, p_adjusted=None) == short.reason
    drift = np.exp(np.linspace(0, 2, 30))  # one slow ramp: about one independent window
    together = interval_test(drift, drift[::-1] * 1.1)
    assert together.test is None and "drifting together" in together.reason


def test_window_medians_use_the_one_percentile_and_skip_empty_windows():
    from lab.measure import percentile
    from lab.measure.hdr import new_histogram

    h = new_histogram()
    for v in (100, 200, 300, 4000):
        h.record_value(v)
    windows = [[1.0, 2.0, 30.0], [], h, new_histogram()]
    assert window_medians(windows) == [percentile([1.0, 2.0, 30.0], 50), pytest.approx(200, rel=1e-3)]
