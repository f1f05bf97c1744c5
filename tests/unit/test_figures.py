"""The space_amp and model_check figures draw from their result tables (no cluster)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402

from lab.calibration import figures  # noqa: E402


def _series():
    rows = []
    for scenario in ("profile", "expiring_only"):
        for r in range(2):
            for step, day in enumerate((5.0, 20.0, 40.0, 45.0), start=1):
                for table in ("message_record", "conversation_head"):
                    rows.append({"scenario": scenario, "batch": 0, "replicate": r, "step": step, "sim_day": day,
                                 "table": table, "node": "n1", "disk_bytes": 1000 + 10 * step + r,
                                 "live_bytes": 1000, "peak_bytes": 1200 + step})
    return pd.DataFrame(rows)


def test_space_amp_draws_the_period_and_the_tables(tmp_path):
    from lab.calibration.amplification import per_replicate, summarize_tables

    series = _series()
    series["sstables"] = 2
    summary = summarize_tables(per_replicate(series, 39), series)
    fig = figures.space_amp(series, summary, steady_start_day=39, design=1.2)
    left, right = fig.axes
    assert len([ln for ln in left.get_lines() if ln.get_label().endswith("disk / live")]) == 2  # one per scenario
    assert len(right.patches) == 2 * len(summary)  # steady and peak bars
    fig.savefig(tmp_path / "a.png")
    assert (tmp_path / "a.png").stat().st_size > 5_000
    assert figures.space_amp(pd.DataFrame(), summary, steady_start_day=39) is None


def test_model_check_draws_each_quantity_against_its_target(tmp_path):
    checks = pd.DataFrame([
        {"quantity": "disk", "scope": "n1", "table": "message_record", "error": 0.01, "error_ci_low": -0.01,
         "error_ci_high": 0.03, "target": 0.05, "met": True},
        {"quantity": "disk", "scope": "cluster", "table": None, "error": 0.02, "error_ci_low": None,
         "error_ci_high": None, "target": 0.05, "met": True},
        {"quantity": "cpu", "scope": "cluster", "table": None, "error": -0.3, "error_ci_low": -0.5,
         "error_ci_high": -0.1, "target": 0.2, "met": False},
        {"quantity": "sstables", "scope": "n1", "table": "message_record", "error": 0.0, "error_ci_low": 0.0,
         "error_ci_high": 0.0, "target": 0.0, "met": True}])
    fig = figures.model_check(checks)
    assert [ax.get_title() for ax in fig.axes] == ["disk", "cpu", "sstables"]
    fig.savefig(tmp_path / "m.png")
    assert (tmp_path / "m.png").stat().st_size > 5_000
    assert figures.model_check(pd.DataFrame()) is None
