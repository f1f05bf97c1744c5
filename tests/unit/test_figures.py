"""The calibration figures (lab.calibration.figures), drawn from small tables (no node): the
capacity figure's bars never overlap and every b_row source has its line; axes are linear unless
a log axis says so in its label; a constant's history across runs."""
from __future__ import annotations

import ast
import itertools
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

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
    from lab.calibration.catalog import HistoryPoint, MeasuredConstant

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
