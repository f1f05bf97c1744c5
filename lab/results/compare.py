"""Two runs side by side: appendix-B constants, load operations, notebook latency samples.

Significance test: the two-sided Mann-Whitney U test (``scipy.stats.mannwhitneyu``) on the
latency *samples* of each side, with Holm's correction over all tests of one comparison
(many IN sizes or operations are compared at once). Samples come from

- a load run (``lab load``): the per-worker totals (``load/totals/*.json``, the service-time
  histograms of the measured calls), else the HDR interval logs (``load/**/*.hlog``, every
  ``<op>.service`` interval merged); each recorded value repeated by its count, so values
  carry HdrHistogram's 3 significant digits; percentiles and counts from ``load/summary.json``;
- a notebook's samples tables (``<notebook>/*.csv`` with a ``latency_ms`` or ``latency_us``
  column, or named ``*samples*`` with a ``*_ms`` / ``*_us`` column), grouped by their key
  columns (:data:`KEY_COLUMNS` present in the table, e.g. ``in_size``, ``scan_limit`` + ``run``,
  ``shape`` + ``method``; everything else in the table is an outcome).

Percentile-only summaries (no samples) are shown side by side with "no samples" instead of
a test. Besides the p-value the table gives the common-language effect size
``P(A > B) = U / (n_A n_B)``: 0.5 means no shift, above 0.5 means A is slower. Percentiles,
the p99's bootstrap interval and the tests are :mod:`lab.measure`'s, like every other figure
of the lab.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Mapping

import numpy as np

from lab.errors import CalibrationError
from lab.results.html import esc, fmt, page, table
from lab.results.jsonio import write_json
from lab.measure import a_over_b, bootstrap_ci, holm, mann_whitney, summarize_samples
from lab.measure.stats import ALPHA

MAX_SAMPLES_PER_SIDE = 200_000  # HDR histograms of long runs are subsampled (seeded) above this
# columns that name what a latency sample measured (the rest of a samples table are outcomes)
KEY_COLUMNS = ("operation", "op", "shape", "method", "in_size", "scan_limit", "run", "compression", "table", "window")
_SEED = 20240601


@dataclass
class RunData:
    path: Path
    calibration: dict[str, Any] | None
    load_summary: dict[str, dict[str, Any]]           # op -> summary entry
    load_samples: dict[str, np.ndarray]               # op -> latencies (µs)
    notebook_samples: dict[str, dict[str, np.ndarray]]  # "<notebook>/<table>" -> key -> latencies (ms)

    @property
    def run_id(self) -> str:
        return (self.calibration or {}).get("run_id", self.path.name)


@dataclass
class Comparison:
    a: RunData
    b: RunData
    constants: list[dict[str, Any]] = field(default_factory=list)
    operations: list[dict[str, Any]] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)
    html_path: Path | None = None
    text_path: Path | None = None

    @property
    def tests(self) -> list[dict[str, Any]]:
        return [r for r in self.operations + self.samples if r.get("p_value") is not None]


# ---- loading ------------------------------------------------------------------------------
def _hist_samples(hist: Any, rng: np.random.Generator) -> np.ndarray:
    values, counts = [], []
    for it in hist.get_recorded_iterator():
        low = hist.get_lowest_equivalent_value(it.value_iterated_to)
        values.append((low + hist.get_highest_equivalent_value(it.value_iterated_to)) / 2)
        counts.append(it.count_added_in_this_iter_step)
    if not values:
        return np.empty(0)
    counts_arr = np.asarray(counts, dtype=np.int64)
    total = int(counts_arr.sum())
    if total > MAX_SAMPLES_PER_SIDE:  # keep the distribution's shape, not every value
        counts_arr = rng.multinomial(MAX_SAMPLES_PER_SIDE, counts_arr / total)
    return np.repeat(np.asarray(values, dtype=float), counts_arr)


def _load_dir(run: Path) -> tuple[dict[str, dict[str, Any]], dict[str, np.ndarray]]:
    from lab.measure import hdr

    load = run / "load"
    summary: dict[str, dict[str, Any]] = {}
    samples: dict[str, np.ndarray] = {}
    if not load.is_dir():
        return summary, samples
    rng = np.random.default_rng(_SEED)
    path = load / "summary.json"
    if path.is_file():
        data = json.loads(path.read_text())
        ops = data.get("operations", data) if isinstance(data, Mapping) else {}
        for op, entry in ops.items():
            if isinstance(entry, Mapping) and ("service_us" in entry or "service" in entry or "count" in entry):
                summary[op] = dict(entry)
                if isinstance(entry.get("service"), str):  # an encoded histogram (lab.hdr.OpStats.to_json)
                    samples[op] = _hist_samples(hdr.decode(entry["service"]), rng)
    merged: dict[str, Any] = {}
    totals = sorted((load / "totals").glob("*.json"))
    for path in totals:  # per-worker run totals (lab.load): exactly the measured calls
        for op, stats in json.loads(path.read_text()).get("totals", {}).items():
            merged.setdefault(op, hdr.new_histogram()).add(hdr.decode(stats["service"]))
    if not totals:
        for log in sorted(load.glob("**/*.hlog")):
            for interval in hdr.read_interval_log(log):
                if interval.kind == "service":
                    merged.setdefault(interval.op, hdr.new_histogram()).add(interval.histogram)
    for op, hist in merged.items():
        if hist.get_total_count() == 0:
            continue
        samples[op] = _hist_samples(hist, rng)
        if op not in summary:
            summary[op] = {"service_us": hdr.percentiles_us(hist)}
    return summary, samples


def _value_column(columns: list[str]) -> str | None:
    for name in ("latency_ms", "latency_us", "ms", "us"):
        if name in columns:
            return name
    return next((c for c in columns if c.endswith("_ms") or c.endswith("_us")), None)


def _notebook_samples(run: Path) -> dict[str, dict[str, np.ndarray]]:
    import pandas as pd

    out: dict[str, dict[str, np.ndarray]] = {}
    for path in sorted(run.glob("*/*.csv")):
        try:
            df = pd.read_csv(path)
        except (pd.errors.EmptyDataError, pd.errors.ParserError):  # an empty table: nothing measured there
            continue
        value = _value_column(list(df.columns))
        # a samples table: named so, or one latency per row in a ``latency_ms`` / ``latency_us`` column
        if value is None or not ("samples" in path.stem or value in ("latency_ms", "latency_us")):
            continue
        if "ok" in df.columns:
            df = df[df["ok"].astype(bool)]
        keys = [c for c in KEY_COLUMNS if c in df.columns]
        scale = 1e-3 if value.endswith("us") else 1.0
        groups = df.groupby(keys, sort=True) if keys else [((), df)]
        table_name = f"{path.parent.name}/{path.stem}"
        for key, g in groups:
            key = key if isinstance(key, tuple) else (key,)
            label = ", ".join(f"{k}={v}" for k, v in zip(keys, key)) or "all"
            out.setdefault(table_name, {})[label] = g[value].to_numpy(dtype=float) * scale
    return out


def load_run(path: Path | str) -> RunData:
    path = Path(path)
    if not path.is_dir():
        raise CalibrationError(f"run folder {path} does not exist", run_dir=str(path))
    cal_path = path / "calibration.json"
    cal = json.loads(cal_path.read_text()) if cal_path.is_file() else None
    summary, samples = _load_dir(path)
    if cal is None and not summary:
        raise CalibrationError(f"{path} has neither calibration.json nor load/summary.json", run_dir=str(path))
    return RunData(path=path, calibration=cal, load_summary=summary, load_samples=samples,
                   notebook_samples=_notebook_samples(path))


# ---- statistics: lab.measure ----------------------------------------------------------------
def _sample_stats(xs: np.ndarray) -> dict[str, Any]:
    """n, p50, p99 (with its bootstrap 95% interval) and mean of one side's samples."""
    s = summarize_samples(xs)
    low, high = bootstrap_ci(xs)
    return {"n": s.count, "p50": s.p50, "p99": s.p99, "p99_ci_low": low, "p99_ci_high": high, "mean": s.mean}


