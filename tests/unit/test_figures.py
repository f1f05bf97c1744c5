"""lab.calibration.figures: each notebook figure from small hand-made tables (no cluster).

Checked: the panels, their axis labels and scales, how many series each draws, the reference
lines (design, recommended, budget) with their labels, and None when there is nothing to draw;
the capacity figure's bars never overlap and every b_row source has its line; axes are linear
unless a log axis says so in its label; a constant's history across runs."""
from __future__ import annotations

import ast
import itertools
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from lab.calibration import figures  # noqa: E402
from lab.calibration.experiments import capacity  # noqa: E402
from lab.constants import Constants  # noqa: E402

FIGURES_SOURCE = Path(figures.__file__).read_text()


@pytest.fixture
def sized():
    """The capacity experiment's own tables for three b_row sources at the default tiers."""
    constants = Constants.appendix_b()
    r = capacity.run(capacity.Params(b_row_bytes=1250.0), constants=constants)
    mine = r.sizing[r.sizing.source == "measured"].assign(source="my_mix", resident_tb=lambda d: d.resident_tb * 1.8,
                                                           nodes_needed=lambda d: d.nodes_needed * 2)
    return r, pd.concat([r.sizing, mine], ignore_index=True)


def test_capacity_bars_of_tiers_and_sources_never_overlap(sized):
    r, sizing = sized
    mix = {"name": "example_mix", "mean": 2300.0, "ci_low": 2200.0, "ci_high": 2400.0}
    fig = figures.capacity_sizing(sizing, r.sensitivity, design_b_row_bytes=600, measured_b_row_bytes=1250.0,
                                  my_mix=mix)
    panels = [ax for ax in fig.axes if ax.get_title().endswith("messages/day")]
    assert len(panels) == 3  # a panel per tier: each readable on its own linear axis
    for ax in panels:
        bars = [(p.get_x(), p.get_x() + p.get_width()) for p in ax.patches if p.get_width() > 0]
        assert len(bars) == 3
        for (_, a1), (b0, _) in itertools.combinations(sorted(bars), 2):
            assert a1 <= b0, "bars overlap"
        assert ax.get_yscale() == "linear"
        labels = [t.get_text() for t in ax.texts]
        assert any("nodes" in t and "TB" in t for t in labels)
    sens = fig.axes[-1]
    legend = [t.get_text() for t in sens.get_legend().get_texts()]
    assert any(t.startswith("design 600 B") for t in legend) and any(t.startswith("measured 1,250 B") for t in legend)
    assert any("example_mix 2,300 B (95% CI 2,200-2,400)" in t for t in legend)
    assert sens.get_xlim()[1] >= 2400  # your mix is on the axis


def test_axes_are_linear_unless_a_log_axis_says_so():
    """No figure sets a log scale except through log_axis, whose label says "log scale"."""
    tree = ast.parse(FIGURES_SOURCE)
    direct = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
              and n.func.attr in ("set_xscale", "set_yscale", "loglog", "semilogx", "semilogy")]
    assert direct == [], f"log scale set directly at lines {direct}: use figures.log_axis"
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    figures.log_axis(ax, "y", "CPU ms per operation")
    assert ax.get_yscale() == "log" and ax.get_ylabel() == "CPU ms per operation (log scale)"
    plt.close(fig)


def test_constant_history_draws_each_run_with_its_interval():
    from lab.comparison.catalog import HistoryPoint, MeasuredConstant

    points = [HistoryPoint(run_id=f"r{i}", started=f"2026-12-0{i + 1}T00:00:00", mode=mode, server="cassandra",
                           value=MeasuredConstant(measured=v, unit="B", confidence=conf, ci_low=v - 20, ci_high=v + 20))
              for i, (v, mode, conf) in enumerate([(1230, "quick", "low"), (1245, "full", "high"), (1300, "full", "medium")])]
    fig = figures.constant_history(points, "b_row_bytes", current=600)
    ax = fig.axes[0]
    assert ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0
    assert [t.get_text().split("\n")[0] for t in ax.get_xticklabels()] == ["r0", "r1", "r2"]
    assert ax.get_ylabel() == "b_row_bytes (B)"
    assert any("appendix B: 600" in t.get_text() for t in ax.get_legend().get_texts())
    assert figures.constant_history([], "b_row_bytes") is None


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _legend(ax) -> list[str]:
    legend = ax.get_legend()
    return [t.get_text() for t in legend.get_texts()] if legend else []


def _bars(ax) -> list:
    """The bar groups of an axes (error bars are containers too, of another kind)."""
    from matplotlib.container import BarContainer

    return [c for c in ax.containers if isinstance(c, BarContainer)]


def _bar_groups(ax) -> int:
    return len(_bars(ax))


