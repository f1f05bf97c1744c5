"""`lab compare` on load results: latencies from HDR histograms, Mann-Whitney U + Holm (no node)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lab.measure.hdr import LatencyRecorder, summarize
from lab.results.compare import compare_runs, to_html, to_text


def _load_run(folder: Path, latencies_us: dict[str, list[int]]) -> Path:
    """A load-run folder as ``lab load`` leaves it: per-worker totals (HDR histograms) + summary.json."""
    rec = LatencyRecorder(fixed_rate=False)
    for op, values in latencies_us.items():
        for v in values:
            rec.record(op, started_ns=0, ended_ns=v * 1000)
    load = folder / "load"
    (load / "totals").mkdir(parents=True)
    (load / "totals" / "worker-0.json").write_text(json.dumps({"worker": 0, "totals": rec.totals_json()}))
    ops = summarize(rec.totals, elapsed_seconds=10.0, fixed_rate=False)
    (load / "summary.json").write_text(json.dumps({"operations": {op: s.to_json() for op, s in ops.items()}}))
    return folder


def _notebook_run(folder: Path, samples_ms: dict[int, list[float]]) -> Path:
    """A calibration-run folder with one notebook samples table (``in_size``, ``latency_ms``)."""
    nb = folder / "in_limit"
    nb.mkdir(parents=True)
    rows = ["in_size,latency_ms,ok"] + [f"{k},{v},True" for k, vs in samples_ms.items() for v in vs]
    (nb / "samples.csv").write_text("\n".join(rows) + "\n")
    (folder / "calibration.json").write_text(json.dumps({"run_id": folder.name, "constants": {}}))
    return folder


def test_compare_load_operations_tests_the_latency_samples(tmp_path):
    """A real shift is significant after Holm's correction, the same distribution is not."""
    rng = np.random.default_rng(1)
    same = rng.lognormal(np.log(800), 0.3, 2000).astype(int).tolist()
    a = _load_run(tmp_path / "a", {"send": rng.lognormal(np.log(1000), 0.3, 2000).astype(int).tolist(),
                                   "history_latest": same})
    b = _load_run(tmp_path / "b", {"send": rng.lognormal(np.log(1300), 0.3, 2000).astype(int).tolist(),
                                   "history_latest": rng.permutation(same).tolist()})
    cmp = compare_runs(a, b)
    ops = {r["operation"]: r for r in cmp.operations}
    assert ops["send"]["test"] == "mann-whitney-u" and ops["send"]["significant"]
    assert ops["send"]["p_a_gt_b"] < 0.3 and ops["send"]["p99_b"] > ops["send"]["p99_a"]
    assert ops["send"]["count_a"] == ops["send"]["count_b"] == 2000
    assert ops["send"]["p99_ratio_b_over_a"] == pytest.approx(ops["send"]["p99_b"] / ops["send"]["p99_a"])
    assert not ops["history_latest"]["significant"] and ops["history_latest"]["p_a_gt_b"] == pytest.approx(0.5)
    assert "send" in to_text(cmp) and "SIGNIFICANT" in to_text(cmp)


def test_notebook_samples_use_the_one_percentile_and_carry_a_p99_interval(tmp_path):
    """Per group: the nearest-rank p50/p99 of the samples (lab.measure), the p99's bootstrap
    interval around it, and the ratio B/A that its name says."""
    from lab.measure import percentile

    rng = np.random.default_rng(2)
    xa = {k: rng.lognormal(np.log(2.0 * k), 0.2, 40).round(4).tolist() for k in (1, 10)}
    xb = {1: xa[1][::-1], 10: (np.asarray(xa[10]) * 3).round(4).tolist()}
    cmp = compare_runs(_notebook_run(tmp_path / "a", xa), _notebook_run(tmp_path / "b", xb))
    rows = {r["group"]: r for r in cmp.samples}
    assert set(rows) == {"in_size=1", "in_size=10"}
    for k, r in ((1, rows["in_size=1"]), (10, rows["in_size=10"])):
        assert r["p50_a"] == percentile(xa[k], 50) and r["p99_b"] == percentile(xb[k], 99)
        assert r["n_a"] == r["n_b"] == 40
        assert r["p99_ci_low_a"] <= r["p99_a"] <= r["p99_ci_high_a"]
        assert r["p50_ratio_b_over_a"] == pytest.approx(r["p50_b"] / r["p50_a"])
    assert rows["in_size=10"]["significant"] and not rows["in_size=1"]["significant"]
    assert "95% CI" in to_html(cmp)
