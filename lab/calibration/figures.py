"""The calibration notebooks' figures: plain functions of result tables, tested like any other code.

More: docs/calibration-internals.md.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from lab.calibration.capacity_model.amplification import MAIN_TABLE, step_amplification
from lab.calibration.capacity_model.row_model import REGRESSORS

FIGSIZE = (12, 4.2)
LOG_LABEL = " (log scale)"
SOURCE_COLORS = {"design": "#7f7f7f", "measured": "#1f77b4", "my_mix": "#2ca02c"}
CONFIDENCE_COLORS = {"high": "#17701a", "medium": "#b8860b", "low": "#c0392b", "inconclusive": "#7f7f7f",
                     "none": "#7f7f7f"}


def log_axis(ax: Any, axis: str, label: str) -> None:
    """Put ``axis`` ("x" or "y") of ``ax`` on a log scale with ``label`` saying so."""
    getattr(ax, f"set_{axis}scale")("log")
    getattr(ax, f"set_{axis}label")(label + LOG_LABEL)


WIDE_FIGSIZE = (13, 4.2)
THREE_FIGSIZE = (16, 4.2)
DESIGN = {"color": "red", "linestyle": "--"}        # the design's value
RECOMMENDED = {"color": "green", "linestyle": "-."}  # what the measurement recommends
REFERENCE = {"color": "grey", "linestyle": ":"}


def _plt() -> Any:
    import matplotlib.pyplot as plt

    return plt


def b_row_by_table(summary: pd.DataFrame, per_repeat: pd.DataFrame, partition: pd.DataFrame, *,
                   compressions: Sequence[str], design_b_row_bytes: float) -> Any | None:
    """Left: live disk bytes per row of each table and compression (mean, 95 % CI, each repeat
    a dot) against the design's b_row; right: one partition's size at the bucket width."""
    if summary is None or summary.empty:
        return None
    fig, axes = _plt().subplots(1, 2, figsize=FIGSIZE, gridspec_kw={"width_ratios": [2, 1]})
    tables = list(dict.fromkeys(summary.table))
    comps = [c for c in compressions if c in set(summary.compression)]
    width = 0.8 / max(len(comps), 1)
    for i, comp in enumerate(comps):
        part = summary[summary.compression == comp].set_index("table").reindex(tables)
        x = [j + i * width for j in range(len(tables))]
        err = [part.b_row_mean_bytes - part.b_row_ci_low_bytes, part.b_row_ci_high_bytes - part.b_row_mean_bytes]
        axes[0].bar(x, part.b_row_mean_bytes, width, yerr=err, capsize=4, label=f"compression: {comp}")
        pts = per_repeat[per_repeat.compression == comp]
        for j, t in enumerate(tables):
            ys = pts[pts.table == t].b_row_bytes
            axes[0].scatter([x[j]] * len(ys), ys, color="black", s=10, zorder=3)
    axes[0].axhline(design_b_row_bytes, **DESIGN, label=f"design b_row {design_b_row_bytes:.0f} B")
    axes[0].set_xticks([j + width * (len(comps) - 1) / 2 for j in range(len(tables))], tables)
    axes[0].set_xlabel("table")
    axes[0].set_ylabel("live disk bytes per row (B), mean and 95% CI")
    axes[0].legend()
    if partition is not None and len(partition):
        axes[1].bar(partition.compression, partition.bytes_at_width / 1e6, label="measured, scaled to 4096 rows")
        axes[1].axhline(partition.design_bytes_at_width.iloc[0] / 1e6, **DESIGN, label="design 4096 x 600 B")
        axes[1].set_xlabel("compression")
        axes[1].set_ylabel("partition size at 4096 rows (MB)")
        axes[1].legend()
    else:
        axes[1].set_axis_off()
    fig.tight_layout()
    return fig


def b_row_mixes(by_mix: pd.DataFrame, model: Any | None) -> Any | None:
    """Left: each mix's measured b_row (95 % CI) and the fit's prediction for its composition;
    right: predicted against measured, the held-out profile marked."""
    if by_mix is None or by_mix.empty:
        return None

    fig, axes = _plt().subplots(1, 2, figsize=FIGSIZE, gridspec_kw={"width_ratios": [3, 2]})
    x = range(len(by_mix))
    err = [by_mix.b_row_mean_bytes - by_mix.b_row_ci_low_bytes, by_mix.b_row_ci_high_bytes - by_mix.b_row_mean_bytes]
    axes[0].bar(x, by_mix.b_row_mean_bytes, yerr=err, capsize=4, color="#1f77b4", label="measured (95% CI)")
    predicted = None
    if model is not None:
        predicted = [model.predict({c: float(r[c]) for c in REGRESSORS})["mean"] for r in by_mix.to_dict("records")]
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
        axes[1].plot([0, top], [0, top], **REFERENCE, label="predicted = measured")
        log_axis(axes[1], "x", "measured (B per row)")
        log_axis(axes[1], "y", "row model (B per row)")
        axes[1].legend()
    else:
        axes[1].set_axis_off()
    fig.tight_layout()
    return fig


def empty_bucket_pages(summary: pd.DataFrame, holes: pd.DataFrame, *, design_scan_limit: int,
                       required: int) -> Any | None:
    """CQL requests and p50 latency of a history page over runs of empty buckets, one line per
    scan limit (x: the page stopped on the limit); the workload's holes, design and need marked."""
    if summary is None or summary.empty:
        return None
    fig, axes = _plt().subplots(1, 3, figsize=THREE_FIGSIZE)
    for limit, g in summary.groupby("scan_limit"):
        axes[0].plot(g.run, g.requests, marker="o", label=f"max scan {limit}")
        axes[1].plot(g.run, g.p50_ms, marker="o", label=f"max scan {limit}")
        stopped = g[g.stopped_on_empty]
        axes[0].scatter(stopped.run, stopped.requests, marker="x", color="red", zorder=3)
    axes[0].set_xlabel("consecutive empty buckets in the conversation")
    axes[0].set_ylabel("CQL requests per history page")
    axes[0].set_title("x: page stopped (has_more=false, alert)")
    axes[1].set_xlabel("consecutive empty buckets in the conversation")
    axes[1].set_ylabel("page latency p50 (ms)")
    top = max(int(holes.empty_buckets.max()) if len(holes) else 1, 1)
    axes[2].hist(holes.empty_buckets, bins=range(0, top + 2), align="left")
    axes[2].axvline(design_scan_limit + 0.5, **DESIGN, label=f"design {design_scan_limit}")
    axes[2].axvline(required + 0.5, **RECOMMENDED, label=f"workload needs {required}")
    axes[2].set_xlabel("empty buckets per hole (workload)")
    log_axis(axes[2], "y", "holes (count)")
    for ax in axes:
        ax.legend()
    fig.tight_layout()
    return fig


