"""Run folders under results/: never shared, never overwritten."""
from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from lab.calibration.run import CalibrationOptions, run_calibration
from lab.results.runs import new_run_dir

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
def run(cluster_config, results):
    """One quick calibration (TINY parameters) of SUITE, with --propose."""
    return run_calibration(cluster_config, CalibrationOptions(
        quick=True, results=results, notebooks=SUITE, overrides={n: TINY[n] for n in SUITE}, propose=True,
        progress=False))


def test_runs_never_share_a_folder(tmp_path):
    with ThreadPoolExecutor(8) as pool:
        dirs = list(pool.map(lambda _: new_run_dir(tmp_path), range(64)))
    assert len(set(dirs)) == 64 and all(d.is_dir() for d in dirs)
