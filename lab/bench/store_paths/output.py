"""The benchmark's table and figure: ``store.csv`` (one row per comparison and method) and
``store.png`` (send throughput of the write path, its floor and the bare LWT; p50/p99 per read
comparison, with their ratios)."""
from __future__ import annotations

import csv
from collections.abc import Mapping
from pathlib import Path

from lab.bench.store_paths.bench_report import Comparison, StoreBenchReport

CSV_COLUMNS = ("comparison", "method", "count", "ok", "errors", "warmup_discarded", "elapsed_seconds",
               "throughput_ops_per_s", "p50_us", "p90_us", "p99_us", "p999_us", "max_us", "mean_us",
               "requests_per_op", "message_record_requests_per_op")
FIGURE_DPI = 110
PANEL_INCHES = 4.2
BAR_WIDTH = 0.38
US_PER_MS = 1000


def write_csv(path: Path, comparisons: Mapping[str, Comparison]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_COLUMNS)
        for key, comp in comparisons.items():
            for name, m in comp.methods.items():
                lat = m.latency_us
                w.writerow([key, name, m.count, m.ok, m.errors, m.warmup_discarded, m.elapsed_seconds,
                            m.throughput_ops_per_s, lat.p50, lat.p90, lat.p99, lat.p999, lat.max, lat.mean,
                            m.requests_per_op, "" if m.message_record_requests_per_op is None
                            else m.message_record_requests_per_op])


def write_chart(path: Path, report: StoreBenchReport) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    comps = report.comparisons
    # the page's CPU comparison is a table in the closing note, not a latency panel
    latency_keys = [k for k in comps if k not in ("send_throughput", "history_latest_page_cpu")]
    fig, axes = plt.subplots(1, 1 + len(latency_keys), figsize=(PANEL_INCHES * (1 + len(latency_keys)), PANEL_INCHES))
    s = comps["send_throughput"]
    names = list(s.methods)
    ax = axes[0]
    bars = ax.bar(names, [s.methods[n].throughput_ops_per_s or 0 for n in names],
                  color=["tab:blue", "tab:green", "tab:gray"][:len(names)])
    ax.bar_label(bars, fmt="%.0f")
    ax.set_title(f"send throughput (ops/s)\nsend/floor = {s.ratio.get('send_over_floor_throughput')}, "
                 f"send/bare = {s.ratio['send_over_bare_throughput']}", fontsize=9)
    ax.tick_params(axis="x", labelsize=8)
    for ax, key in zip(axes[1:], latency_keys):
        comp = comps[key]
        names = list(comp.methods)
        for j, pct in enumerate(("p50", "p99")):
            vals = [(getattr(comp.methods[n].latency_us, pct) or 0) / US_PER_MS for n in names]
            xs = [i + (j - 0.5) * BAR_WIDTH for i in range(len(names))]
            bars = ax.bar(xs, vals, BAR_WIDTH, label=pct, color=["tab:blue", "tab:orange"][j])
            ax.bar_label(bars, fmt="%.1f", fontsize=7)
        ax.set_xticks(range(len(names)), names, fontsize=8)
        ax.set_ylabel("latency per call (ms)")
        r = comp.ratio
        sub = (f"/floor p50 x{r.get('history_over_floor_p50')} p99 x{r.get('history_over_floor_p99')}; "
               f"/bare p50 x{r['history_over_bare_p50']} p99 x{r['history_over_bare_p99']}" if comp.shape is None
               else f"naive/grouped p50 x{r['naive_over_grouped_p50']}, reads x"
                    f"{r['naive_over_grouped_message_record_requests']}")
        ax.set_title(f"{key}\n{sub}", fontsize=9)
        ax.legend(fontsize=8)
    fig.suptitle(f"store benchmark {report.run_id} ({report.params.mode})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=FIGURE_DPI)
    plt.close(fig)
