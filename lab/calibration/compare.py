"""Two runs side by side: appendix-B constants, load operations, notebook latency samples.

Significance test: the two-sided Mann-Whitney U test (``scipy.stats.mannwhitneyu``) on the
latency *samples* of each side, with Holm's correction over all tests of one comparison
(many IN sizes or operations are compared at once). Samples come from the load run's HDR
histograms or the notebooks' samples tables (:mod:`lab.calibration.rundata` reads the folders).

Comparable runs only (:func:`comparability`): a loader-bound load run (``lab.load.verdict``:
its latencies are the load generator's), two load runs with a different mode (closed loop vs
fixed rate), user count, requested rate or profile, or two runs on a different server or
number of nodes, are refused (``force`` compares them anyway, every test marked "not
comparable"); a quick against a full calibration, or notebooks run with other parameters, are
compared with a warning. Constants are compared by :mod:`lab.calibration.agreement` (agree,
disagree, inconclusive, "not measured in B", ...), with B - A in the constant's unit. A run
folder is a calibration run (``calibration.json``), a load run (``load/summary.json``) or
notebooks run from JupyterLab (``<notebook>/values.json`` only: their constants are assessed
from the values the same way ``lab calibrate`` does).

Percentile-only summaries (no samples) are shown side by side with "no samples" instead of
a test. Besides the p-value the table gives the common-language effect size
``P(A > B) = U / (n_A n_B)``: 0.5 means no shift, above 0.5 means A is slower. Percentiles,
the p99's bootstrap interval and the tests are :mod:`lab.measure`'s, like every other figure
of the lab.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Mapping

import numpy as np

from lab.errors import CalibrationError
from lab.results.html import esc, fmt, page, table
from lab.results.jsonio import write_json
from lab.calibration.rundata import RunData, load_run
from lab.measure import a_over_b, bootstrap_ci, holm, mann_whitney, summarize_samples
from lab.measure.stats import ALPHA

__all__ = ["Comparison", "RunData", "compare_runs", "comparability", "load_run", "to_html", "to_text",
           "write_comparison"]


@dataclass
class Comparison:
    a: RunData
    b: RunData
    differences: list[dict[str, Any]] = field(default_factory=list)  # comparability (refuse / warn)
    forced: bool = False
    constants: list[dict[str, Any]] = field(default_factory=list)
    operations: list[dict[str, Any]] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)
    html_path: Path | None = None
    text_path: Path | None = None

    @property
    def tests(self) -> list[dict[str, Any]]:
        return [r for r in self.operations + self.samples if r.get("p_value") is not None]

    @property
    def comparable(self) -> bool:
        return not any(d["severity"] == "refuse" for d in self.differences)


# ---- comparability ----------------------------------------------------------------------------
def _kind(run: RunData) -> str:
    return "calibration" if run.calibration is not None else "load"


def _context(run: RunData) -> dict[str, Any]:
    """What must match between two runs, as far as each folder says (None: unknown)."""
    cal, meta = run.calibration or {}, run.load_meta or {}
    env = cal.get("environment") or ((meta.get("parameters") or {}).get("environment") or {})
    out = {"kind": _kind(run), "server": env.get("server"), "nodes": env.get("nodes")}
    if out["kind"] == "load":
        rate = meta.get("requested_rate")
        if rate is None and "requested_rate" in meta:  # stated: a closed loop has no rate
            rate = "none (closed loop)"
        out.update({"load mode": meta.get("mode"), "users": meta.get("users"), "rate": rate,
                    "profile": meta.get("profile")})
    else:
        out["calibration mode"] = cal.get("mode")
        out["notebook parameters"] = {nb: {k: v for k, v in (params or {}).items() if k not in _RUN_SPECIFIC}
                                      for nb, params in ((env.get("parameters") or {}).get("notebooks") or {}).items()}
    return out


REFUSE = ("kind", "server", "nodes", "load mode", "users", "rate", "profile")
# parameters naming this run's own files: they differ between any two runs
_RUN_SPECIFIC = frozenset({"b_row_values", "cpu_values", "constants_file", "out_dir", "cluster"})


def comparability(a: RunData, b: RunData) -> list[dict[str, Any]]:
    """What differs between the runs' conditions: ``severity`` "refuse" (results would differ
    for that reason alone) or "warn". Unknown on either side is not a difference."""
    ca, cb = _context(a), _context(b)
    out = []
    for key in [k for k in ca if k in cb]:
        x, y = ca[key], cb[key]
        if x is None or y is None or x == y:
            continue
        if key == "notebook parameters":
            common = sorted(set(x) & set(y))
            changed = [n for n in common if x[n] != y[n]]
            if changed:
                out.append({"what": key, "a": ", ".join(changed), "b": "differ", "severity": "warn",
                            "why": "the notebooks ran with other parameters: latencies may differ for that reason"})
            continue
        if key == "calibration mode" and "notebooks" in (x, y):
            continue
        out.append({"what": key, "a": x, "b": y, "severity": "refuse" if key in REFUSE else "warn",
                    "why": {"calibration mode": "quick runs use the shortest parameters; full runs the notebooks' own",
                            "kind": "a calibration run and a load run measure different things"}.get(
                                key, f"a different {key} changes every latency by itself")})
    bound = {side: (run.load_meta.get("verdict") or {}).get("verdict") for side, run in (("A", a), ("B", b))}
    if "loader-bound" in bound.values():
        which = " and ".join(f"{side} ({run.run_id})" for side, run in (("A", a), ("B", b))
                             if bound[side] == "loader-bound")
        out.append({"what": "verdict", "a": bound["A"] or "none", "b": bound["B"] or "none", "severity": "refuse",
                    "verdict": True,
                    "why": f"{which} loader-bound: its latencies are the load generator's, not the store's "
                           "(summary.json's verdict says why); rerun with more --processes or a lower rate"})
    return out


# ---- statistics: lab.measure ----------------------------------------------------------------
def _sample_stats(xs: np.ndarray) -> dict[str, Any]:
    """n, p50, p99 (with its bootstrap 95% interval) and mean of one side's samples."""
    s = summarize_samples(xs)
    low, high = bootstrap_ci(xs)
    return {"n": s.count, "p50": s.p50, "p99": s.p99, "p99_ci_low": low, "p99_ci_high": high, "mean": s.mean}