# ---- the comparison -----------------------------------------------------------------------
def compare_runs(path_a: Path | str, path_b: Path | str, *, alpha: float = ALPHA) -> Comparison:
    a, b = load_run(path_a), load_run(path_b)
    cmp = Comparison(a=a, b=b)
    ca = (a.calibration or {}).get("constants", {})
    cb = (b.calibration or {}).get("constants", {})
    for name in list(ca) + [n for n in cb if n not in ca]:
        x, y = ca.get(name, {}), cb.get(name, {})
        ma, mb = x.get("measured"), y.get("measured")
        cmp.constants.append({
            "constant": name, "unit": x.get("unit") or y.get("unit"),
            "current_a": x.get("current"), "current_b": y.get("current"), "measured_a": ma, "measured_b": mb,
            "delta": (mb - ma) if isinstance(ma, (int, float)) and isinstance(mb, (int, float)) else None,
            "ratio_b_over_a": a_over_b(mb, ma),
            "recommended_a": x.get("recommended"), "recommended_b": y.get("recommended"),
            "confidence_a": x.get("confidence"), "confidence_b": y.get("confidence"),
            "ci_overlap": _overlap(x, y),
            "differs": ma != mb or x.get("recommended") != y.get("recommended")})
    for op in sorted(set(a.load_summary) | set(b.load_summary)):
        sa, sb = a.load_summary.get(op, {}), b.load_summary.get(op, {})
        pa, pb = sa.get("service_us") or {}, sb.get("service_us") or {}
        row = {"operation": op, "unit": "µs",
               "count_a": sa.get("count", pa.get("count")), "count_b": sb.get("count", pb.get("count")),
               "errors_a": sa.get("errors"), "errors_b": sb.get("errors"),
               "rate_a": sa.get("rate_per_second"), "rate_b": sb.get("rate_per_second")}
        for p in ("p50", "p99", "p999", "mean"):
            row[f"{p}_a"], row[f"{p}_b"] = pa.get(p), pb.get(p)
        row["p99_ratio_b_over_a"] = a_over_b(pb.get("p99"), pa.get("p99"))
        row.update(mann_whitney(a.load_samples.get(op), b.load_samples.get(op)).to_json())
        cmp.operations.append(row)
    for tbl in sorted(set(a.notebook_samples) & set(b.notebook_samples)):
        ga, gb = a.notebook_samples[tbl], b.notebook_samples[tbl]
        for key in [k for k in ga if k in gb]:
            xs, ys = ga[key], gb[key]
            qa, qb = _sample_stats(xs), _sample_stats(ys)
            cmp.samples.append({"table": tbl, "group": key, "unit": "ms",
                                **{f"{k}_a": v for k, v in qa.items()}, **{f"{k}_b": v for k, v in qb.items()},
                                "p50_ratio_b_over_a": a_over_b(qb["p50"], qa["p50"]), **mann_whitney(xs, ys).to_json()})
    holm(cmp.operations + cmp.samples, alpha)
    return cmp


