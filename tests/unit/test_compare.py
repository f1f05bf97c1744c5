"""`lab compare` (no node): per-interval medians from HDR interval logs and notebook rounds, the
one significance test of lab.measure + Holm, verdicts in words, comparability and agreement."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lab.measure.hdr import LatencyRecorder, summarize
from lab.comparison.compare import compare_runs, to_html, to_text
from lab.errors import ValidationError


def _load_run(folder: Path, latencies_us: dict[str, list[list[int]]], *, fixed_rate: bool = False) -> Path:
    """A load-run folder as ``lab load`` leaves it: one HDR interval log (one-second intervals
    from t0), per-worker totals and summary.json. ``latencies_us``: per operation, the calls of
    each second."""
    from lab.measure.hdr import IntervalLogWriter

    rec = LatencyRecorder(fixed_rate=fixed_rate)
    load = folder / "load"
    (load / "totals").mkdir(parents=True)
    (load / "hdr").mkdir()
    seconds = max(len(v) for v in latencies_us.values())
    with open(load / "hdr" / "worker-0.hlog", "w") as f:
        log = IntervalLogWriter(f, start_time_s=1000.0)
        for t in range(seconds):
            for op, per_second in latencies_us.items():
                for v in per_second[t] if t < len(per_second) else []:
                    rec.record(op, started_ns=0, ended_ns=v * 1000, due_ns=0 if fixed_rate else None)
            log.write_interval(rec.take_interval(), begin_s=1000.0 + t, end_s=1001.0 + t)
    (load / "totals" / "worker-0.json").write_text(json.dumps({"worker": 0, "totals": rec.totals_json()}))
    ops = summarize(rec.totals, elapsed_seconds=float(seconds), fixed_rate=fixed_rate)
    (load / "summary.json").write_text(json.dumps({"operations": {op: s.to_json() for op, s in ops.items()},
                                                   "warmup_seconds": 0.0, "measured_seconds": float(seconds)}))
    return folder


def _seconds(level_us: float, *, seconds: int = 40, per_second: int = 20, rho: float = 0.0, sigma: float = 0.1,
             seed: int = 0) -> list[list[int]]:
    """Calls per second around ``level_us``; the level of each second drifts as AR(1) (``rho``)."""
    rng = np.random.default_rng(seed)
    drift, out = 0.0, []
    for _ in range(seconds):
        drift = rho * drift + np.sqrt(1 - rho ** 2) * rng.normal(0, sigma)
        out.append((level_us * np.exp(drift + rng.normal(0, 0.3, per_second))).astype(int).tolist())
    return out


def _notebook_run(folder: Path, samples_ms: dict[int, list[float]]) -> Path:
    """A calibration-run folder with one notebook samples table (``round``, ``in_size``, ``latency_ms``):
    one sample per size per round, as in_limit reads them."""
    nb = folder / "in_limit"
    nb.mkdir(parents=True)
    rows = ["round,in_size,latency_ms,ok"] + [f"{i},{k},{v},True" for k, vs in samples_ms.items()
                                              for i, v in enumerate(vs)]
    (nb / "samples.csv").write_text("\n".join(rows) + "\n")
    (folder / "calibration.json").write_text(json.dumps({"run_id": folder.name, "constants": {}}))
    return folder


def _ops(cmp) -> dict:
    return {r["operation"]: r for r in cmp.operations}


def test_a_shift_is_found_in_words_and_the_same_level_is_no_difference(tmp_path):
    a = _load_run(tmp_path / "a", {"send": _seconds(1000, seed=1), "history_latest": _seconds(800, seed=2)},
                  fixed_rate=True)
    b = _load_run(tmp_path / "b", {"send": _seconds(1300, seed=3), "history_latest": _seconds(800, seed=4)},
                  fixed_rate=True)
    cmp = compare_runs(a, b)
    send, history = _ops(cmp)["send"], _ops(cmp)["history_latest"]
    for kind in ("service", "corrected"):
        t = send["tests"][kind]
        assert t["significant"] and t["ratio_b_over_a"] == pytest.approx(1.3, rel=0.08), t
        assert t["verdict"].startswith("B slower by 3") and "p=" in t["verdict"]
        assert not history["tests"][kind]["significant"]
        assert history["tests"][kind]["verdict"].startswith("no difference found")
    assert send["count_a"] == send["count_b"] == 800 and send["rate_a"] == 20.0
    assert send["service"]["a"]["p50"] < send["service"]["b"]["p50"]
    text = to_text(cmp)
    assert "verdict: B differs in 2 of 4 tests" in text and "send corrected: B slower by 3" in text
    assert "latency from the due time" in text and "service time, ms:" in text and "achieved rate" in text
    assert "µs" not in text.split("calls and achieved rate")[1]  # one unit: ms
    assert "constants" not in text  # a load run has none: no header for them


def test_autocorrelated_runs_of_one_level_are_no_difference_where_raw_samples_differ(tmp_path):
    """A rank test on every call would call two identical runs different, because calls
    close in time share the machine's state. Two runs of one level whose per-second level
    drifts: every test says no difference, although Mann-Whitney on the raw calls rejects."""
    from scipy.stats import mannwhitneyu

    runs = [(_seconds(1000, rho=0.8, sigma=0.3, seed=s), _seconds(1000, rho=0.8, sigma=0.3, seed=s + 100))
            for s in range(5, 12)]
    raw_rejects, rejects = 0, 0
    for i, (xa, xb) in enumerate(runs):
        cmp = compare_runs(_load_run(tmp_path / f"a{i}", {"send": xa}), _load_run(tmp_path / f"b{i}", {"send": xb}))
        rejects += bool(_ops(cmp)["send"]["tests"]["service"]["significant"])
        raw_rejects += mannwhitneyu(np.concatenate(xa), np.concatenate(xb)).pvalue < 0.05
    assert rejects <= 1 and raw_rejects >= 5, (rejects, raw_rejects)


def test_a_run_compared_with_itself_is_a_warning(tmp_path):
    a = _load_run(tmp_path / "a", {"send": _seconds(1000)})
    cmp = compare_runs(a, a)
    assert cmp.comparable and [d["what"] for d in cmp.differences] == ["run"]
    assert "warning: A and B are the same run" in to_text(cmp) and "A and B are the same run" in to_html(cmp)
    assert _ops(cmp)["send"]["tests"]["service"]["p_value"] == pytest.approx(1.0)


def test_too_few_intervals_and_too_few_calls_are_said(tmp_path):
    a = _load_run(tmp_path / "a", {"send": _seconds(1000, seconds=10), "recall": _seconds(900, per_second=1)})
    b = _load_run(tmp_path / "b", {"send": _seconds(1000, seconds=10, seed=9), "recall": _seconds(900, per_second=1)})
    cmp = compare_runs(a, b)
    t = _ops(cmp)["send"]["tests"]["service"]
    assert t["p_value"] is None and t["verdict"] == "10 intervals: too few for a test (needs 20 per run)"
    text = to_text(cmp)
    assert "too few: n=200: too few for p99" in text  # 10 s x 20 calls of send: a p99 needs 1,000
    assert "p90 from 100 calls, p99 from 1,000 calls, p99.9 from 10,000 calls" in text
    assert "too few" in to_html(cmp)


def test_notebook_samples_are_tested_per_round_and_keep_the_one_percentile(tmp_path):
    """Per group: the nearest-rank p50/p99 of the samples (lab.measure), the p99's interval only
    when enough samples stand behind it, and the test on per-round medians."""
    from lab.measure import percentile

    rng = np.random.default_rng(2)
    xa = {k: rng.lognormal(np.log(2.0 * k), 0.2, 40).round(4).tolist() for k in (1, 10)}
    xb = {1: xa[1][::-1], 10: (np.asarray(xa[10]) * 3).round(4).tolist()}
    cmp = compare_runs(_notebook_run(tmp_path / "a", xa), _notebook_run(tmp_path / "b", xb))
    rows = {r["group"]: r for r in cmp.samples}
    assert set(rows) == {"in_size=1", "in_size=10"}
    for k, r in ((1, rows["in_size=1"]), (10, rows["in_size=10"])):
        assert r["p50_a"] == percentile(xa[k], 50) and r["p99_b"] == percentile(xb[k], 99)
        assert r["n_a"] == r["n_b"] == 40 and r["test"]["intervals_a"] == 40
        assert r["p99_ci_low_a"] is None  # 40 samples: too few for a p99, so no interval for it either
    assert rows["in_size=10"]["test"]["significant"] and not rows["in_size=1"]["test"]["significant"]
    assert rows["in_size=10"]["test"]["verdict"].startswith("B slower by 200% (3.0x)")
    assert "n=40: too few for p99" in to_text(cmp)


# ---- comparability, agreement, units, notebook-only folders --------------------------------------
def _load_meta(folder: Path, **meta) -> Path:
    """Add the run's conditions to load/summary.json as `lab load` writes them."""
    path = folder / "load" / "summary.json"
    data = json.loads(path.read_text())
    env = meta.pop("environment", {"server": "cassandra", "nodes": 1})
    data.update(meta, parameters={"environment": env})
    path.write_text(json.dumps(data))
    return folder