# ---- the comparison -----------------------------------------------------------------------
def compare_runs(path_a: Path | str, path_b: Path | str, *, alpha: float = ALPHA, force: bool = False) -> Comparison:
    """Compare two run folders; refuses runs that are not comparable unless ``force``."""
    from lab.calibration.agreement import agreement

    a, b = load_run(path_a), load_run(path_b)
    cmp = Comparison(a=a, b=b, differences=comparability(a, b), forced=force)
    if not cmp.comparable and not force:
        what = "; ".join(f"{d['what']}: {d['a']} vs {d['b']}" for d in cmp.differences if d["severity"] == "refuse")
        raise CalibrationError(f"runs {a.run_id} and {b.run_id} are not comparable ({what}); differences would be "
                               "the setup's, not the store's. Compare runs of the same setup, or --force",
                               differences=cmp.differences)
    ca = (a.calibration or {}).get("constants", {})
    cb = (b.calibration or {}).get("constants", {})
    for name in list(ca) + [n for n in cb if n not in ca]:
        x, y = ca.get(name, {}), cb.get(name, {})
        ma, mb = x.get("measured"), y.get("measured")
        agree = agreement(x, y)
        cmp.constants.append({
            "constant": name, "unit": x.get("unit") or y.get("unit"),
            "current_a": x.get("current"), "current_b": y.get("current"), "measured_a": ma, "measured_b": mb,
            "ci_a": (x.get("ci_low"), x.get("ci_high")), "ci_b": (y.get("ci_low"), y.get("ci_high")),
            "delta": agree["delta"], "delta_relative": agree["delta_relative"],
            "ratio_b_over_a": a_over_b(mb, ma),
            "recommended_a": x.get("recommended"), "recommended_b": y.get("recommended"),
            "confidence_a": x.get("confidence"), "confidence_b": y.get("confidence"),
            "ci_overlap": _overlap(x, y), "agreement": agree["status"], "agreement_detail": agree["detail"],
            "differs": agree["status"] in ("disagree", "inconclusive")})
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
        row["measured_in"] = "both" if sa and sb else ("A only" if sa else "B only")
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
NOT_COMPARABLE = "not comparable"


