"""Figures of the calibration notebooks that are worth a test: plain functions of result tables.

Each returns a matplotlib Figure (or None when there is nothing to draw) and touches no
cluster; the notebooks save them with ``Output.figure``.

    b_row_mixes     measured b_row per mix against the row model's prediction
    cpu_per_op      server and load-generator CPU seconds per operation, with intervals
"""
from __future__ import annotations

from typing import Any

import pandas as pd

FIGSIZE = (12, 4.2)


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
    axes[0].set_yscale("log")
    axes[0].set_ylabel("message_record bytes per row (B)")
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
        axes[1].set_xscale("log")
        axes[1].set_yscale("log")
        axes[1].set_xlabel("measured (B per row)")
        axes[1].set_ylabel("row model (B per row)")
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
    ax.set_yscale("log")
    ax.set_ylabel("CPU ms per operation (median over rounds, 95% CI)")
    ax.legend()
    fig.tight_layout()
    return fig