def test_runs_that_are_not_comparable_are_refused_unless_forced(tmp_path):
    from lab.errors import CalibrationError

    a = _load_meta(_load_run(tmp_path / "a", {"send": _seconds(700, seed=3)}),
                   mode="closed-loop", users=8, requested_rate=None, profile="chat")
    b = _load_meta(_load_run(tmp_path / "b", {"send": _seconds(3000, seed=4)}),
                   mode="fixed-rate", users=16, requested_rate=50.0, profile="chat")
    with pytest.raises(CalibrationError, match="not comparable .*load mode: closed-loop vs fixed-rate") as err:
        compare_runs(a, b)
    assert {d["what"] for d in err.value.facts["differences"]} >= {"load mode", "users", "rate"}
    cmp = compare_runs(a, b, force=True)
    assert not cmp.comparable and cmp.forced
    assert "NOT COMPARABLE (--force): load mode differs" in to_text(cmp)
    assert "(runs not comparable: --force)" in to_text(cmp) and "Not comparable (compared with --force)" in to_html(cmp)
    same = _load_meta(_load_run(tmp_path / "c", {"send": _seconds(700, seed=5)}),
                      mode="closed-loop", users=8, requested_rate=None, profile="chat")
    assert compare_runs(a, same).comparable


def test_runs_at_different_round_trips_are_refused_unless_forced(tmp_path):
    """A round trip added to every request (lab load --rtt) moves every latency by itself; a run
    that recorded none was direct."""
    from lab.errors import CalibrationError

    common = dict(mode="closed-loop", users=8, requested_rate=None, profile="chat")
    direct = _load_meta(_load_run(tmp_path / "a", {"send": _seconds(700, seed=3)}), **common)
    far = _load_meta(_load_run(tmp_path / "b", {"send": _seconds(700, seed=4)}), **common, rtt_us=2000)
    with pytest.raises(CalibrationError, match="round trip: 0 us \\(direct\\) vs 2000 us"):
        compare_runs(direct, far)
    assert compare_runs(direct, far, force=True).forced
    same = _load_meta(_load_run(tmp_path / "c", {"send": _seconds(700, seed=5)}), **common, rtt_us=2000)
    assert compare_runs(far, same).comparable
    zero = _load_meta(_load_run(tmp_path / "d", {"send": _seconds(700, seed=6)}), **common, rtt_us=0)
    assert compare_runs(direct, zero).comparable