def grouped_vs_naive(summary: pd.DataFrame, methods: Sequence[str] = ("grouped", "naive")) -> Any | None:
    """message_record requests per batch and p50 latency per joined entry, per batch shape,
    one bar per read method; log scales (naive reads one row per request)."""
    if summary is None or summary.empty:
        return None
    fig, axes = _plt().subplots(1, 2, figsize=WIDE_FIGSIZE)
    shapes = list(dict.fromkeys(summary["shape"]))
    width = 0.8 / len(methods)
    for i, method in enumerate(methods):
        part = summary[summary.method == method].set_index("shape").reindex(shapes)
        x = [j + i * width for j in range(len(shapes))]
        axes[0].bar(x, part.record_reads, width, label=method)
        axes[1].bar(x, part.us_per_entry, width, label=method)
    for ax in axes:
        ax.set_xticks([j + width * (len(methods) - 1) / 2 for j in range(len(shapes))], shapes, rotation=15)
        ax.set_xlabel("batch shape")
        ax.legend()
    log_axis(axes[0], "y", "message_record requests per batch (count)")
    log_axis(axes[1], "y", "p50 latency per joined entry (µs)")
    fig.tight_layout()
    return fig


def in_list_latency(per_size: pd.DataFrame, *, p99_budget_ms: float, design_in_limit: int,
                    recommended: int | None) -> Any | None:
    """Left: p50 and p99 of an IN-list read over its size, the p99 budget; right: the per-row
    cost; both with the design limit and the recommended size."""
    ok = per_size[per_size.ok] if per_size is not None and len(per_size) else None
    if ok is None or ok.empty:
        return None
    fig, axes = _plt().subplots(1, 2, figsize=FIGSIZE)
    axes[0].plot(ok.in_size, ok.p50_ms, marker="o", label="p50")
    axes[0].plot(ok.in_size, ok.p99_ms, marker="o", label="p99")
    axes[0].axhline(p99_budget_ms, **DESIGN, label=f"p99 budget {p99_budget_ms:g} ms")
    log_axis(axes[0], "x", "IN list size (elements)")
    axes[0].set_ylabel("read latency (ms)")
    axes[1].plot(ok.in_size, ok.per_row_us, marker="o", label="mean latency / rows")
    log_axis(axes[1], "x", "IN list size (elements)")
    log_axis(axes[1], "y", "per-row cost (µs per row)")
    for ax in axes:
        ax.axvline(design_in_limit, **REFERENCE, label=f"design limit {design_in_limit}")
        if recommended:
            ax.axvline(recommended, **RECOMMENDED, label=f"recommended {recommended}")
        ax.legend()
    fig.tight_layout()
    return fig


