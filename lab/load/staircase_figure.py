"""Latency against rate: a staircase's ``load/staircase.png`` and a knee search's ``knee.png``.

More: docs/load-internals.md.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lab.load.knee_search import MEETS, MISSES, Knee

FIGURE_FILE = "staircase.png"
KNEE_FIGURE_FILE = "knee.png"
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
    return _save(latency_vs_rate(steps, title=title), Path(out_dir) / FIGURE_FILE)


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.savefig(path)
    plt.close(fig)
    return path


def knee_figure(knee: Knee, *, title: str = "") -> Any:
    """The target's percentile (corrected) of each step against its achieved rate, the target as a
    line, the knee marked; a step that did not meet it for want of calls or a valid verdict is hollow."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    ax.axhline(knee.slo.limit_ms, color="tab:red", linestyle="--", linewidth=1, label=f"target {knee.slo.text}")
    for step, outcome in zip(knee.steps, knee.outcomes()):
        if step.latency_ms is None:
            continue
        colour = {MEETS: "tab:green", MISSES: "tab:red"}.get(outcome, "0.5")
        ax.plot([step.achieved_rate], [step.latency_ms], marker="o", linestyle="none", markersize=7, color=colour,
                markerfacecolor=colour if outcome in (MEETS, MISSES) else "none")
        ax.annotate(f"{step.number}: {outcome}", (step.achieved_rate, step.latency_ms), textcoords="offset points",
                    xytext=(4, 6), fontsize=8)
    if knee.step is not None:
        ax.axvline(knee.step.achieved_rate, color="tab:green", linewidth=1,
                   label=f"knee {knee.step.achieved_rate:,.1f} calls/s ({knee.status})")
    ax.set_xlabel("achieved rate (calls/s of the mix)")
    ax.set_ylabel(f"{knee.slo.percentile} corrected latency (ms)")
    ax.set_ylim(bottom=0)
    ax.set_xlim(0, 1.15 * max((s.achieved_rate for s in knee.steps), default=1.0) or 1.0)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title(title or f"knee at {knee.slo.text}", fontsize=10)
    fig.tight_layout()
    return fig


def write_knee_figure(knee: Knee, out_dir: Path | str, *, title: str = "") -> Path | None:
    """Write ``knee.png`` into ``out_dir``; None when no step has a latency."""
    if not any(s.latency_ms is not None for s in knee.steps):
        return None
    return _save(knee_figure(knee, title=title), Path(out_dir) / KNEE_FIGURE_FILE)