def _calibration(folder: Path, *, mode: str, constants: dict, server: str = "cassandra",
                 params: dict | None = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "calibration.json").write_text(json.dumps({
        "run_id": folder.name, "mode": mode, "status": "ok", "started_at": folder.name,
        "environment": {"server": server, "nodes": 1, "parameters": {"notebooks": params or {}}},
        "constants": constants}))
    return folder


B_ROW = {"unit": "B", "current": 600, "rule": "interval", "notebook": "b_row"}


def test_constants_say_whether_the_runs_agree_with_units(tmp_path):
    a = _calibration(tmp_path / "20261201T000000Z-a", mode="full", constants={
        "b_row_bytes": {**B_ROW, "measured": 1235.0, "ci_low": 1215.0, "ci_high": 1255.0, "recommended": 1235},
        "batch_read_in_list_limit": {"unit": "elements", "current": 100, "measured": 100, "recommended": 100,
                                     "rule": "notebook", "notebook": "in_limit"},
        "history_max_empty_bucket_scan": {"unit": "buckets", "current": 8, "measured": 8, "recommended": 8,
                                          "rule": "notebook", "notebook": "empty_buckets"}})
    b = _calibration(tmp_path / "20261201T010000Z-b", mode="full", constants={
        "b_row_bytes": {**B_ROW, "measured": 1250.0, "ci_low": 1230.0, "ci_high": 1270.0, "recommended": 1250},
        "batch_read_in_list_limit": {"unit": "elements", "current": 100, "measured": 300, "recommended": 300,
                                     "rule": "notebook", "notebook": "in_limit", "inconclusive": True},
        "history_max_empty_bucket_scan": {"unit": "buckets", "current": 8, "measured": None, "recommended": 8,
                                          "notebook": None}})
    cmp = compare_runs(a, b)
    rows = {r["constant"]: r for r in cmp.constants}
    assert rows["b_row_bytes"]["agreement"] == "agree" and rows["b_row_bytes"]["delta"] == 15.0
    assert "B - A = +15 B (+1.2%)" in rows["b_row_bytes"]["agreement_detail"]
    assert rows["batch_read_in_list_limit"]["agreement"] == "inconclusive"
    assert rows["history_max_empty_bucket_scan"]["agreement"] == "not measured in B"
    assert not rows["history_max_empty_bucket_scan"]["differs"]
    text = to_text(cmp)
    assert "not measured" in text and "1,235 B" in text and "1,250 B" in text and "differs" not in text
    html = to_html(cmp)
    assert "+15 B" in html and "not measured in B" in html