def twcs_sstable_counts(series: pd.DataFrame, final: pd.DataFrame) -> Any | None:
    """Per table family (message_record in days, client_dedup in hours): live SSTables over
    simulated time, measured (dots) against the window arithmetic (dashed), and after expiry (x)."""
    if series is None or series.empty:
        return None
    families = list(dict.fromkeys(series.family))
    fig, axes = _plt().subplots(1, len(families), figsize=WIDE_FIGSIZE, squeeze=False)
    after = final.set_index("table").measured_after_expiry
    for ax, family in zip(axes[0], families):
        g = series[series.family == family]
        unit = g.unit.iloc[0].lower()
        scale = 86400 if unit == "days" else 3600
        for table, t in g.groupby("table"):
            line, = ax.plot(t.simulated_time_s / scale, t.predicted, linestyle="--", label=f"{table} predicted")
            ax.plot(t.simulated_time_s / scale, t.measured, marker="o", linestyle="", color=line.get_color(),
                    label=f"{table} measured")
            if table in after.index:
                ax.scatter([t.simulated_time_s.max() / scale + 0.5], [after[table]], marker="x", s=60,
                           color=line.get_color(), label=f"{table} after expiry")
        ax.set_xlabel(f"simulated time ({unit})")
        ax.set_ylabel("live SSTables (count)")
        ax.set_title(family)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def cpu_per_op(summary: pd.DataFrame) -> Any | None:
    """Server and load-generator CPU milliseconds per operation (medians over rounds, 95 %
    bootstrap intervals), side by side; log scale (a grouped read of 500 costs far more than a page)."""
    if summary is None or summary.empty:
        return None
    import numpy as np

    fig, ax = _plt().subplots(figsize=FIGSIZE)
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


def cpu_curve(points: pd.DataFrame, marks: Sequence[tuple[str, float, float]] = ()) -> Any | None:
    """Node CPU ms per send against the send rate (log-log, 95% intervals), the points not used
    (loader- or machine-bound, errors) hollow and named, the node's cores on a second axis;
    ``marks``: (label, rate, ms) of the points a sizing priced at."""
    if points is None or points.empty or points.server_ms_per_send.isna().all():
        return None
    fig, ax = _plt().subplots(figsize=FIGSIZE)
    p = points.dropna(subset=["server_ms_per_send"])
    p = p[p.server_ms_per_send > 0]
    used = p.verdict == "carried"
    mid = p.server_ms_per_send
    low, high = p.server_ms_per_send_ci_low.fillna(mid), p.server_ms_per_send_ci_high.fillna(mid)
    ax.errorbar(p.achieved_sends_per_second[used], mid[used], yerr=[(mid - low)[used].clip(lower=0),
                (high - mid)[used].clip(lower=0)], fmt="o-", capsize=3, label="node CPU per send (carried)")
    for r in p[~used].itertuples():
        ax.plot(r.achieved_sends_per_second, r.server_ms_per_send, "o", mfc="none", color="grey")
        ax.annotate(r.verdict, (r.achieved_sends_per_second, r.server_ms_per_send), fontsize=7,
                    textcoords="offset points", xytext=(4, 4))
    for label, rate, ms in marks:
        ax.plot(rate, ms, "s", color="#d62728")
        ax.annotate(label, (rate, ms), fontsize=7, textcoords="offset points", xytext=(4, -10), color="#d62728")
    log_axis(ax, "x", "sends/s of the mix (achieved)")
    log_axis(ax, "y", "node CPU ms per send (median over rounds, 95% CI)")
    twin = ax.twinx()
    twin.plot(points.achieved_sends_per_second, points.node_cores, "--", color="#2ca02c", alpha=0.6)
    twin.set_ylabel("node cores (net of idle)", color="#2ca02c")
    ax.legend(loc="upper right", fontsize=8)
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