def _sig(r: Mapping[str, Any], cmp: Comparison | None = None) -> str:
    if r.get("p_value") is None:
        return "no samples" if r.get("measured_in", "both") == "both" else f"measured in {r['measured_in']}"
    mark = "SIGNIFICANT" if r.get("significant") else "n.s."
    if cmp is not None and not cmp.comparable:
        mark += f" ({NOT_COMPARABLE})"
    return f"p={r['p_value']:.3g} (Holm {r['p_adjusted']:.3g}) P(A>B)={r['p_a_gt_b']:.2f} {mark}"


def _warnings_text(cmp: Comparison) -> list[str]:
    lines = []
    for d in cmp.differences:
        head = "NOT COMPARABLE (--force)" if d["severity"] == "refuse" else "warning"
        if d.get("verdict"):
            lines.append(f"{head}: {d['why']}")
            continue
        lines.append(f"{head}: {d['what']} differs: A {d['a']} vs B {d['b']} ({d['why']})")
    return lines


def _measured(value: Any, unit: str | None) -> str:
    return fmt(value, unit=unit) if value is not None else "not measured"


def to_text(cmp: Comparison) -> str:
    lines = [f"A: {cmp.a.run_id} ({cmp.a.path})", f"B: {cmp.b.run_id} ({cmp.b.path})", *_warnings_text(cmp),
             "test: two-sided Mann-Whitney U on latency samples, Holm-corrected, alpha 0.05", "",
             "constants (measured A -> B with unit; agreement of the two runs):"]
    for r in cmp.constants:
        unit = r["unit"] or ""
        lines.append(f"  {r['constant']:<34} {_measured(r['measured_a'], unit):>14} -> "
                     f"{_measured(r['measured_b'], unit):<14} rec {fmt(r['recommended_a'])} -> "
                     f"{fmt(r['recommended_b'], unit=unit)}  {r['agreement']}"
                     + (f": {r['agreement_detail']}" if r["agreement_detail"] else ""))
    if cmp.operations:
        lines += ["", "load operations (service time in µs; p50 / p99 A -> B):"]
        for r in cmp.operations:
            lines.append(f"  {r['operation']:<24} p50 {fmt(r['p50_a'])} -> {fmt(r['p50_b'], unit='µs')}  "
                         f"p99 {fmt(r['p99_a'])} -> {fmt(r['p99_b'], unit='µs')}  n {fmt(r['count_a'])}/"
                         f"{fmt(r['count_b'])}  {_sig(r, cmp)}")
    if cmp.samples:
        lines += ["", "notebook latency samples (ms; p50 / p99 A -> B):"]
        for r in cmp.samples:
            lines.append(f"  {r['table']} [{r['group']}] p50 {fmt(r['p50_a'])} -> {fmt(r['p50_b'], unit='ms')}  "
                         f"p99 {fmt(r['p99_a'])} -> {fmt(r['p99_b'], unit='ms')}  n {r['n_a']}/{r['n_b']}  "
                         f"{_sig(r, cmp)}")
    return "\n".join(lines) + "\n"


def _sig_cell(r: Mapping[str, Any], cmp: Comparison) -> str:
    cls = " class='sig'" if r.get("significant") and cmp.comparable else ""
    return f"<td{cls}>{esc(_sig(r, cmp))}</td>"


def _with_ci(r: Mapping[str, Any], side: str) -> str:
    low, high = r.get(f"p99_ci_low_{side}"), r.get(f"p99_ci_high_{side}")
    ci = f"<br><small>95% CI {fmt(low)}–{fmt(high)}</small>" if low is not None else ""
    return fmt(r[f"p99_{side}"]) + ci


