"""Figures of the calibration notebooks that are worth a test: plain functions of result tables.

Each returns a matplotlib Figure (or None when there is nothing to draw) and touches no
cluster; the notebooks save them with ``Output.figure``.

    b_row_mixes     measured b_row per mix against the row model's prediction
    cpu_per_op      server and load-generator CPU seconds per operation, with intervals
    space_amp       bytes on disk / live bytes over a simulated period; steady and peak per table
    model_check     each prediction's error against its target (disk, CPU, SSTables)
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


def space_amp(series: pd.DataFrame, summary: pd.DataFrame, *, steady_start_day: float,
              design: float | None = None) -> Any | None:
    """Left: message_record's bytes on disk / live bytes at every step of the simulated period,
    per scenario (the mean over replicates, the band their range), the steady state's start and
    appendix B's factor marked; right: steady and peak amplification per table and scenario with
    their 95 % intervals."""
    if series is None or series.empty:
        return None
    import matplotlib.pyplot as plt
    import numpy as np

    from lab.calibration.amplification import MAIN_TABLE, step_amplification

    fig, axes = plt.subplots(1, 2, figsize=FIGSIZE, gridspec_kw={"width_ratios": [3, 2]})
    steps = step_amplification(series)
    main = steps[steps.table == MAIN_TABLE]
    for scenario, g in main.groupby("scenario", sort=False):
        by_step = g.groupby("step").agg(day=("sim_day", "mean"), mean=("amp", "mean"), low=("amp", "min"),
                                        high=("amp", "max"), peak=("peak_amp", "max"))
        line, = axes[0].plot(by_step.day, by_step["mean"], marker=".", label=f"{scenario}: disk / live")
        axes[0].fill_between(by_step.day, by_step.low, by_step.high, color=line.get_color(), alpha=0.2)
        axes[0].plot(by_step.day, by_step.peak, linestyle=":", color=line.get_color(), label=f"{scenario}: peak")
    axes[0].axvline(steady_start_day, color="grey", linestyle="--", label="steady state from")
    if design is not None:
        axes[0].axhline(design, color="red", linestyle="-.", label=f"appendix B {design:g}")
    axes[0].set_xlabel("simulated day")
    axes[0].set_ylabel("message_record: bytes on disk / live bytes")
    axes[0].legend(fontsize=8)
    if summary is not None and len(summary):
        labels = [f"{r.table}\n{r.scenario}" for r in summary.itertuples()]
        x = np.arange(len(summary))
        for i, (what, color) in enumerate((("steady", "#1f77b4"), ("peak", "#ff7f0e"))):
            mid = summary[what].to_numpy()
            low = summary[f"{what}_ci_low"].fillna(summary[what]).to_numpy()
            high = summary[f"{what}_ci_high"].fillna(summary[what]).to_numpy()
            axes[1].bar(x + (i - 0.5) * 0.4, mid, 0.4, yerr=[np.clip(mid - low, 0, None), np.clip(high - mid, 0, None)],
                        capsize=3, color=color, label=what)
        axes[1].axhline(1.0, color="grey", linewidth=0.8)
        axes[1].set_xticks(x, labels, fontsize=7)
        axes[1].set_ylabel("space amplification (95% CI over replicates)")
        axes[1].legend(fontsize=8)
    else:
        axes[1].set_axis_off()
    fig.tight_layout()
    return fig


def model_check(checks: pd.DataFrame) -> Any | None:
    """Per quantity (disk, CPU, SSTables): each check's prediction error (predicted / measured - 1)
    with its interval, the target band shaded; the totals (tables or nodes summed) in bold."""
    if checks is None or checks.empty or checks.error.isna().all():
        return None
    import matplotlib.pyplot as plt
    import numpy as np

    quantities = [q for q in ("disk", "cpu", "sstables") if q in set(checks.quantity)]
    fig, axes = plt.subplots(1, len(quantities), figsize=FIGSIZE, squeeze=False,
                             gridspec_kw={"width_ratios": [max(1, (checks.quantity == q).sum()) for q in quantities]})
    for ax, q in zip(axes[0], quantities):
        g = checks[(checks.quantity == q) & checks.error.notna()].reset_index(drop=True)
        x = np.arange(len(g))
        err = 100 * g.error.to_numpy(dtype=float)
        low = 100 * g.error_ci_low.fillna(g.error).to_numpy(dtype=float)
        high = 100 * g.error_ci_high.fillna(g.error).to_numpy(dtype=float)
        colors = ["#2ca02c" if m else "#d62728" for m in g.met]
        ax.errorbar(x, err, yerr=[np.clip(err - low, 0, None), np.clip(high - err, 0, None)], fmt="none",
                    ecolor="grey", capsize=3)
        ax.scatter(x, err, c=colors, zorder=3)
        target = 100 * float(g.target.iloc[0])
        ax.axhspan(-target, target, color="#2ca02c", alpha=0.12, label=f"target ±{target:g}%")
        ax.axhline(0, color="grey", linewidth=0.8)
        labels = [f"{r.scope}\n{r.table}" if isinstance(r.table, str) else f"{r.scope}\n(all)" for r in g.itertuples()]
        ax.set_xticks(x, labels, fontsize=7, rotation=30)
        ax.set_title(q)
        ax.set_ylabel("predicted / measured - 1 (%)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