def _overlap(x: Mapping[str, Any], y: Mapping[str, Any]) -> bool | None:
    if None in (x.get("ci_low"), x.get("ci_high"), y.get("ci_low"), y.get("ci_high")):
        return None
    return not (x["ci_high"] < y["ci_low"] or y["ci_high"] < x["ci_low"])


# ---- output -------------------------------------------------------------------------------
def _sig(r: Mapping[str, Any]) -> str:
    if r.get("p_value") is None:
        return "no samples"
    mark = "SIGNIFICANT" if r.get("significant") else "n.s."
    return f"p={r['p_value']:.3g} (Holm {r['p_adjusted']:.3g}) P(A>B)={r['p_a_gt_b']:.2f} {mark}"


def to_text(cmp: Comparison) -> str:
    lines = [f"A: {cmp.a.run_id} ({cmp.a.path})", f"B: {cmp.b.run_id} ({cmp.b.path})",
             "test: two-sided Mann-Whitney U on latency samples, Holm-corrected, alpha 0.05", "",
             "constants (measured A -> B, recommended A -> B):"]
    for r in cmp.constants:
        flag = " *" if r["differs"] else ""
        lines.append(f"  {r['constant']:<36} {fmt(r['measured_a']):>10} -> {fmt(r['measured_b']):<10} "
                     f"rec {fmt(r['recommended_a'])} -> {fmt(r['recommended_b'])} {r['unit'] or ''}{flag}")
    if cmp.operations:
        lines += ["", "load operations (service time, µs; p50 / p99 A -> B):"]
        for r in cmp.operations:
            lines.append(f"  {r['operation']:<24} p50 {fmt(r['p50_a'])} -> {fmt(r['p50_b'])}  "
                         f"p99 {fmt(r['p99_a'])} -> {fmt(r['p99_b'])}  n {fmt(r['count_a'])}/{fmt(r['count_b'])}  {_sig(r)}")
    if cmp.samples:
        lines += ["", "notebook latency samples (ms; p50 / p99 A -> B):"]
        for r in cmp.samples:
            lines.append(f"  {r['table']} [{r['group']}] p50 {fmt(r['p50_a'])} -> {fmt(r['p50_b'])}  "
                         f"p99 {fmt(r['p99_a'])} -> {fmt(r['p99_b'])}  n {r['n_a']}/{r['n_b']}  {_sig(r)}")
    return "\n".join(lines) + "\n"


