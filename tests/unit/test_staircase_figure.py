"""The staircase's latency-vs-rate figure (lab.load.staircase_figure)."""
from __future__ import annotations

from lab.load.staircase_figure import FIGURE_FILE, latency_vs_rate, write_figure


def _step(requested: float, achieved: float, p50_ms: float, p99_ms: float, *, bound: bool = False,
          warmup: bool = False) -> dict:
    return {"requested_rate": requested, "achieved_rate": achieved, "warmup": warmup,
            "corrected_us": {"p50": p50_ms * 1000, "p99": p99_ms * 1000},
            "service_us": {"p50": p50_ms * 800, "p99": p99_ms * 800},
            "verdict": {"verdict": "loader-bound" if bound else "valid"}}


STEPS = [_step(50, 50, 5, 9, warmup=True), _step(50, 49.8, 5, 10), _step(75, 74.5, 6, 14),
         _step(90, 88, 9, 40), _step(105, 91, 300, 2200, bound=True)]


def test_one_point_per_measured_step_at_its_achieved_rate():
    fig = latency_vs_rate(STEPS)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "achieved rate (calls/s)" and ax.get_ylabel() == "latency (ms)"
    assert ax.get_yscale() == "linear"
    xs = sorted({round(x, 1) for line in ax.lines for x in line.get_xdata()})
    assert xs == [49.8, 74.5, 88.0, 91.0]  # not the warmup
    hollow = [line for line in ax.lines if line.get_markerfacecolor() == "none"]
    assert {float(line.get_xdata()[0]) for line in hollow} == {91.0}
    notes = [t.get_text() for t in ax.texts]
    assert any("105/s requested" in n and "loader-bound" in n for n in notes)
    assert {t.get_text() for t in ax.get_legend().get_texts()} == {"corrected p50", "corrected p99", "service p99"}


def test_it_writes_the_png_beside_the_summary(tmp_path):
    path = write_figure(STEPS, tmp_path)
    assert path == tmp_path / FIGURE_FILE and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert write_figure([STEPS[0]], tmp_path / "none") is None
