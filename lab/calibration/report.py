"""HTML of a calibration run (``report.html``); the page helpers are :mod:`lab.results.html`.

The page is one self-contained file: figures are embedded as base64 PNGs (so it renders when
opened from disk, or copied elsewhere), and every figure links to its notebook's HTML by a
path relative to the run folder.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from collections.abc import Mapping

from lab.results.html import embedded_png, esc, fmt, page, table

REPORT_FILE = "report.html"


def _constants_table(cal: Mapping[str, Any], run_dir: Path) -> str:
    """Constants the run measured or observed (with their figure) first, then the others."""
    rows, others = [], []
    ordered = sorted(cal.get("constants", {}).items(), key=lambda kv: kv[1].get("measured") is None)
    for name, c in ordered:
        label = f"<b>{esc(name)}</b><br><small title='{esc(c.get('doc'))}'>{esc(c.get('section'))}</small>"
        if c.get("notebook") is None:
            others.append([label, f"<td class='num'>{fmt(c.get('current'))}</td>", esc(c.get("unit")),
                           esc(c.get("doc"))])
            continue
        measured = fmt(c.get("measured"))
        if c.get("ci_low") is not None and c.get("ci_high") is not None:
            measured += f"<br><small>95% CI {fmt(c['ci_low'])}–{fmt(c['ci_high'])}</small>"
        rec_cls = "num changed" if c.get("changed") else "num"
        rec = fmt(c.get("recommended"))
        if c.get("guarded"):
            rec += "<br><small class='guarded'>guarded: fixed for existing tables</small>"
            if c.get("suggested_for_new_tables") is not None:
                rec += f"<br><small>new tables: {fmt(c['suggested_for_new_tables'])}</small>"
        figure = ""
        if c.get("figure"):
            img = embedded_png(run_dir / c["figure"], alt=f"{name}: {c['figure']}")
            link = c.get("notebook_html") or c["figure"]
            figure = f"<a href='{esc(link)}'>{img}</a><br><small>{esc(c['figure'])}</small>"
        conf = c.get("confidence", "none")
        rows.append([label, f"<td class='num'>{fmt(c.get('current'))}</td>", f"<td class='num'>{measured}</td>",
                     f"<td class='{rec_cls}'>{rec}</td>", esc(c.get("unit")),
                     f"<td class='conf-{esc(conf)}'>{esc(conf)}</td>",
                     f"<td class='evidence'>{esc(c.get('evidence'))}<br>{figure}</td>"])
    out = (table(["constant", "current", "measured", "recommended", "unit", "confidence", "evidence and figure"], rows)
           if rows else "<p>No notebook measured a constant in this run.</p>")
    if others:
        out += ("<h3>Not measured in this run</h3><p><small>measured = null, recommended = current.</small></p>"
                + table(["constant", "current", "unit", "what it governs"], others))
    return out


def _notebooks_section(cal: Mapping[str, Any], run_dir: Path) -> str:
    parts = []
    for name, nb in cal.get("notebooks", {}).items():
        links = " · ".join(f"<a href='{esc(nb[k])}'>{label}</a>" for k, label in
                           (("html", "notebook (HTML)"), ("notebook", "executed .ipynb"), ("values_file", "values.json"))
                           if nb.get(k))
        status = esc(nb.get("status"))
        head = f"<h3 id='nb-{esc(name)}'>{esc(name)} <small>{status}, {fmt(nb.get('seconds'))} s</small></h3>"
        err = ""
        if nb.get("error"):
            e = nb["error"]
            err = (f"<div class='banner fail'>failed in cell {esc(e.get('cell'))}: <b>{esc(e.get('ename'))}</b>: "
                   f"{esc(e.get('evalue'))}</div>")
        conclusion = f"<pre>{esc(nb['conclusion'])}</pre>" if nb.get("conclusion") else ""
        figs = "".join(f"<figure><a href='{esc(f)}'>{embedded_png(run_dir / f, css='full')}</a>"
                       f"<figcaption><small>{esc(f)}</small></figcaption></figure>" for f in nb.get("figures", []))
        params = f"<details><summary>parameters</summary><pre>{esc(json.dumps(nb.get('parameters', {}), indent=1))}</pre></details>"
        parts.append(head + f"<p>{links}</p>" + err + conclusion + params + figs)
    return "".join(parts) or "<p>No notebook ran.</p>"


def _environment(env: Mapping[str, Any]) -> str:
    machine = env.get("machine") or {}
    rows = [("server", f"{env.get('server')} {env.get('server_version')}"), ("nodes", env.get("nodes")),
            ("replication factor", env.get("replication_factor")), ("embedded node", env.get("embedded")),
            ("node start-up (JVM to CQL)", f"{fmt(env.get('node_startup_seconds'))} s"),
            ("jar resolution", f"{fmt(env.get('jar_resolution_seconds'))} s"),
            ("outbox", (env.get("outbox") or {}).get("outbox", "local")),
            ("machine", f"{machine.get('hostname')}: {machine.get('cpus')} CPUs, "
                        f"{fmt((machine.get('memory_bytes') or 0) / 1e9)} GB, {machine.get('platform')}, "
                        f"Python {machine.get('python')}"),
            ("git commit", f"{env.get('git_commit')}{' (uncommitted changes)' if env.get('git_dirty') else ''}")]
    body = table(["", ""], [[esc(k), esc(v)] for k, v in rows])
    params = dict(env.get("parameters") or {})
    per_notebook = params.pop("notebooks", {}) or {}
    compact = lambda v: esc(json.dumps(v, default=str))  # noqa: E731
    body += "<h3>parameters</h3>" + table(["", ""], [[esc(k), f"<code>{compact(v)}</code>"] for k, v in params.items()]
                                         + [[f"notebook {esc(k)}", f"<code>{compact(v)}</code>"]
                                            for k, v in per_notebook.items()])
    body += f"<h3>cluster</h3><p><code>{compact(env.get('cluster'))}</code></p>"
    return body


def render(cal: Mapping[str, Any], run_dir: Path) -> str:
    run_id = cal.get("run_id", run_dir.name)
    if cal.get("status") == "failed":
        e = cal.get("error") or {}
        where = (f"in notebook <b>{esc(e['notebook'])}</b>" + (f", cell {esc(e['cell'])}" if e.get("cell") is not None
                                                              else "")
                 if e.get("notebook") else "before the first notebook (environment and round trip)")
        banner = (f"<div class='banner fail'><b>Run failed</b> {where}: <b>{esc(e.get('ename'))}</b>: "
                  f"{esc(e.get('evalue'))}. Partial results are kept below.</div>")
    else:
        banner = (f"<div class='banner ok'>Completed in {fmt(cal.get('wall_seconds'))} s "
                  f"({esc(cal.get('mode'))} parameters).</div>")
    rt = (cal.get("measurements") or {}).get("round_trip") or {}
    rt_rows = [[esc(k), f"<td class='num'>{fmt(v)}</td>"] for k, v in rt.items()]
    body = (f"<h1>Calibration run {esc(run_id)}</h1>{banner}"
            f"<p><small>started {esc(cal.get('started_at'))}; machine-readable: "
            f"<a href='calibration.json'>calibration.json</a>"
            + (f"; proposed change: <a href='{esc(cal['proposal'])}'>{esc(cal['proposal'])}</a>" if cal.get("proposal") else "")
            + "</small></p>"
            "<h2>Appendix B constants</h2>" + _constants_table(cal, run_dir)
            + "<h2>Environment</h2>" + _environment(cal.get("environment") or {})
            + "<h2>Write/read round trip (µs)</h2>" + table(["", "µs"], rt_rows)
            + "<h2>Notebooks</h2>" + _notebooks_section(cal, run_dir))
    return page(f"Calibration {run_id}", body)


def write_report(cal: Mapping[str, Any], run_dir: Path) -> Path:
    path = run_dir / REPORT_FILE
    path.write_text(render(cal, run_dir))
    return path
