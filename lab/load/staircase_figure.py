"""A staircase's latency against its rate: ``load/staircase.png`` beside ``summary.json``.

One point per measured step at its *achieved* rate (the requested rate is written beside
it): corrected p50 and p99 (from the due time) and service p99, in milliseconds on linear
axes. A loader-bound step is drawn hollow and labelled: its latencies are the load
generator's, and the staircase stopped there (``lab.load.verdict``).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

FIGURE_FILE = "staircase.png"
_SERIES = (("corrected_us", "p50", "corrected p50", "o", "-", "tab:blue"),
           ("corrected_us", "p99", "corrected p99", "s", "-", "tab:red"),
           ("service_us", "p99", "service p99", "^", "--", "tab:green"))


def _points(steps: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [s for s in steps if not s.get("warmup") and s.get("achieved_rate") is not None]


def latency_vs_rate(steps: Sequence[Mapping[str, Any]], *, title: str = "") -> Any:
    """The figure of a staircase's steps (``summary.json``'s ``steps``: dicts as written)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    pts = _points(steps)
    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    bound = [(s.get("verdict") or {}).get("verdict") == "loader-bound" for s in pts]
    for key, pct, label, marker, style, colour in _SERIES:
        xs = [float(s["achieved_rate"]) for s in pts]
        ys = [(s.get(key) or {}).get(pct) for s in pts]
        ys = [None if y is None else float(y) / 1000.0 for y in ys]
        ax.plot(xs, [y if y is not None else float("nan") for y in ys], style, color="0.6", linewidth=1)
        for x, y, lb in zip(xs, ys, bound):
            if y is not None:
                ax.plot([x], [y], marker=marker, linestyle="none", markersize=7, color=colour,
                        markerfacecolor="none" if lb else colour)
        ax.plot([], [], marker=marker, linestyle=style, label=label, color=colour)
    for s, lb in zip(pts, bound):
        y = ((s.get("corrected_us") or {}).get("p99") or 0) / 1000.0
        note = f"{float(s['requested_rate']):,.0f}/s requested"
        if lb:
            note += "\nloader-bound"
        ax.annotate(note, (float(s["achieved_rate"]), y), textcoords="offset points", xytext=(4, 6), fontsize=8)
    ax.set_xlabel("achieved rate (calls/s)")
    ax.set_ylabel("latency (ms)")
    ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title(title or "staircase: latency vs rate (hollow: loader-bound step)", fontsize=10)
    fig.tight_layout()
    return fig


def write_figure(steps: Sequence[Mapping[str, Any]], out_dir: Path | str, *, title: str = "") -> Path | None:
    """Write ``staircase.png`` into ``out_dir``; None when no step was measured."""
    if not _points(steps):
        return None
    import matplotlib.pyplot as plt

    fig = latency_vs_rate(steps, title=title)
    path = Path(out_dir) / FIGURE_FILE
    fig.savefig(path)
    plt.close(fig)
    return path