def test_b_row_by_table():
    summary = pd.DataFrame({"table": ["message_record", "message_index"] * 2, "compression": ["lz4"] * 2 + ["none"] * 2,
                            "b_row_mean_bytes": [300.0, 80.0, 700.0, 120.0], "b_row_ci_low_bytes": [290.0, 75, 680, 110],
                            "b_row_ci_high_bytes": [310.0, 85, 720, 130]})
    per_repeat = pd.DataFrame({"table": ["message_record"] * 3, "compression": ["lz4"] * 3, "b_row_bytes": [295, 300, 305]})
    partition = pd.DataFrame({"compression": ["lz4", "none"], "bytes_at_width": [1.2e6, 2.9e6],
                              "design_bytes_at_width": [4096 * 600] * 2})
    fig = figures.b_row_by_table(summary, per_repeat, partition, compressions=("lz4", "none"), design_b_row_bytes=600)
    left, right = fig.axes
    assert _bar_groups(left) == 2  # one bar group per compression
    assert [t.get_text() for t in left.get_xticklabels()] == ["message_record", "message_index"]
    from matplotlib.collections import PathCollection

    dots = [c for c in left.collections if isinstance(c, PathCollection) and len(c.get_offsets())]
    assert len(dots) == 1 and len(dots[0].get_offsets()) == 3  # a dot per repeat (message_record, lz4)
    assert _legend(left) == ["design b_row 600 B", "compression: lz4", "compression: none"]
    assert left.get_ylabel().startswith("live disk bytes per row")
    assert right.get_ylabel() == "partition size at 4096 rows (MB)"
    assert [round(p.get_height(), 2) for p in _bars(right)[0]] == [1.2, 2.9]
    assert figures.b_row_by_table(summary.iloc[:0], per_repeat, partition, compressions=("lz4",),
                                  design_b_row_bytes=600) is None
    no_partition = figures.b_row_by_table(summary, per_repeat, partition.iloc[:0], compressions=("lz4", "none"),
                                          design_b_row_bytes=600)
    assert not no_partition.axes[1].axison


def test_b_row_mixes_with_and_without_a_model():
    by_mix = pd.DataFrame({"mix": ["text_only", "media_heavy", "chat_mix"], "fitted": [True, True, False],
                           "b_row_mean_bytes": [200.0, 2500.0, 600.0], "b_row_ci_low_bytes": [190.0, 2400, 580],
                           "b_row_ci_high_bytes": [210.0, 2600, 620], "payload_bytes": [100.0, 50, 80],
                           "media_metadata_bytes": [0.0, 40, 10], "thumbnail_bytes": [0.0, 2000, 300]})

    class Model:
        def predict(self, x):
            return {"mean": 150 + x["payload_bytes"] + x["media_metadata_bytes"] + x["thumbnail_bytes"]}

    fig = figures.b_row_mixes(by_mix, Model())
    left, right = fig.axes
    assert left.get_yscale() == "log" and _bar_groups(left) == 1
    assert [t.get_text() for t in left.get_xticklabels()][-1] == "chat_mix\n(held out)"
    assert sorted(_legend(right)) == ["fitted mixes", "held-out profile", "predicted = measured"]
    assert len(right.collections) == 2 and right.get_xscale() == right.get_yscale() == "log"
    assert not figures.b_row_mixes(by_mix, None).axes[1].axison
    assert figures.b_row_mixes(by_mix.iloc[:0], None) is None


def test_empty_bucket_pages():
    summary = pd.DataFrame({"scan_limit": [8, 8, 8, 16, 16, 16], "run": [0, 8, 12] * 2, "requests": [2, 10, 10, 2, 10, 14],
                            "p50_ms": [1.0, 3.0, 3.1, 1.0, 3.0, 4.0],
                            "stopped_on_empty": [False, False, True, False, False, False]})
    holes = pd.DataFrame({"empty_buckets": [0, 0, 1, 2, 5]})
    fig = figures.empty_bucket_pages(summary, holes, design_scan_limit=8, required=3)
    requests, latency, hist = fig.axes
    assert len(requests.lines) == 2 and len(latency.lines) == 2  # one line per scan limit
    assert len(requests.collections[0].get_offsets()) == 1  # one stopped page of limit 8
    assert _legend(requests) == ["max scan 8", "max scan 16"]
    assert _legend(hist) == ["design 8", "workload needs 3"] and hist.get_yscale() == "log"
    assert hist.get_ylabel() == "holes (count) (log scale)"
    assert sum(p.get_height() for p in hist.patches) == 5
    assert figures.empty_bucket_pages(summary.iloc[:0], holes, design_scan_limit=8, required=3) is None


def test_grouped_vs_naive():
    summary = pd.DataFrame({"shape": ["s1_group_500", "s1_group_500", "s1_dms_20x5", "s1_dms_20x5"],
                            "method": ["grouped", "naive"] * 2, "record_reads": [1, 500, 20, 100],
                            "us_per_entry": [10.0, 90.0, 30.0, 95.0]})
    fig = figures.grouped_vs_naive(summary)
    requests, latency = fig.axes
    assert _bar_groups(requests) == _bar_groups(latency) == 2
    assert [p.get_height() for p in _bars(requests)[1]] == [500, 100]  # naive, per shape in order
    assert _legend(requests) == ["grouped", "naive"] and requests.get_yscale() == "log"
    assert latency.get_ylabel() == "p50 latency per joined entry (µs) (log scale)"