def _constant_cells(r: Mapping[str, Any]) -> list[str]:
    unit = r["unit"] or ""

    def measured(side: str) -> str:
        v = r[f"measured_{side}"]
        if v is None:
            return "<td><small>not measured</small></td>"
        lo, hi = r[f"ci_{side}"]
        ci = f"<br><small>95% CI {fmt(lo)}–{fmt(hi)}</small>" if lo is not None and hi is not None else ""
        return f"<td class='num'>{fmt(v, unit=unit)}{ci}</td>"

    delta = fmt(r["delta"], unit=unit, signed=True) if r["delta"] is not None else "—"
    if r.get("delta_relative") is not None:
        delta += f"<br><small>{fmt(100 * r['delta_relative'], signed=True)}%</small>"
    status = r["agreement"]
    cls = "agree" if status == "agree" else ("disagree" if status in ("disagree", "inconclusive") else "")
    return [esc(r["constant"]), measured("a"), measured("b"), f"<td class='num'>{delta}</td>",
            f"<td class='num'>{fmt(r['recommended_a'], unit=unit)} → {fmt(r['recommended_b'], unit=unit)}</td>",
            f"{esc(r['confidence_a'])} / {esc(r['confidence_b'])}",
            f"<td class='{cls}'><b>{esc(status)}</b><br><small>{esc(r['agreement_detail'])}</small></td>"]


def to_html(cmp: Comparison) -> str:
    a, b = esc(cmp.a.run_id), esc(cmp.b.run_id)
    orow = [[esc(r["operation"]), fmt(r["count_a"]), fmt(r["count_b"]), fmt(r["errors_a"]), fmt(r["errors_b"]),
             fmt(r["p50_a"]), fmt(r["p50_b"]), fmt(r["p99_a"]), fmt(r["p99_b"]), fmt(r["p999_a"]), fmt(r["p999_b"]),
             fmt(r["p99_ratio_b_over_a"]), _sig_cell(r, cmp)] for r in cmp.operations]
    srow = [[esc(r["table"]), esc(r["group"]), fmt(r["n_a"]), fmt(r["n_b"]), fmt(r["p50_a"]), fmt(r["p50_b"]),
             _with_ci(r, "a"), _with_ci(r, "b"), fmt(r["p50_ratio_b_over_a"]), _sig_cell(r, cmp)] for r in cmp.samples]
    warnings = "".join(
        f"<div class='banner {'fail' if d['severity'] == 'refuse' else 'warn'}'><b>"
        f"{'Not comparable (compared with --force)' if d['severity'] == 'refuse' else 'Warning'}</b>: "
        f"{esc(d['what'])} differs: A {esc(d['a'])} vs B {esc(d['b'])}. {esc(d['why'])}.</div>" for d in cmp.differences)
    body = (f"<h1>Runs compared: A = {a}, B = {b}</h1>{warnings}"
            f"<p><small>A: {esc(cmp.a.path)}<br>B: {esc(cmp.b.path)}<br>Significance: two-sided Mann-Whitney U on "
            "latency samples, Holm-corrected over all tests here, alpha 0.05; P(A&gt;B) = U/(n<sub>A</sub>n<sub>B</sub>) "
            "(0.5 = no shift); p99 intervals: percentile bootstrap. Agreement of constants: the difference within "
            "the two 95% half-widths combined, or the same recommendation.</small></p><h2>Appendix B constants</h2>"
            + table(["constant", "measured A", "measured B", "B − A", "recommended A → B", "confidence A / B",
                     "agreement"], [_constant_cells(r) for r in cmp.constants], css="wide")
            + "<h2>Load operations (service time, µs)</h2>"
            + (table(["operation", "n A", "n B", "errors A", "errors B", "p50 A (µs)", "p50 B (µs)", "p99 A (µs)",
                      "p99 B (µs)", "p99.9 A (µs)", "p99.9 B (µs)", "p99 B/A", "test"], orow)
               if orow else "<p>No load results in either run.</p>")
            + "<h2>Notebook latency samples (ms)</h2>"
            + (table(["table", "group", "n A", "n B", "p50 A (ms)", "p50 B (ms)", "p99 A (ms)", "p99 B (ms)", "p50 B/A",
                      "test"], srow) if srow else "<p>No latency samples common to both runs.</p>"))
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
                "differences": cmp.differences, "comparable": cmp.comparable, "forced": cmp.forced,
                "constants": cmp.constants, "operations": cmp.operations, "samples": cmp.samples})
    return cmp
