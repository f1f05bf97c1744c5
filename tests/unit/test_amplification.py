"""Space amplification's arithmetic (lab.calibration.capacity_model.amplification): compressed time, the steady
interval, the per-replicate figures, stationarity and the disk reader's file sums."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from lab.calibration.capacity_model.amplification import (DAY_S, TimeScale, arrivals, halves_of, per_replicate, retention_mix,
                                           scenario_profile, steady_rows, steady_start_day, summarize_tables)
from lab.constants import load_constants
from lab.errors import ConfigError
from lab.cluster.admin.disk import directory_bytes, disk_bytes


def test_compressed_time_scales_every_wall_clock_setting():
    scale = TimeScale(seconds_per_day=5.0)
    assert scale.wall(DAY_S) == 5 and scale.wall(30 * DAY_S) == 150
    assert scale.wall(600) == 1            # the expired-SSTable check: never below 1 s
    assert scale.wall(864_000) == 50       # gc_grace of the LCS tables (10 days)
    assert scale.wall(0) == 0              # no TTL stays no TTL
    assert scale.wall(DAY_S + 1) == 6      # rounded up: never expires early


def test_remaining_ttl_counts_from_the_simulated_arrival():
    scale = TimeScale(seconds_per_day=4.0)
    # arrived at day 2 with a 1-day TTL, written at day 2.5: half a day left = 2 wall seconds
    assert scale.remaining_ttl(arrival_s=2 * DAY_S, ttl_s=DAY_S, now_s=2.5 * DAY_S) == 2
    assert scale.remaining_ttl(arrival_s=2 * DAY_S, ttl_s=0, now_s=40 * DAY_S) == 0     # never expires
    assert scale.remaining_ttl(arrival_s=2 * DAY_S, ttl_s=DAY_S, now_s=3 * DAY_S) is None  # already expired
    assert scale.remaining_ttl(arrival_s=0, ttl_s=30 * DAY_S, now_s=0) == 120


def test_steady_state_starts_when_a_whole_window_of_expiring_rows_can_be_gone():
    # chat_mix under the design: default 30 d is the longest finite TTL, 7-day windows, gc_grace 1 day
    assert steady_start_day(max_ttl_days=30, window_days=7, gc_grace_days=1, flush_every_days=1) == 39
    assert steady_start_day(max_ttl_days=1, window_days=7, gc_grace_days=1, flush_every_days=2) == 11


def _series(amp_by_day, *, replicates=2, nodes=("n1",), live=1000, table="message_record"):
    rows = []
    for r in range(replicates):
        for step, (day, amp) in enumerate(amp_by_day, start=1):
            for node in nodes:
                disk = int(live * (amp + 0.01 * r))
                rows.append({"scenario": "profile", "batch": 0, "replicate": r, "step": step, "sim_day": float(day), "table": table,
                             "node": node, "disk_bytes": disk, "live_bytes": live, "peak_bytes": disk + 100,
                             "sstables": 3})
    return pd.DataFrame(rows)


def test_per_replicate_averages_the_steady_steps_only_and_sums_nodes():
    s = _series([(10, 5.0), (40, 1.2), (45, 1.3), (50, 1.1)], nodes=("n1", "n2"), replicates=5)
    reps = per_replicate(s, start_day=39)
    assert list(reps.replicate) == [0, 1, 2, 3, 4] and (reps.steps == 3).all()
    assert reps.iloc[0].steady == pytest.approx(1.2, abs=1e-3)  # (1.2 + 1.3 + 1.1) / 3; day 10 left out
    assert reps.iloc[0].peak == pytest.approx(1.3 + 0.1, abs=1e-3)  # the largest sampled bytes / live
    assert reps.iloc[1].steady == pytest.approx(1.21, abs=1e-3)
    summary = summarize_tables(reps, s)
    row = summary.set_index("table").loc["message_record"]
    assert row.steady_ci_low < row.steady < row.steady_ci_high and row.replicates == 5
    assert row.final_sstables_per_node == 3


def test_fewer_than_five_replicates_give_a_mean_and_no_interval():
    s = _series([(40, 1.2), (45, 1.3)], replicates=2)
    row = summarize_tables(per_replicate(s, start_day=39), s).iloc[0]
    assert row.steady == pytest.approx(1.255, abs=1e-3)
    assert math.isnan(row.steady_ci_low) and math.isnan(row.steady_ci_high) and math.isnan(row.peak_ci_low)


def test_a_period_shorter_than_the_steady_start_uses_its_second_half():
    s = _series([(2, 1.0), (4, 1.1), (6, 1.3), (8, 1.5)])
    assert sorted(steady_rows(s, start_day=39).sim_day.unique()) == [4.0, 6.0, 8.0]


def test_halves_say_whether_the_factor_is_stationary():
    flat = halves_of(_series([(40, 1.3), (42, 1.31), (44, 1.29), (46, 1.3)]), 39, tolerance=0.05)
    assert flat is not None and flat.agree
    growing = halves_of(_series([(40, 1.3), (42, 1.4), (44, 1.6), (46, 1.8)]), 39, tolerance=0.05)
    assert growing is not None and not growing.agree and growing.second > growing.first
    assert halves_of(_series([(40, 1.3)]), 39, tolerance=0.05) is None  # one day: no halves


def test_directory_bytes_counts_every_component_but_not_snapshots(tmp_path):
    table = tmp_path / "message_record-abc"
    table.mkdir()
    (table / "nb-1-big-Data.db").write_bytes(b"x" * 1000)
    (table / "nb-1-big-Index.db").write_bytes(b"x" * 200)
    (table / "nb-1-big-TOC.txt").write_bytes(b"x" * 10)
    (table / "snapshots").mkdir()
    (table / "snapshots" / "nb-0-big-Data.db").write_bytes(b"x" * 5000)
    assert directory_bytes([table]) == 1210
    assert directory_bytes([tmp_path / "gone"]) == 0  # a dropped table's folder


class _Admin:
    def __init__(self, folders):
        self.folders = folders

    def table_directories(self, keyspace, table):
        return self.folders


def test_disk_bytes_reads_the_files_of_each_node(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "nb-1-big-Data.db").write_bytes(b"x" * 300)
    (b / "nb-1-big-Data.db").write_bytes(b"x" * 500)
    read = disk_bytes(_Admin({"127.0.0.1": [a], "127.0.0.2": [b]}), "ks", "t")
    assert read.source == "files" and dict(read.per_node) == {"127.0.0.1": 300, "127.0.0.2": 500} and read.total == 800


def test_the_expiring_only_scenario_drops_the_classes_that_never_expire():
    c = load_constants()
    mix = retention_mix("chat_mix", None, "profile", c)
    assert mix["default"]["ttl_days"] == 30 and mix["ephemeral_24h"]["ttl_days"] == 1
    assert mix["compliance_hold"]["ttl_days"] == 0 and mix["tenant_custom"]["ttl_days"] == 0  # fails closed: kept
    assert sum(m["share"] for m in mix.values()) == pytest.approx(1.0)
    only = retention_mix("chat_mix", None, "expiring_only", c)
    assert set(only) == {"default", "ephemeral_24h"} and sum(m["share"] for m in only.values()) == pytest.approx(1.0)
    assert only["ephemeral_24h"]["share"] == pytest.approx(0.08 / 0.93)
    assert set(scenario_profile("text_only", {"ephemeral_24h": 1.0}, "profile", c).retention) == {"ephemeral_24h"}
    with pytest.raises(ConfigError):  # nothing left that expires
        scenario_profile("text_only", {"compliance_hold": 1.0}, "expiring_only", c)


def test_arrivals_spread_the_rows_over_the_period_in_time_order():
    messages = pd.DataFrame({"created_at_ms": [50, 10, 30, 10], "row": [3, 1, 2, 0]})
    out = arrivals(messages, days=2)
    assert list(out.row) == [0, 1, 2, 3]
    assert out.arrival_s.iloc[0] == 0 and out.arrival_s.iloc[-1] == 2 * DAY_S - 1
    assert out.arrival_s.is_monotonic_increasing


def test_the_conclusion_counts_replicates_per_scenario_not_scenarios_x_replicates():
    # 5 replicates of each of two retention mixes (one batch): 5 replicates, not 10
    from lab.calibration.experiments import space_amp
    from lab.calibration.precision import Precision

    s = pd.concat([_series([(40, 1.2), (45, 1.3)], replicates=5).assign(scenario=sc)
                   for sc in ("profile", "expiring_only")], ignore_index=True)
    reps = per_replicate(s, start_day=39)
    mix = {"default": {"share": 1.0, "ttl_days": 30.0}}
    design = {"design_lsm_space_amp": 1.2, "window_days": 7, "gc_grace_seconds": 86_400, "retention_mix": mix,
              "retention_mixes": {"profile": mix, "expiring_only": mix}, "never_expiring_share": 0.0,
              "capacity_sstables_per_node": 6, "nodes": 1, "disk_source": "files"}
    precision = Precision(quantity="lsm_space_amp", target_rel_half_width=0.05, achieved_rel_half_width=0.03,
                          status="reached", steps=1, seconds=300.0, budget_seconds=900, step_unit="batch",
                          samples_per_step=5, sample_unit="replicate")
    result = space_amp.Result(params=space_amp.Params(), series=s, summary=summarize_tables(reps, s), per_replicate=reps,
                              precision=precision, halves={sc: halves_of(s[s.scenario == sc], 39, tolerance=0.5)
                                                           for sc in ("profile", "expiring_only")},
                              design=design, steady_start_day=39, days=46, late_steps=0, head=None)
    assert result.values()["replicates"] == 5
    text = space_amp.conclusion(result)
    assert "5 replicates of each of the 2 retention mixes (profile, expiring_only)" in text
    assert "10 replicate" not in text and "after 1 batch" in text and "round" not in text
