"""HTML of a calibration run (``report.html``); the page helpers are :mod:`lab.results.html`.

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lab.calibration import capacity_section
from lab.calibration.decisions import (
    agreement_text,
    caveats,
    decision,
    impact,
    measured_first,
    precision_text,
    shared_caveats,
)
from lab.calibration.presets import FULL_RUN_DURATION
from lab.calibration.recommendations import CONFIDENCE_LEGEND
from lab.calibration.round_trip import ROUND_TRIP_PAYLOAD_BYTES
from lab.results.html import esc, figure, fmt, key_values, markdown, name_html, page, table

REPORT_FILE = "report.html"
FULL_RUN_COMMAND = "lab calibrate --full"


def _conf(c: Mapping[str, Any]) -> str:
    conf = c.get("confidence", "none")
    return f"<span class='conf-{esc(conf)}'>{esc(conf)}</span>"


def _interrupted(cal: Mapping[str, Any], run_dir: Path) -> str:
    notebooks = cal.get("notebooks") or {}
    where = next((n for n, nb in notebooks.items() if nb.get("status") == "interrupted"), None)
    done = [n for n, nb in notebooks.items() if nb.get("status") == "ok"]
    left = [n for n, nb in notebooks.items() if nb.get("status") != "ok"]
    at = f"in notebook <b>{esc(where)}</b>" if where else "before the first notebook (environment and round trip)"
    return (f"<div class='banner fail'><b>INTERRUPTED</b> {at} after {fmt(cal.get('wall_seconds'))} s. "
            f"Finished: {esc(', '.join(done) or 'none')}; not finished: {esc(', '.join(left) or 'none')}. "
            f"Resume into this folder: <code>lab calibrate --resume {esc(run_dir.resolve())}</code></div>")


def _banner(cal: Mapping[str, Any], run_dir: Path) -> str:
    status, mode = cal.get("status"), cal.get("mode")
    out = _interrupted(cal, run_dir) if status == "interrupted" else ""
    if status == "failed":
        e = cal.get("error") or {}
        where = (f"in notebook <b>{esc(e['notebook'])}</b>" + (f", cell {esc(e['cell'])}" if e.get("cell") is not None
                                                              else "")
                 if e.get("notebook") else "before the first notebook (environment and round trip)")
        return (f"<div class='banner fail'><b>Run failed</b> {where}: <b>{esc(e.get('ename'))}</b>: "
                f"{esc(e.get('evalue'))}. Partial results are kept below.</div>")
    took = (f"; completed here in {fmt(cal.get('wall_seconds'))} s" if status == "ok" else "")
    if mode == "quick":
        return out + ("<div class='banner quick'><b>Quick run: a smoke test of the pipeline, not a calibration.</b> It "
                      "runs each notebook with its shortest parameters and the quick precision targets (b_row ±10%), "
                      "so every recommendation below has <b>low</b> confidence and reads \"would change ... once a "
                      "full run confirms\" (<code>--propose</code> refuses without <code>--allow-quick</code>). For a "
                      f"calibration run <code>{FULL_RUN_COMMAND}</code>, each notebook sampling until its precision "
                      f"target or its time budget: {FULL_RUN_DURATION}{took}.</div>")
    if status != "ok":
        return out
    return out + (f"<div class='banner ok'>Full run: completed in {fmt((cal.get('wall_seconds') or 0) / 60, 2)} min "
                  "(each notebook sampled until its precision target or its time budget: see precision below).</div>")


def _code_spans(escaped: str) -> str:
    """`name` in an already-escaped caveat as <code>name</code> (caveats name options and mixes)."""
    return re.sub(r"`([^`<>]+)`", r"<code>\1</code>", escaped)


def _decisions(cal: Mapping[str, Any]) -> str:
    env, mode = cal.get("environment") or {}, cal.get("mode")
    rows = [(name, c) for name, c in measured_first(cal) if c.get("notebook") is not None]
    if not rows:
        return "<p>No notebook measured a constant in this run.</p>"
    shared, own = shared_caveats({name: caveats(name, c, env) for name, c in rows})
    cav = lambda xs: "".join(f"<div class='caveat'>{_code_spans(esc(x))}</div>" for x in xs)  # noqa: E731
    out = []
    for name, c in rows:
        d = decision(name, c, mode=mode)
        out.append([f"<b>{name_html(name)}</b><br><small>{esc(c.get('section'))}</small>",
                    f"<td class='{'changed' if d.changed else ''}'>{esc(d.text)}{cav(own[name])}</td>",
                    f"{esc(precision_text(c))}<br>confidence {_conf(c)}",
                    esc(agreement_text(c, mode=mode)), esc(impact(name, c))])
    head = (f"<div class='caveats'><b>For production, every row below:</b>{cav(shared)}</div>" if shared else "")
    return head + table(["constant", "decision (and its own caveats)", "precision", "vs the previous run",
                         "what it changes (§7)"], out, css="wide decisions")


def _legend() -> str:
    rows = [[f"<span class='conf-{k}'>{k}</span>", esc(means), esc(how)] for k, (means, how) in CONFIDENCE_LEGEND.items()]
    return "<h3>Confidence</h3>" + table(["level", "what it means", "how to get (beyond) it"], rows, css="wide")


def _evidence(cal: Mapping[str, Any], run_dir: Path) -> str:
    parts = []
    for name, c in measured_first(cal):
        if c.get("notebook") is None:
            continue
        unit = c.get("unit")
        pairs = [("measured", fmt(c.get("measured"), unit=unit)),
                 ("95% interval", f"{fmt(c.get('ci_low'))} – {fmt(c.get('ci_high'), unit=unit)}"
                  if c.get("ci_low") is not None else "—"),
                 ("recommended", fmt(c.get("recommended"), unit=unit)
                  + (f" (bootstrap 95%: {fmt(c['recommended_ci_low'])} – {fmt(c['recommended_ci_high'])})"
                     if c.get("recommended_ci_low") is not None else "")),
                 ("precision", esc(precision_text(c))), ("confidence", _conf(c))]
        if c.get("halves"):
            pairs.append(("halves of the run", f"{fmt(c['halves'].get('first'))} / {fmt(c['halves'].get('second'))}"))
        if c.get("stability"):  # lab.calibration.stability: is the choice itself stable
            pairs.append(("stability of the choice", esc(c["stability"].get("text"))))
        pairs += [(k, fmt(v)) for k, v in (c.get("observed") or {}).items()]
        nb = f"<a href='{esc(c['notebook_html'])}'>{esc(c.get('notebook'))} notebook</a>" if c.get("notebook_html") \
            else esc(c.get("notebook"))
        pairs.append(("source", nb))
        fig = figure(run_dir / c["figure"], href=c["figure"], anchor=f"fig-{name}") if c.get("figure") else ""
        parts.append(f"<h3 id='c-{esc(name)}'>{name_html(name)}</h3><p><small>{esc(c.get('doc'))}</small></p>"
                     f"<div class='evidence'><div class='kv-side'>{key_values(pairs)}"
                     f"<p><small>{esc(c.get('evidence'))}</small></p></div><div class='fig-side'>{fig}</div></div>")
    others = [[esc(n), f"<td class='num'>{fmt(c.get('current'), unit=c.get('unit'))}</td>", esc(c.get("doc"))]
              for n, c in measured_first(cal) if c.get("notebook") is None]
    if others:
        parts.append("<h3>Not measured in this run</h3><p><small>measured = null, recommended = current.</small></p>"
                     + table(["constant", "<th class='num'>current</th>", "what it governs"], others, css="wide"))
    return "".join(parts)


def _notebooks_section(cal: Mapping[str, Any], run_dir: Path) -> str:
    parts = []
    for name, nb in cal.get("notebooks", {}).items():
        links = " · ".join(f"<a href='{esc(nb[k])}'>{label}</a>" for k, label in
                           (("html", "notebook (HTML)"), ("notebook", "executed .ipynb"), ("values_file", "values.json"))
                           if nb.get(k))
        head = f"<h3 id='nb-{esc(name)}'>{esc(name)} <small>{esc(nb.get('status'))}, {fmt(nb.get('seconds'))} s</small></h3>"
        err = ""
        if nb.get("status") == "interrupted":
            err = "<div class='banner fail'>interrupted here: its partial output is in its folder</div>"
        if nb.get("error") and nb.get("status") == "not run":  # an input notebook of this run failed
            err = f"<div class='banner fail'>{esc(nb['error'].get('evalue'))}</div>"
        elif nb.get("error"):
            e = nb["error"]
            err = (f"<div class='banner fail'>failed in cell {esc(e.get('cell'))}: <b>{esc(e.get('ename'))}</b>: "
                   f"{esc(e.get('evalue'))}</div>")
        figs = "".join(figure(run_dir / f, href=f, anchor=f"nbfig-{f}") for f in nb.get("figures", []))
        figs = f"<div class='figures'>{figs}</div>" if figs else ""
        params = (f"<details><summary>parameters</summary><pre>{esc(json.dumps(nb.get('parameters', {}), indent=1))}"
                  "</pre></details>")
        parts.append(head + f"<p>{links}</p>" + err + markdown(nb.get("conclusion")) + params + figs)
    return "".join(parts) or "<p>No notebook ran.</p>"


def _environment(env: Mapping[str, Any]) -> str:
    machine = env.get("machine") or {}
    load = env.get("loadavg_at_start")
    rows = [("server", f"{env.get('server')} {env.get('server_version')}"), ("nodes", fmt(env.get("nodes"))),
            ("replication factor", fmt(env.get("replication_factor"))), ("embedded node", env.get("embedded")),
            ("node start-up (JVM to CQL)", fmt(env.get("node_startup_seconds"), unit="s")),
            ("jar resolution", fmt(env.get("jar_resolution_seconds"), unit="s")),
            ("outbox", (env.get("outbox") or {}).get("outbox", "local")),
            ("machine", f"{machine.get('hostname')}: {machine.get('cpus')} CPUs, "
                        f"{fmt((machine.get('memory_bytes') or 0) / 1e9)} GB, {machine.get('platform')}, "
                        f"Python {machine.get('python')}"),
            ("load average at start / end", f"{load} / {env.get('loadavg_at_end')}"),
            ("git commit", f"{env.get('git_commit')}{' (uncommitted changes)' if env.get('git_dirty') else ''}")]
    body = key_values([(k, esc(v)) for k, v in rows])
    params = dict(env.get("parameters") or {})
    per_notebook = params.pop("notebooks", {}) or {}
    compact = lambda v: esc(json.dumps(v, default=str))  # noqa: E731
    body += "<h3>parameters</h3>" + table(["", ""], [[esc(k), f"<code>{compact(v)}</code>"] for k, v in params.items()]
                                         + [[f"notebook {esc(k)}", f"<code>{compact(v)}</code>"]
                                            for k, v in per_notebook.items()], css="wide")
    body += f"<h3>cluster</h3><p><code>{compact(env.get('cluster'))}</code></p>"
    return body


def _links(cal: Mapping[str, Any]) -> str:
    out = [f"started {esc(cal.get('started_at'))}", "machine-readable: <a href='calibration.json'>calibration.json</a>"]
    if cal.get("proposal"):
        out.append(f"proposed change: <a href='{esc(cal['proposal'])}'>{esc(cal['proposal'])}</a>")
    if cal.get("previous_run"):
        out.append(f"agreement stated with the previous run <code>{esc(Path(cal['previous_run']).name)}</code>")
    rc = cal.get("repeat_check") or {}
    for r in cal.get("resumed") or ():
        out.append(f"resumed {esc(r.get('started_at'))} ({esc(', '.join(r.get('notebooks') or ()))})")
    if rc.get("comparison_html"):
        out.append(f"repeat check: first run <code>{esc(rc.get('first_run'))}</code>, "
                   f"<a href='{esc(Path(rc['comparison_html']).as_uri())}'>the two runs compared</a>")
    return "<p><small>" + "; ".join(out) + "</small></p>"


def _round_trip(rt: Mapping[str, Any], rtt_us: Any = None) -> str:
    """One row per operation, a header per column and its unit in the header; the emulated round
    trip every latency of the run crossed (``rtt_us`` of the run's cluster settings)."""

    if not rt:
        return "<p>Not measured.</p>"
    rows = [[op, f"<td class='num'>{fmt(rt.get(f'{op}_p50_us'))}</td>", f"<td class='num'>{fmt(rt.get(f'{op}_p99_us'))}</td>"]
            for op in ("write", "read")]
    return (table(["operation", "<th class='num'>p50 (µs)</th>", "<th class='num'>p99 (µs)</th>"], rows)
            + f"<p><small>{fmt(rt.get('n'))} rows of {fmt(ROUND_TRIP_PAYLOAD_BYTES)} B written then read one at a time in a scratch "
              f"keyspace, {fmt(rt.get('seconds'), unit='s')} in all. {_rtt_words(rtt_us)}</small></p>")


def _rtt_words(rtt_us: Any) -> str:
    if not isinstance(rtt_us, int) or isinstance(rtt_us, bool) or rtt_us <= 0:
        return ("Every latency of this run crossed loopback directly (no emulated round trip; "
                "<code>lab calibrate --target-rtt</code> prices the latency constants at a deployment's).")
    return (f"Every latency of this run crossed an emulated round trip of {fmt(rtt_us / 1000)} ms "
            "(the latency proxy, <code>--rtt</code>).")


def render(cal: Mapping[str, Any], run_dir: Path) -> str:
    run_id = cal.get("run_id", run_dir.name)
    body = (f"<h1>Calibration run {esc(run_id)} <small>({esc(cal.get('mode'))})</small></h1>{_banner(cal, run_dir)}"
            f"{_links(cal)}"
            "<h2>Decisions</h2>" + _decisions(cal) + _legend() + capacity_section.render(cal, run_dir)
            + "<h2>Evidence per constant</h2>" + _evidence(cal, run_dir)
            + "<h2>Notebooks</h2>" + _notebooks_section(cal, run_dir)
            + "<h2>Environment</h2>" + _environment(cal.get("environment") or {})
            + "<h2>Write/read round trip</h2>" + _round_trip((cal.get("measurements") or {}).get("round_trip") or {},
                                                             ((cal.get("environment") or {}).get("cluster") or {}).get("rtt_us")))
    return page(f"Calibration {run_id}", body)


def write_report(cal: Mapping[str, Any], run_dir: Path) -> Path:
    path = run_dir / REPORT_FILE
    path.write_text(render(cal, run_dir))
    return path
