"""Figures of the calibration notebooks that are worth a test: plain functions of result tables.

Each returns a matplotlib Figure (or None when there is nothing to draw) and touches no
cluster; the notebooks save them with ``Output.figure``.

    b_row_mixes       measured b_row per mix against the row model's prediction
    cpu_per_op        server and load-generator CPU seconds per operation, with intervals
    capacity_sizing   resident TB and nodes per tier and b_row source (a panel per tier), sensitivity to b_row
    constant_history  one appendix-B constant across runs (``lab runs --constant NAME --plot``)
    log_axis          the one way to put an axis on a log scale: its label says so

Axes are linear unless a log axis is labelled as one (:func:`log_axis`): ratios read off a log
axis look smaller than they are.
"""
from __future__ import annotations

from typing import Any

import pandas as pd

FIGSIZE = (12, 4.2)
LOG_LABEL = " (log scale)"
SOURCE_COLORS = {"design": "#7f7f7f", "measured": "#1f77b4", "my_mix": "#2ca02c"}
CONFIDENCE_COLORS = {"high": "#17701a", "medium": "#b8860b", "low": "#c0392b", "inconclusive": "#7f7f7f",
                     "none": "#7f7f7f"}


def log_axis(ax: Any, axis: str, label: str) -> None:
    """Put ``axis`` ("x" or "y") of ``ax`` on a log scale with ``label`` saying so."""
    getattr(ax, f"set_{axis}scale")("log")
    getattr(ax, f"set_{axis}label")(label + LOG_LABEL)


def b_row_mixes(by_mix: pd.DataFrame, model: Any | None) -> Any | None:
    """Left: each mix's measured b_row (95 % CI) and the fit's prediction for its composition;
    right: predicted against measured, the held-out profile marked."""
    if by_mix is None or by_mix.empty:
        return None
    import matplotlib.pyplot as plt

    from lab.calibration.row_model import REGRESSORS

    fig, axes = plt.subplots(1, 2, figsize=FIGSIZE, gridspec_kw={"width_ratios": [3, 2]})
    x = range(len(by_mix))
    err = [by_mix.b_row_mean_bytes - by_mix.b_row_ci_low_bytes, by_mix.b_row_ci_high_bytes - by_mix.b_row_mean_bytes]
    axes[0].bar(x, by_mix.b_row_mean_bytes, yerr=err, capsize=4, color="#1f77b4", label="measured (95% CI)")
    predicted = None
    if model is not None:
        predicted = [model.predict({c: float(r[c]) for c in REGRESSORS})["mean"] for _, r in by_mix.iterrows()]
        axes[0].scatter(list(x), predicted, color="orange", zorder=3, label="row model")
    axes[0].set_xticks(list(x), [m + ("" if f else "\n(held out)") for m, f in zip(by_mix.mix, by_mix.fitted)],
                       rotation=20, fontsize=8)
    log_axis(axes[0], "y", "message_record bytes per row (B)")
    axes[0].legend()
    if predicted is not None:
        fitted = by_mix.fitted.to_numpy()
        measured = by_mix.b_row_mean_bytes.to_numpy()
        axes[1].scatter(measured[fitted], [p for p, f in zip(predicted, fitted) if f], label="fitted mixes")
        if (~fitted).any():
            axes[1].scatter(measured[~fitted], [p for p, f in zip(predicted, fitted) if not f], marker="*", s=160,
                            color="red", label="held-out profile")
        top = max(max(measured), max(predicted)) * 1.1
        axes[1].plot([0, top], [0, top], color="grey", linestyle=":", label="predicted = measured")
        log_axis(axes[1], "x", "measured (B per row)")
        log_axis(axes[1], "y", "row model (B per row)")
        axes[1].legend()
    else:
        axes[1].set_axis_off()
    fig.tight_layout()
    return fig


def cpu_per_op(summary: pd.DataFrame) -> Any | None:
    """Server and load-generator CPU milliseconds per operation (medians over rounds, 95 %
    bootstrap intervals), side by side; log scale (a grouped read of 500 costs far more than a page)."""
    if summary is None or summary.empty:
        return None
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=FIGSIZE)
    x = np.arange(len(summary))
    for i, (side, color) in enumerate((("server", "#1f77b4"), ("loadgen", "#ff7f0e"))):
        mid = summary[f"{side}_ms_per_op"].clip(lower=1e-3)
        low = summary[f"{side}_ms_per_op_ci_low"].fillna(summary[f"{side}_ms_per_op"]).clip(lower=1e-3)
        high = summary[f"{side}_ms_per_op_ci_high"].fillna(summary[f"{side}_ms_per_op"]).clip(lower=1e-3)
        ax.bar(x + (i - 0.5) * 0.4, mid, 0.4, yerr=[(mid - low).clip(lower=0), (high - mid).clip(lower=0)], capsize=3,
               color=color, label=f"{'server (net of idle)' if side == 'server' else 'load generator'}")
    ax.set_xticks(x, [f"{op}\n{r:g}/s" for op, r in zip(summary.op, summary.rate_requested)], fontsize=8)
    log_axis(ax, "y", "CPU ms per operation (median over rounds, 95% CI)")
    ax.legend()
    fig.tight_layout()
    return fig