def _sig_cell(r: Mapping[str, Any]) -> str:
    cls = " class='sig'" if r.get("significant") else ""
    return f"<td{cls}>{esc(_sig(r))}</td>"


def _with_ci(r: Mapping[str, Any], side: str) -> str:
    low, high = r.get(f"p99_ci_low_{side}"), r.get(f"p99_ci_high_{side}")
    ci = f"<br><small>95% CI {fmt(low)}–{fmt(high)}</small>" if low is not None else ""
    return fmt(r[f"p99_{side}"]) + ci


def to_html(cmp: Comparison) -> str:
    a, b = esc(cmp.a.run_id), esc(cmp.b.run_id)
    crow = [[esc(r["constant"]), esc(r["unit"]), fmt(r["current_a"]), fmt(r["current_b"]), fmt(r["measured_a"]),
             fmt(r["measured_b"]), fmt(r["delta"]), fmt(r["recommended_a"]), fmt(r["recommended_b"]),
             f"{esc(r['confidence_a'])} / {esc(r['confidence_b'])}", esc(r["ci_overlap"]),
             f"<td class='{'changed' if r['differs'] else ''}'>{'yes' if r['differs'] else ''}</td>"]
            for r in cmp.constants]
    orow = [[esc(r["operation"]), fmt(r["count_a"]), fmt(r["count_b"]), fmt(r["errors_a"]), fmt(r["errors_b"]),
             fmt(r["p50_a"]), fmt(r["p50_b"]), fmt(r["p99_a"]), fmt(r["p99_b"]), fmt(r["p999_a"]), fmt(r["p999_b"]),
             fmt(r["p99_ratio_b_over_a"]), _sig_cell(r)] for r in cmp.operations]
    srow = [[esc(r["table"]), esc(r["group"]), fmt(r["n_a"]), fmt(r["n_b"]), fmt(r["p50_a"]), fmt(r["p50_b"]),
             _with_ci(r, "a"), _with_ci(r, "b"), fmt(r["p50_ratio_b_over_a"]), _sig_cell(r)] for r in cmp.samples]
    body = (f"<h1>Runs compared: A = {a}, B = {b}</h1>"
            f"<p><small>A: {esc(cmp.a.path)}<br>B: {esc(cmp.b.path)}<br>Significance: two-sided Mann-Whitney U on "
            "latency samples, Holm-corrected over all tests here, alpha 0.05; P(A&gt;B) = U/(n<sub>A</sub>n<sub>B</sub>) "
            "(0.5 = no shift); p99 intervals: percentile bootstrap.</small></p><h2>Appendix B constants</h2>"
            + table(["constant", "unit", "current A", "current B", "measured A", "measured B", "B − A",
                     "recommended A", "recommended B", "confidence A / B", "95% CIs overlap", "differs"], crow)
            + "<h2>Load operations (service time, µs)</h2>"
            + (table(["operation", "n A", "n B", "errors A", "errors B", "p50 A", "p50 B", "p99 A", "p99 B",
                      "p99.9 A", "p99.9 B", "p99 B/A", "test"], orow) if orow else "<p>No load results in either run.</p>")
            + "<h2>Notebook latency samples (ms)</h2>"
            + (table(["table", "group", "n A", "n B", "p50 A", "p50 B", "p99 A", "p99 B", "p50 B/A", "test"], srow)
               if srow else "<p>No latency samples common to both runs.</p>"))
    return page(f"Compare {cmp.a.run_id} {cmp.b.run_id}", body)


def write_comparison(cmp: Comparison, results: Path) -> Comparison:
    """``results/compare-<a>-<b>/index.html`` and ``.txt`` (+ ``comparison.json``)."""
    out = results / f"compare-{cmp.a.run_id}-{cmp.b.run_id}"
    out.mkdir(parents=True, exist_ok=True)
    cmp.html_path, cmp.text_path = out / "index.html", out / "comparison.txt"
    cmp.html_path.write_text(to_html(cmp))
    cmp.text_path.write_text(to_text(cmp))
    write_json(out / "comparison.json",
               {"a": str(cmp.a.path), "b": str(cmp.b.path), "test": "mann-whitney-u, holm", "alpha": ALPHA,
                "constants": cmp.constants, "operations": cmp.operations, "samples": cmp.samples})
    return cmp
