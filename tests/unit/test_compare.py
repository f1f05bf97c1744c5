"""`lab compare` tests load latencies from HDR histograms with Mann-Whitney U (no node)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from lab.calibration.run import CalibrationOptions, run_calibration

ROOT = Path(__file__).resolve().parents[2]
LAB = [sys.executable, "-m", "lab.cli"]
CHROMIUM = Path("/usr/bin/chromium")

# The shortest parameters each notebook accepts: this is a test of the pipeline, not a measurement.
TINY: dict[str, dict] = {
    "b_row": {"rows": 200, "repeats": 2, "partition_rows": 0, "compressions": ["lz4"], "show_progress": False},
    "in_limit": {"partition_rows": 120, "in_sizes": [1, 10, 100], "repeats": 4, "probe_sizes": [],
                 "show_progress": False},
    "empty_buckets": {"runs": [0, 9], "scan_limits": [8], "repeats": 2, "rows_oldest": 5, "hole_messages": 2000,
                      "show_progress": False},
    "twcs_sstables": {"record_windows_days": [1, 7], "dedup_windows_hours": [1, 6], "record_days": 3,
                      "dedup_hours": 3, "rows_per_interval": 2, "expire_days": 1, "expire_hours": 1,
                      "short_ttl_seconds": 5, "show_progress": False},
    "grouped_reads": {"dataset_messages": 300, "mix_sizes": [20], "group_backlog": 40, "dm_count": 3,
                      "dm_backlog": 2, "repeats": 2, "show_progress": False},
    "capacity": {"show_progress": False},
}


# The notebooks that feed appendix-B constants (b_row, in_limit, empty_buckets) plus capacity, which
# reads this run's b_row. twcs_sstables and grouped_reads only observe (tests/test_notebooks.py runs
# every notebook): leaving them out keeps this file near two minutes of the CI budget.
SUITE = ("b_row", "in_limit", "empty_buckets", "capacity")


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("results")


@pytest.fixture(scope="module")
def run(cluster_config, results):
    """One quick calibration (TINY parameters) of SUITE, with --propose."""
    return run_calibration(cluster_config, CalibrationOptions(
        quick=True, results=results, notebooks=SUITE, overrides={n: TINY[n] for n in SUITE}, propose=True,
        progress=False))


def _load_run(folder: Path, latencies_us: dict[str, list[int]]) -> Path:
    """A load-run folder as ``lab load`` leaves it: per-worker totals (HDR histograms) + summary.json."""
    from lab.measure.hdr import LatencyRecorder, summarize

    rec = LatencyRecorder(fixed_rate=False)
    for op, values in latencies_us.items():
        for v in values:
            rec.record(op, started_ns=0, ended_ns=v * 1000)
    load = folder / "load"
    (load / "totals").mkdir(parents=True)
    (load / "totals" / "worker-0.json").write_text(json.dumps({"worker": 0, "totals": rec.totals_json()}))
    (load / "summary.json").write_text(json.dumps(
        {"operations": summarize(rec.totals, elapsed_seconds=10.0, fixed_rate=False)}))
    return folder


def test_compare_load_operations_tests_the_latency_samples(tmp_path):
    """The statistics of ``lab compare`` on load results (no cluster needed): a real shift is
    significant after Holm's correction, the same distribution is not."""
    import numpy as np

    from lab.results.compare import compare_runs, to_text

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
    assert not ops["history_latest"]["significant"] and ops["history_latest"]["p_a_gt_b"] == pytest.approx(0.5)
    assert "send" in to_text(cmp) and "SIGNIFICANT" in to_text(cmp)