def test_agreement_rules():
    from lab.calibration.agreement import agreement

    far = {**B_ROW, "measured": 1400.0, "ci_low": 1380.0, "ci_high": 1420.0}
    near = {**B_ROW, "measured": 1235.0, "ci_low": 1215.0, "ci_high": 1255.0}
    assert agreement(near, far)["status"] == "disagree"
    rec = {"unit": "elements", "rule": "notebook", "notebook": "in_limit"}
    x = {**rec, "measured": 50, "recommended": 50, "recommended_ci_low": 20, "recommended_ci_high": 100}
    y = {**rec, "measured": 100, "recommended": 100, "recommended_ci_low": 50, "recommended_ci_high": 200}
    assert agreement(x, y)["status"] == "agree" and "bootstrap interval" in agreement(x, y)["detail"]
    assert agreement({**x, "recommended_ci_high": 60}, y)["status"] == "disagree"
    # a run without an interval (an older run) against one with: its value inside the other's interval
    bare = {**rec, "measured": 0.44, "recommended": 0.44}
    with_ci = {**rec, "measured": 0.41, "recommended": 0.41, "recommended_ci_low": 0.39, "recommended_ci_high": 0.52}
    assert agreement(bare, with_ci)["status"] == "agree" and "A's 0.44 (no interval)" in agreement(bare, with_ci)["detail"]
    assert agreement(with_ci, bare)["status"] == "agree"
    assert agreement({**bare, "measured": 0.58, "recommended": 0.58}, with_ci)["status"] == "disagree"
    assert agreement(None, None)["status"] == "not measured"
    assert agreement({"notebook": "twcs_sstables"}, {"notebook": "twcs_sstables"})["status"] == "observed only"


