"""What `lab compare` prints and writes: the text table, ``index.html`` and ``comparison.json``.

More: docs/comparison-internals.md.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lab.measure import SUMMARY_PERCENTILES, min_samples, too_few
from lab.measure.significance import TEST_NAME
from lab.results.html import esc, fmt, name_html, page, table
from lab.results.jsonio import write_json
from lab.results.run_files import inside
from lab.results.units import US_PER_MS, rate

KINDS = (("corrected", "Latency from the due time (corrected for coordinated omission)"),
         ("service", "Service time"))
TOO_FEW = "too few"
_SHOWN = ("p50", "p90", "p99", "p999")
_LABEL = {"p50": "p50", "p90": "p90", "p99": "p99", "p999": "p99.9"}


def test_description(cmp: Any) -> str:
    n = len(cmp.tests)
    return (f"{TEST_NAME} (one-second intervals of a load run, rounds of a notebook); Holm-corrected over the "
            f"{n} test{'' if n == 1 else 's'} here, alpha {cmp.alpha:g}")


def _ms(summary: Mapping[str, Any] | None, key: str, *, scale: float) -> tuple[str, str | None]:
    """(cell text, the reason it is not shown) of one percentile in ms."""
    if not summary or summary.get(key) is None:
        return "—", None
    n = int(summary.get("count") or summary.get("n") or 0)
    reason = too_few(SUMMARY_PERCENTILES[key], n)
    if reason is not None:
        return TOO_FEW, reason
    return fmt(float(summary[key]) / scale), None


def headline(cmp: Any) -> str:
    """One line: what the comparison found (the constants' agreement, then the latency tests),
    before any table; it never says less than a row below it."""
    parts = []
    if cmp.constants:
        split = [c for c in cmp.constants if c["agreement"] in ("disagree", "inconclusive")]
        compared = [c for c in cmp.constants if c["agreement"] in ("agree", "disagree", "inconclusive")]
        if split:
            names = ", ".join(f"{c['constant']} ({c['agreement']})" for c in split[:4])
            more = f" and {len(split) - 4} more" if len(split) > 4 else ""
            parts.append(f"constants: {len(split)} of {len(compared)} do not agree: {names}{more}")
        elif compared:
            parts.append(f"constants: all {len(compared)} agree")
    tests = cmp.tests
    untested = sum(1 for r in cmp.test_rows if r.get("p_value") is None)
    extra = f"; {untested} without a test (too few intervals)" if untested else ""
    found = [t for t in tests if t.get("significant")]
    if not tests:
        parts.append("no latency test could be made (too few intervals on either side)" if cmp.test_rows
                     else "no latencies to test")
    elif not found:
        parts.append(f"no difference found in {len(tests)} test{'' if len(tests) == 1 else 's'}{extra}")
    else:
        names = "; ".join(f"{t['what']}: {t['verdict']}" for t in found[:4])
        more = f" and {len(found) - 4} more" if len(found) > 4 else ""
        mark = " (runs not comparable: --force)" if not cmp.comparable else ""
        parts.append(f"B differs in {len(found)} of {len(tests)} tests{mark}: {names}{more}{extra}")
    return "verdict: " + "; ".join(parts)


def driven_lines(cmp: Any) -> list[str]:
    """How the two runs were driven where they differ (load processes, machine, services), said
    above the tables: a difference may be the setup's, not the store's."""
    a, b = _driven(cmp.a), _driven(cmp.b)
    return [f"driven differently: {key}: A {a[key]} vs B {b[key]}" for key in a
            if a[key] is not None and b[key] is not None and a[key] != b[key]]


def _driven(run: Any) -> dict[str, Any]:
    cal, meta = run.calibration or {}, run.load_meta or {}
    params = meta.get("parameters") if isinstance(meta.get("parameters"), Mapping) else {}
    env = cal.get("environment") or params.get("environment") or {}
    env = env if isinstance(env, Mapping) else {}
    machine = env.get("machine") if isinstance(env.get("machine"), Mapping) else {}
    services = params.get("services") or (env.get("parameters") or {}).get("services") or {}
    services = services if isinstance(services, Mapping) else {}
    cores = machine.get("cpus")
    return {"load processes": meta.get("processes"),
            "machine": f"{machine.get('hostname') or '?'}, {cores} cores" if machine else None,
            "outbox": services.get("outbox"), "hot window": services.get("hot_window")}


def warning_lines(cmp: Any) -> list[str]:
    lines = []
    for d in cmp.differences:
        head = "NOT COMPARABLE (--force)" if d["severity"] == "refuse" else "warning"
        if d["what"] == "run":
            lines.append(f"warning: A and B are the same run ({d['a']}): {d['why']}")
        elif d.get("verdict"):
            lines.append(f"{head}: {d['why']}")
        else:
            lines.append(f"{head}: {d['what']} differs: A {d['a']} vs B {d['b']} ({d['why']})")
    return lines


def _rate(v: Any) -> str:
    return rate(v, "") if v is not None else "—"


def _load_line(cmp: Any) -> str | None:
    ma, mb = cmp.a.load_meta or {}, cmp.b.load_meta or {}
    if not ma and not mb:
        return None
    req = ma.get("requested_rate") or mb.get("requested_rate")
    head = f"load: {ma.get('mode') or mb.get('mode')} {ma.get('profile') or mb.get('profile')}"
    if req:
        head += f", requested {_rate(ma.get('requested_rate'))} vs {_rate(mb.get('requested_rate'))} calls/s"
    return (f"{head}; achieved A {_rate(ma.get('achieved_rate'))}, B {_rate(mb.get('achieved_rate'))} calls/s; "
            f"measured A {fmt(ma.get('measured_seconds'))} s, B {fmt(mb.get('measured_seconds'))} s")


def _text_table(rows: Sequence[Sequence[str]], right: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [("  " + "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))).rstrip()
            for r in rows]


def _too_few_notes(reasons: list[tuple[int, float, str]]) -> list[str]:
    """One line for every "too few" cell of a table: the largest n that was still too few, and the rule."""
    if not reasons:
        return []
    n, p, where = max(reasons)
    why = too_few(-p, n)
    rule = ", ".join(f"{_LABEL[k]} from {min_samples(SUMMARY_PERCENTILES[k]):,} calls" for k in ("p90", "p99", "p999"))
    return [f"  {TOO_FEW}: {why} ({where}, the most calls among them); a percentile is shown from 10 calls beyond "
            f"it: {rule}"]


def _shown(summaries: Sequence[Mapping[str, Any] | None]) -> list[str]:
    """The percentiles a table shows: p50, p90 and p99 always, p99.9 when some side has enough calls for it."""
    enough = any(s and s.get("p999") is not None and too_few(99.9, int(s.get("count") or 0)) is None
                 for s in summaries)
    return [k for k in _SHOWN if k != "p999" or enough]


def _latency_rows(cmp: Any, kind: str) -> tuple[list[str], list[list[str]], list[tuple[int, float, str]],
                                                 list[Mapping[str, Any]]]:
    """Header and rows of one latency table (ms): per operation A/B percentiles and the verdict."""
    ops = [r for r in cmp.operations if r.get(kind)]
    keys = _shown([r[kind].get(s) for r in ops for s in ("a", "b")])
    rows, reasons, tests = [], [], []
    for r in ops:
        cells = [r["operation"]]
        for key in keys:
            for side in ("a", "b"):
                text, why = _ms(r[kind].get(side), key, scale=US_PER_MS)
                cells.append(text)
                if why:
                    reasons.append((int(r[kind][side].get("count") or 0), -SUMMARY_PERCENTILES[key],
                                    f"{r['operation']} {side.upper()}"))
        test = r["tests"].get(kind) or {}
        cells.append(test.get("verdict") or _measured_in(r))
        rows.append(cells)
        tests.append(test)
    head = ["operation"] + [f"{_LABEL[k]} {s}" for k in keys for s in ("A", "B")] + ["verdict"]
    return head, rows, reasons, tests


def _measured_in(r: Mapping[str, Any]) -> str:
    where = r.get("measured_in", "both")
    return "no test" if where == "both" else f"measured in {where}"


def _sample_rows(cmp: Any) -> tuple[list[list[str]], list[tuple[int, float, str]]]:
    rows, reasons = [], []
    for r in cmp.samples:
        cells = [r["table"], r["group"], fmt(r["n_a"]), fmt(r["n_b"])]
        for key in ("p50", "p99"):
            for side in ("a", "b"):
                text, why = _ms({"count": r[f"n_{side}"], key: r[f"{key}_{side}"]}, key, scale=1.0)
                cells.append(text)
                if why:
                    reasons.append((int(r[f"n_{side}"] or 0), -SUMMARY_PERCENTILES[key],
                                    f"{r['table']} [{r['group']}] {side.upper()}"))
        cells.append(r["test"].get("verdict") or "no test")
        rows.append(cells)
    return rows, reasons


def to_text(cmp: Any) -> str:
    lines = [f"A: {cmp.a.run_id} ({cmp.a.path})", f"B: {cmp.b.run_id} ({cmp.b.path})", *warning_lines(cmp),
             *driven_lines(cmp), f"test: {test_description(cmp)}", headline(cmp)]
    if (load := _load_line(cmp)) is not None:
        lines.append(load)
    if cmp.constants:
        lines += ["", "constants (measured A -> B with unit; agreement of the two runs):"]
        for r in cmp.constants:
            unit = r["unit"] or ""
            lines.append(f"  {r['constant']:<34} {_measured(r['measured_a'], unit):>14} -> "
                         f"{_measured(r['measured_b'], unit):<14} rec {fmt(r['recommended_a'])} -> "
                         f"{fmt(r['recommended_b'], unit=unit)}  {r['agreement']}"
                         + (f": {r['agreement_detail']}" if r["agreement_detail"] else ""))
    if cmp.operations:
        lines += ["", "calls and achieved rate per operation (calls/s):"]
        rows = [["operation", "calls A", "calls B", "errors A", "errors B", "achieved rate A", "achieved rate B"]]
        rows += [[r["operation"], fmt(r["count_a"]), fmt(r["count_b"]), fmt(r["errors_a"]), fmt(r["errors_b"]),
                  _rate(r["rate_a"]), _rate(r["rate_b"])] for r in cmp.operations]
        lines += _text_table(rows, right=set(range(1, 7)))
        for kind, title in KINDS:
            head, body, reasons, _ = _latency_rows(cmp, kind)
            if not body:
                continue
            lines += ["", f"{title.lower()}, ms:"]
            lines += _text_table([head, *body], right=set(range(1, len(head) - 1))) + _too_few_notes(reasons)
    if cmp.samples:
        body, reasons = _sample_rows(cmp)
        lines += ["", "notebook latency samples, ms:"]
        head = ["table", "group", "n A", "n B", "p50 A", "p50 B", "p99 A", "p99 B", "verdict"]
        lines += _text_table([head, *body], right=set(range(2, 8))) + _too_few_notes(reasons)
    return "\n".join(lines) + "\n"


def _measured(value: Any, unit: str | None) -> str:
    return fmt(value, unit=unit) if value is not None else "not measured"


# ---- HTML -------------------------------------------------------------------------------------
def _num(text: str, title: str | None = None) -> str:
    tip = f" title='{esc(title)}'" if title else ""
    return f"<td class='num'{tip}>{esc(text)}</td>"


def _verdict_cell(test: Mapping[str, Any], cmp: Any, fallback: str) -> str:
    cls = " class='sig'" if test.get("significant") and cmp.comparable else ""
    text = test.get("verdict") or fallback
    if test.get("significant") and not cmp.comparable:
        text += " (not comparable)"
    return f"<td{cls}>{esc(text)}</td>"


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
    return [name_html(r["constant"]), measured("a"), measured("b"), f"<td class='num'>{delta}</td>",
            f"<td class='num'>{fmt(r['recommended_a'], unit=unit)} → {fmt(r['recommended_b'], unit=unit)}</td>",
            f"{esc(r['confidence_a'])} / {esc(r['confidence_b'])}",
            f"<td class='{cls}'><b>{esc(status)}</b><br><small>{esc(r['agreement_detail'])}</small></td>"]


def _html_latency(cmp: Any, kind: str, title: str) -> str:
    head, body, reasons, tests = _latency_rows(cmp, kind)
    if not body:
        return ""
    rows = []
    for cells, test, r in zip(body, tests, [r for r in cmp.operations if r.get(kind)]):
        rows.append([name_html(cells[0])] + [_num(c, "too few calls for this percentile" if c == TOO_FEW else None)
                                       for c in cells[1:-1]] + [_verdict_cell(test, cmp, _measured_in(r))])
    notes = "".join(f"<p><small>{esc(n.strip())}</small></p>" for n in _too_few_notes(reasons))
    return f"<h2>{esc(title)} (ms)</h2>" + table(head, rows, css="cmp") + notes


def to_html(cmp: Any) -> str:
    a, b = esc(cmp.a.run_id), esc(cmp.b.run_id)
    warnings = "".join(
        f"<div class='banner {'fail' if d['severity'] == 'refuse' else 'warn'}'><b>"
        f"{'Not comparable (compared with --force)' if d['severity'] == 'refuse' else 'Warning'}</b>: "
        + (f"A and B are the same run ({esc(d['a'])}): {esc(d['why'])}.</div>" if d["what"] == "run" else
           f"{esc(d['why'])}.</div>" if d.get("verdict") else
           f"{esc(d['what'])} differs: A {esc(d['a'])} vs B {esc(d['b'])}. {esc(d['why'])}.</div>")
        for d in cmp.differences)
    warnings += "".join(f"<div class='banner warn'><b>Driven differently</b>: {esc(line.split(': ', 1)[1])}.</div>"
                        for line in driven_lines(cmp))
    found = any(t.get("significant") for t in cmp.tests) or any(
        c["agreement"] in ("disagree", "inconclusive") for c in cmp.constants)
    verdict = f"<div class='banner {'warn' if found else 'ok'}'><b>{esc(headline(cmp))}</b></div>"
    load = _load_line(cmp)
    parts = [f"<h1>Runs compared: A = {a}, B = {b}</h1>", warnings, verdict,
             f"<p>{esc(load)}</p>" if load else "",
             f"<p><small>A: {esc(cmp.a.path)}<br>B: {esc(cmp.b.path)}<br>Test: {esc(test_description(cmp))}. "
             "B/A: ratio of the geometric means of the per-interval medians, with its 95% interval. A tail "
             "percentile is shown from enough calls only (10 beyond it). Agreement of constants: the difference "
             "within the two 95% half-widths combined, or the same recommendation.</small></p>"]
    if cmp.constants:
        parts.append("<h2>Appendix B constants</h2>" + table(
            ["constant", "measured A", "measured B", "B − A", "recommended A → B", "confidence A / B", "agreement"],
            [_constant_cells(r) for r in cmp.constants], css="wide"))
    if cmp.operations:
        rows = [[name_html(r["operation"])] + [_num(fmt(r[k])) for k in ("count_a", "count_b", "errors_a", "errors_b")]
                + [_num(_rate(r["rate_a"])), _num(_rate(r["rate_b"]))] for r in cmp.operations]
        parts.append("<h2>Calls and achieved rate (calls/s)</h2>" + table(
            ["operation", "calls A", "calls B", "errors A", "errors B", "achieved rate A", "achieved rate B"], rows,
            css="cmp"))
        parts += [_html_latency(cmp, kind, title) for kind, title in KINDS]
    if cmp.samples:
        body, reasons = _sample_rows(cmp)
        rows = [[name_html(c[0]), name_html(c[1])] + [_num(x) for x in c[2:8]] + [_verdict_cell(r["test"], cmp, "no test")]
                for c, r in zip(body, cmp.samples)]
        parts.append("<h2>Notebook latency samples (ms)</h2>" + table(
            ["table", "group", "n A", "n B", "p50 A", "p50 B", "p99 A", "p99 B", "verdict"], rows, css="cmp")
            + "".join(f"<p><small>{esc(n.strip())}</small></p>" for n in _too_few_notes(reasons)))
    if not (cmp.constants or cmp.operations or cmp.samples):
        parts.append("<p>Nothing measured in common: no constants, load operations or latency samples.</p>")
    return page(f"Compare {cmp.a.run_id} {cmp.b.run_id}", "".join(parts))


def write_comparison(cmp: Any, results: Path) -> Any:
    """``results/compare-<a>-<b>/index.html``, ``comparison.txt`` and ``comparison.json``."""
    names = [re.sub(r"[^A-Za-z0-9_.-]", "_", r.run_id).strip(".") or "run" for r in (cmp.a, cmp.b)]
    results = Path(results)
    out = inside(results, f"compare-{names[0]}-{names[1]}", field="the comparison folder")
    out.mkdir(parents=True, exist_ok=True)
    cmp.html_path, cmp.text_path = out / "index.html", out / "comparison.txt"
    cmp.html_path.write_text(to_html(cmp))
    cmp.text_path.write_text(to_text(cmp))
    write_json(out / "comparison.json",
               {"a": str(cmp.a.path), "b": str(cmp.b.path), "test": TEST_NAME, "alpha": cmp.alpha, "holm": True,
                "verdict": headline(cmp), "differences": cmp.differences, "comparable": cmp.comparable,
                "forced": cmp.forced, "constants": cmp.constants, "operations": cmp.operations,
                "samples": cmp.samples})
    return cmp
