"""Two runs side by side: appendix-B constants, load operations, notebook latency samples.

More: docs/comparison-internals.md.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lab.calibration.agreement import agreement
from lab.comparison.compare_page import to_html, to_text, write_comparison
from lab.comparison.rundata import RunData, load_run
from lab.errors import CalibrationError, ValidationError
from lab.measure import a_over_b, bootstrap_ci, holm, interval_test, summarize_samples, window_medians
from lab.measure.significance import IntervalTest, verdict
from lab.measure.stats import ALPHA

__all__ = ["Comparison", "RunData", "compare_runs", "comparability", "load_run", "to_html", "to_text",
           "write_comparison"]
KINDS = ("corrected", "service")


@dataclass
class Comparison:
    a: RunData
    b: RunData
    differences: list[dict[str, Any]] = field(default_factory=list)  # comparability (refuse / warn)
    forced: bool = False
    alpha: float = ALPHA  # the family-wise significance level (Holm)
    constants: list[dict[str, Any]] = field(default_factory=list)
    operations: list[dict[str, Any]] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)
    html_path: Path | None = None
    text_path: Path | None = None

    @property
    def test_rows(self) -> list[dict[str, Any]]:
        """Every test of the comparison (made or not), in table order."""
        return ([t for r in self.operations for t in r["tests"].values()]
                + [r["test"] for r in self.samples])

    @property
    def tests(self) -> list[dict[str, Any]]:
        """The tests that were made (enough intervals on both sides)."""
        return [t for t in self.test_rows if t.get("p_value") is not None]

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
    out = {"kind": _kind(run), "server": env.get("server"), "nodes": env.get("nodes"), "round trip": _rtt(run, env)}
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


def _rtt(run: RunData, env: dict[str, Any]) -> str | None:
    """The round trip a run added between the client and the node (lab.cluster.rtt_proxy), as its
    summary or environment recorded it; "0 us (direct)" for a run that recorded none added."""
    meta = run.load_meta or {}
    value = meta.get("rtt_us") if "rtt_us" in meta else (env.get("cluster") or {}).get("rtt_us")
    if value is None:
        return "0 us (direct)" if (env.get("cluster") or meta) else None
    return "0 us (direct)" if not value else f"{value} us"


REFUSE = ("kind", "server", "nodes", "round trip", "load mode", "users", "rate", "profile")
# parameters naming this run's own files: they differ between any two runs
_RUN_SPECIFIC = frozenset({"b_row_values", "cpu_values", "constants_file", "out_dir", "cluster"})


def comparability(a: RunData, b: RunData) -> list[dict[str, Any]]:
    """What differs between the runs' conditions: ``severity`` "refuse" (results would differ
    for that reason alone) or "warn". Unknown on either side is not a difference. A run
    compared with itself is a warning (``what`` "run")."""
    ca, cb = _context(a), _context(b)
    out = []
    if a.path.resolve() == b.path.resolve():
        out.append({"what": "run", "a": str(a.path), "b": str(b.path), "severity": "warn",
                    "why": "a run compared with itself: every difference is zero by construction"})
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
                            "kind": "a calibration run and a load run measure different things",
                            "round trip": "a round trip added to every request moves every latency by itself"}.get(
                                key, f"a different {key} changes every latency by itself")})
    bound = {side: (run.load_meta.get("verdict") or {}).get("verdict") for side, run in (("A", a), ("B", b))}
    if {"loader-bound", "machine-bound"} & set(bound.values()):
        which = " and ".join(f"{side} ({run.run_id}) {bound[side]}" for side, run in (("A", a), ("B", b))
                             if bound[side] in ("loader-bound", "machine-bound"))
        out.append({"what": "verdict", "a": bound["A"] or "none", "b": bound["B"] or "none", "severity": "refuse",
                    "verdict": True,
                    "why": f"{which}: its latencies are the load generator's or the shared machine's, not the "
                           "store's (summary.json's verdict says why); rerun with more --processes, a lower rate "
                           "or the load on another machine"})
    return out


# ---- statistics: lab.measure ----------------------------------------------------------------
def _sample_stats(xs: np.ndarray) -> dict[str, Any]:
    """n, p50, p99 (with its bootstrap 95% interval) and mean of one side's samples."""
    s = summarize_samples(xs)
    low, high = bootstrap_ci(xs) if s.reported("p99") is not None else (None, None)
    return {"n": s.count, "p50": s.p50, "p99": s.p99, "p99_ci_low": low, "p99_ci_high": high, "mean": s.mean}