def test_quick_against_full_warns_and_other_servers_refuse(tmp_path):
    from lab.errors import CalibrationError

    c = {"b_row_bytes": {**B_ROW, "measured": 1235.0, "ci_low": 1100.0, "ci_high": 1370.0}}
    a = _calibration(tmp_path / "a", mode="quick", constants=c, params={"b_row": {"rows": 2000, "b_row_values": "x"}})
    b = _calibration(tmp_path / "b", mode="full", constants=c, params={"b_row": {"rows": 10000, "b_row_values": "y"}})
    cmp = compare_runs(a, b)
    assert cmp.comparable and {d["what"] for d in cmp.differences} == {"calibration mode", "notebook parameters"}
    assert "warning: calibration mode differs: A quick vs B full" in to_text(cmp)
    s = _calibration(tmp_path / "s", mode="quick", constants=c, server="scylla")
    with pytest.raises(CalibrationError, match="server: cassandra vs scylla"):
        compare_runs(a, s)


def test_previous_run_is_the_latest_comparable_one(tmp_path):
    from lab.calibration.agreement import previous_run

    c = {}
    old = _calibration(tmp_path / "2026A", mode="full", constants=c)
    newer = _calibration(tmp_path / "2026B", mode="full", constants=c)
    _calibration(tmp_path / "2026C", mode="quick", constants=c)      # another mode
    _calibration(tmp_path / "2026D", mode="full", constants=c, server="scylla")  # another server
    me = tmp_path / "2026E"
    me.mkdir()
    cal = {"mode": "full", "started_at": "2026E", "environment": {"server": "cassandra", "nodes": 1}}
    assert previous_run(me, cal) == newer
    assert previous_run(newer, {**cal, "started_at": "2026B"}) == old
    assert previous_run(me, {**cal, "mode": "other"}) is None


def test_notebook_only_run_folders_from_jupyterlab_are_compared(tmp_path):
    for name, b_row in (("a", 1235.0), ("b", 1500.0)):
        nb = tmp_path / name / "b_row"
        nb.mkdir(parents=True)
        (nb / "values.json").write_text(json.dumps({"b_row_bytes": b_row, "b_row_ci_low_bytes": b_row - 10,
                                                    "b_row_ci_high_bytes": b_row + 10, "server": "cassandra"}))
    cmp = compare_runs(tmp_path / "a", tmp_path / "b")
    rows = {r["constant"]: r for r in cmp.constants}
    assert rows["b_row_bytes"]["measured_a"] == 1235.0 and rows["b_row_bytes"]["agreement"] == "disagree"
    assert cmp.a.calibration["notebook_only"] is True
    (tmp_path / "empty").mkdir()
    from lab.errors import CalibrationError

    with pytest.raises(CalibrationError, match="not a run folder"):
        compare_runs(tmp_path / "a", tmp_path / "empty")


def test_the_significance_level_is_the_callers_and_is_recorded(tmp_path):
    a = _load_run(tmp_path / "a", {"send": _seconds(1000, seed=1)}, fixed_rate=True)
    b = _load_run(tmp_path / "b", {"send": _seconds(1300, seed=3)}, fixed_rate=True)
    p = _ops(compare_runs(a, b))["send"]["tests"]["service"]["p_adjusted"]
    assert 0 < p < 0.05
    below, above = compare_runs(a, b, alpha=p / 2), compare_runs(a, b, alpha=min(0.5, p * 2))
    assert not _ops(below)["send"]["tests"]["service"]["significant"]
    assert _ops(above)["send"]["tests"]["service"]["significant"]
    assert f"alpha {p / 2:g}" in to_text(below)
    for bad in (0.0, 1.0, -0.1, 5, "0.01", float("nan")):
        with pytest.raises(ValidationError):
            compare_runs(a, b, alpha=bad)