def test_in_list_latency():
    per_size = pd.DataFrame({"in_size": [1, 10, 100, 1000], "ok": [True, True, True, False],
                             "p50_ms": [1.0, 1.5, 4.0, None], "p99_ms": [3.0, 4.0, 20.0, None],
                             "per_row_us": [1000.0, 150.0, 40.0, None]})
    fig = figures.in_list_latency(per_size, p99_budget_ms=50, design_in_limit=100, recommended=10)
    lat, cost = fig.axes
    assert [len(line.get_xdata()) for line in lat.lines[:2]] == [3, 3]  # the refused size is not drawn
    assert _legend(lat) == ["p50", "p99", "p99 budget 50 ms", "design limit 100", "recommended 10"]
    assert _legend(cost) == ["mean latency / rows", "design limit 100", "recommended 10"]
    assert cost.get_xscale() == cost.get_yscale() == "log" and cost.get_xlabel().endswith("(log scale)")
    fig = figures.in_list_latency(per_size, p99_budget_ms=50, design_in_limit=100, recommended=None)
    assert "recommended 10" not in _legend(fig.axes[0])
    assert figures.in_list_latency(per_size[~per_size.ok], p99_budget_ms=50, design_in_limit=100,
                                   recommended=None) is None


def test_twcs_sstable_counts():
    rows = []
    for family, unit, tables in (("message_record", "Days", ("message_record_w1", "message_record_w7")),
                                 ("client_dedup", "hours", ("client_dedup_w1",))):
        for table in tables:
            for step in range(1, 4):
                rows.append({"family": family, "unit": unit, "table": table, "simulated_time_s":
                             step * (86400 if unit == "Days" else 3600), "measured": step, "predicted": step})
    final = pd.DataFrame({"table": ["message_record_w1", "message_record_w7", "client_dedup_w1"],
                          "measured_after_expiry": [1, 2, 0]})
    fig = figures.twcs_sstable_counts(pd.DataFrame(rows), final)
    records, dedup = fig.axes
    assert records.get_title() == "message_record" and records.get_xlabel() == "simulated time (days)"
    assert dedup.get_xlabel() == "simulated time (hours)"
    assert len(records.lines) == 4 and len(dedup.lines) == 2  # predicted + measured per table
    assert len(records.collections) == 2  # after expiry, per table
    assert _legend(dedup) == ["client_dedup_w1 predicted", "client_dedup_w1 measured", "client_dedup_w1 after expiry"]
    assert list(records.lines[0].get_xdata()) == [1, 2, 3]


def test_cpu_per_op():
    summary = pd.DataFrame({"op": ["send", "history_latest"], "rate_requested": [60.0, 100.0],
                            "server_ms_per_op": [2.0, 0.5], "server_ms_per_op_ci_low": [1.5, None],
                            "server_ms_per_op_ci_high": [2.5, None], "loadgen_ms_per_op": [1.0, 0.3],
                            "loadgen_ms_per_op_ci_low": [0.9, 0.2], "loadgen_ms_per_op_ci_high": [1.1, 0.4]})
    ax, = figures.cpu_per_op(summary).axes
    assert _bar_groups(ax) == 2 and _legend(ax) == ["server (net of idle)", "load generator"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["send\n60/s", "history_latest\n100/s"]
    assert ax.get_yscale() == "log"
    assert figures.cpu_per_op(summary.iloc[:0]) is None


def test_notebooks_plot_through_these_functions_only():
    """No inline matplotlib in a notebook: a plot worth showing is worth a tested function here."""
    import json
    from pathlib import Path

    inline = []
    for path in sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb")):
        for i, cell in enumerate(json.loads(path.read_text())["cells"]):
            source = "".join(cell["source"])
            if cell["cell_type"] == "code" and any(s in source for s in ("matplotlib", "plt.", "subplots(", "axes[")):
                inline.append(f"{path.name} cell {i}")
    assert inline == []


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
    from lab.calibration.capacity_model.amplification import per_replicate, summarize_tables

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


def test_cpu_curve_draws_the_carried_points_hollows_the_rest_and_marks_the_prices():
    from lab.calibration.capacity_model.curve_pricing import CpuCurve
    from tests.unit.test_curve_pricing import CURVE

    points = pd.DataFrame([p.to_json() for p in CURVE.points])
    fig = figures.cpu_curve(points, [("20M/day", 100.0, 4.0)])
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log" and "log" in ax.get_ylabel()
    labels = [t.get_text() for t in ax.texts]
    assert "loader-bound" in labels and "20M/day" in labels  # the unused point named, the priced point marked
    assert "node cores" in fig.axes[1].get_ylabel()
    assert figures.cpu_curve(pd.DataFrame()) is None
    assert figures.cpu_curve(pd.DataFrame([p.to_json() for p in CpuCurve(points=(), node_cores=2).points])) is None
    plt.close(fig)