def _test(what: str, a_windows: list[Any] | None, b_windows: list[Any] | None,
          made: list[tuple[dict[str, Any], IntervalTest]]) -> dict[str, Any]:
    """One test of per-window medians, as a row Holm's correction fills in later."""
    result = interval_test(window_medians(a_windows or []), window_medians(b_windows or []))
    row = {"what": what, **result.to_json()}
    made.append((row, result))
    return row


def _operation(op: str, a: RunData, b: RunData, made: list[tuple[dict[str, Any], IntervalTest]]) -> dict[str, Any]:
    sa, sb = a.load_summary.get(op, {}), b.load_summary.get(op, {})
    row: dict[str, Any] = {
        "operation": op, "unit": "µs", "measured_in": "both" if sa and sb else ("A only" if sa else "B only"),
        "count_a": sa.get("count", (sa.get("service_us") or {}).get("count")),
        "count_b": sb.get("count", (sb.get("service_us") or {}).get("count")),
        "errors_a": sa.get("errors"), "errors_b": sb.get("errors"),
        "rate_a": sa.get("rate_per_second"), "rate_b": sb.get("rate_per_second"), "tests": {}}
    for kind in KINDS:
        la, lb = sa.get(f"{kind}_us"), sb.get(f"{kind}_us")
        if la is None and lb is None:
            continue
        row[kind] = {"a": la, "b": lb, "p50_ratio_b_over_a": a_over_b((lb or {}).get("p50"), (la or {}).get("p50"))}
        if sa and sb:
            row["tests"][kind] = _test(f"{op} {kind}", a.load_windows.get(op, {}).get(kind),
                                       b.load_windows.get(op, {}).get(kind), made)
    return row


# ---- the comparison -----------------------------------------------------------------------
def compare_runs(path_a: Path | str, path_b: Path | str, *, alpha: float = ALPHA, force: bool = False) -> Comparison:
    """Compare two run folders; refuses runs that are not comparable unless ``force``."""

    a, b = load_run(path_a), load_run(path_b)
    if not (isinstance(alpha, float) and 0 < alpha < 1):
        raise ValidationError(f"alpha must be a number between 0 and 1, got {alpha!r}", field="alpha")
    cmp = Comparison(a=a, b=b, differences=comparability(a, b), forced=force, alpha=alpha)
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
    made: list[tuple[dict[str, Any], IntervalTest]] = []
    cmp.operations = [_operation(op, a, b, made) for op in sorted(set(a.load_summary) | set(b.load_summary))]
    for tbl in sorted(set(a.notebook_samples) & set(b.notebook_samples)):
        ga, gb = a.notebook_samples[tbl], b.notebook_samples[tbl]
        for key in [k for k in ga if k in gb]:
            xs, ys = np.concatenate(ga[key] or [np.empty(0)]), np.concatenate(gb[key] or [np.empty(0)])
            qa, qb = _sample_stats(xs), _sample_stats(ys)
            cmp.samples.append({"table": tbl, "group": key, "unit": "ms",
                                **{f"{k}_a": v for k, v in qa.items()}, **{f"{k}_b": v for k, v in qb.items()},
                                "p50_ratio_b_over_a": a_over_b(qb["p50"], qa["p50"]),
                                "test": _test(f"{tbl} [{key}]", ga[key], gb[key], made)})
    holm([row for row, _ in made], alpha)
    for row, result in made:
        row.setdefault("p_adjusted", None)  # no test made: one shape for every row of comparison.json
        row.setdefault("significant", None)
        row["verdict"] = verdict(result, significant=row.get("significant"), p_adjusted=row.get("p_adjusted"))
    return cmp


def _overlap(x: Mapping[str, Any], y: Mapping[str, Any]) -> bool | None:
    if None in (x.get("ci_low"), x.get("ci_high"), y.get("ci_low"), y.get("ci_high")):
        return None
    return not (x["ci_high"] < y["ci_low"] or y["ci_high"] < x["ci_low"])