def capacity_sizing(sizing: pd.DataFrame, sensitivity: pd.DataFrame, *, design_b_row_bytes: float,
                    measured_b_row_bytes: float | None = None, my_mix: dict[str, Any] | None = None) -> Any | None:
    """Left: one panel per traffic tier, a bar per b_row source (design, measured, your mix), each
    labelled with its resident TB and nodes (linear axes: a panel per tier, so the starter tier
    is not a sliver beside the largest); right: resident TB at the starter tier against b_row,
    with a line per source (your mix with its 95% interval)."""
    if sizing is None or sizing.empty:
        return None
    import matplotlib.pyplot as plt

    tiers = list(dict.fromkeys(sizing.messages_per_day))
    sources = list(dict.fromkeys(sizing.source))
    fig = plt.figure(figsize=(12, 4.4))
    grid = fig.add_gridspec(1, len(tiers) + 2, width_ratios=[1] * len(tiers) + [0.12, 2.2])
    for i, tier in enumerate(tiers):
        ax = fig.add_subplot(grid[0, i])
        rows = sizing[sizing.messages_per_day == tier].set_index("source").loc[sources]
        x = range(len(sources))
        bars = ax.bar(x, rows.resident_tb, 0.7, color=[SOURCE_COLORS.get(s, "#9467bd") for s in sources])
        for bar, r in zip(bars, rows.itertuples()):
            ax.annotate(f"{r.resident_tb:,.1f} TB\n{r.nodes_needed:,} nodes", (bar.get_x() + bar.get_width() / 2,
                        bar.get_height()), ha="center", va="bottom", fontsize=7.5, xytext=(0, 2),
                        textcoords="offset points")
        ax.set_xticks(list(x), [s.replace("_", " ") for s in sources], fontsize=8)
        ax.set_title(f"{tier / 1e6:,.0f} M messages/day", fontsize=9)
        ax.set_ylim(0, float(rows.resident_tb.max()) * 1.3)
        if i == 0:
            ax.set_ylabel("resident data, all replicas (TB)")
    ax = fig.add_subplot(grid[0, -1])
    ax.plot(sensitivity.b_row_bytes, sensitivity.resident_tb, color="black", linewidth=1)
    ax.axvline(design_b_row_bytes, color=SOURCE_COLORS["design"], linestyle="--", label=f"design {design_b_row_bytes:,.0f} B")
    if measured_b_row_bytes:
        ax.axvline(measured_b_row_bytes, color=SOURCE_COLORS["measured"], linestyle="-.",
                   label=f"measured {measured_b_row_bytes:,.0f} B")
    if my_mix:
        ax.axvspan(my_mix["ci_low"], my_mix["ci_high"], color=SOURCE_COLORS["my_mix"], alpha=0.15)
        ax.axvline(my_mix["mean"], color=SOURCE_COLORS["my_mix"], label=f"{my_mix.get('name', 'your mix')} "
                   f"{my_mix['mean']:,.0f} B (95% CI {my_mix['ci_low']:,.0f}-{my_mix['ci_high']:,.0f})")
    ax.set_xlabel("b_row (bytes per row)")
    ax.set_ylabel(f"resident data at {tiers[0] / 1e6:,.0f} M messages/day (TB)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def constant_history(points: list[Any], name: str, *, current: float | None = None) -> Any | None:
    """One appendix-B constant across runs, oldest left: each run's measured value with its 95%
    interval, coloured by confidence, hollow for a quick run; appendix B's value as a line."""
    if not points:
        return None
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(points) + 3), 4.2))
    for i, p in enumerate(points):
        v = p.value
        color = CONFIDENCE_COLORS.get(v.confidence, "#1f77b4")
        if v.ci_low is not None and v.ci_high is not None:
            ax.errorbar([i], [v.measured], yerr=[[max(v.measured - v.ci_low, 0)], [max(v.ci_high - v.measured, 0)]],
                        color=color, capsize=4, linewidth=1)
        ax.plot([i], [v.measured], marker="o", markersize=8, color=color,
                markerfacecolor="white" if p.mode == "quick" else color, linestyle="none")
    if current is not None:
        ax.axhline(current, color="grey", linestyle="--", linewidth=1)
    unit = points[0].value.unit
    ax.set_xticks(range(len(points)), [f"{p.run_id[:24]}\n{(p.started or '')[:10]} {p.mode or ''}" for p in points],
                  rotation=30, ha="right", fontsize=7.5)
    ax.set_ylabel(f"{name} ({unit})" if unit else name)
    ax.set_ylim(bottom=0)
    handles = [Line2D([], [], marker="o", color=c, linestyle="none", label=k) for k, c in CONFIDENCE_COLORS.items()
               if any(p.value.confidence == k for p in points)]
    handles.append(Line2D([], [], marker="o", color="black", markerfacecolor="white", linestyle="none",
                          label="quick run (hollow)"))
    if current is not None:
        handles.append(Line2D([], [], color="grey", linestyle="--", label=f"appendix B: {current:,}"))
    ax.legend(handles=handles, fontsize=8)
    ax.set_title(f"{name} across runs (95% intervals)", fontsize=10)
    fig.tight_layout()
    return fig
