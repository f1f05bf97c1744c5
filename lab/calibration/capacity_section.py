"""The report's capacity section: disk- and CPU-bound nodes per tier, where every input of each
count came from (measured in this run, or appendix B), and the model check's error beside it.

Reads calibration.json only (the capacity and model_check notebooks' values), so a test renders
it without a node. Per tier, the disk-bound count carries its §7 factors (b_row,
lsm_space_amp; RF and retention are appendix B's policy) and the model check's disk error; the
CPU-bound count the CPU costs' source and the check's CPU error. Below, the model check itself:
predicted / measured / error with its interval against the target, per quantity and per
table or node.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lab.results.html import esc, fmt, table

NOT_CHECKED = "no model check in this run"


def _values(cal: Mapping[str, Any], notebook: str) -> dict[str, Any]:
    return dict(((cal.get("notebooks") or {}).get(notebook) or {}).get("values") or {})


def _pct(x: Any) -> str:
    return "—" if x is None else f"{100 * float(x):+.1f}%"


def check_text(check: Mapping[str, Any], quantity: str) -> str:
    """``check -1.2% (CI -2.6% to +0.1%; target ±5%: met)``: a model check's error, short."""
    err = check.get(f"model_check_{quantity}_error")
    if err is None:
        skipped = (check.get("skipped") or {}).get(quantity)
        return f"not checked ({skipped})" if skipped else NOT_CHECKED
    low, high = check.get(f"model_check_{quantity}_error_ci_low"), check.get(f"model_check_{quantity}_error_ci_high")
    ci = f"; CI {_pct(low)} to {_pct(high)}" if low is not None and high is not None else ""
    target = (check.get("targets") or {}).get(quantity)
    where = (f", {check.get('nodes')} node(s) RF {check.get('replication_factor')}" if check.get("nodes") else "")
    met = check.get(f"model_check_{quantity}_met")
    verdict = "met" if met else ("MISSED" if met is False else "?")
    goal = "exact" if quantity == "sstables" else (f"±{100 * float(target):g}%" if target is not None else "")
    missed = check.get(f"model_check_{quantity}_missed") or []
    names = [" ".join(str(x) for x in (None if m.get("scope") == "cluster" else m.get("scope"), m.get("table")) if x)
             for m in missed]
    under = ("; missed under it: " + ", ".join(f"{n} {_pct(m.get('error'))}" for n, m in zip(names, missed))
             if missed else "")
    return f"model check {_pct(err)} ({goal}: {verdict}{ci}{where}{under})"


def factors_text(capacity: Mapping[str, Any]) -> str:
    """The §7 factors of the measured rows and where each came from."""
    factors = capacity.get("factors") or {}
    parts = []
    for name in ("b_row_bytes", "lsm_space_amp", "replication_factor", "capacity_retention_days"):
        f = factors.get(name)
        if f and f.get("value") is not None:
            parts.append(f"{name} {fmt(f['value'])} ({f['source']})")
    note = (factors.get("lsm_space_amp") or {}).get("note")
    return "; ".join(parts) + (f". lsm_space_amp from appendix B: {note}" if note else "")


def render(cal: Mapping[str, Any]) -> str:
    values, check = _values(cal, "capacity"), _values(cal, "model_check")
    if not values:
        return ""
    factors = values.get("factors") or {}
    disk_inputs = ", ".join(f"{n} {('measured' if str(f.get('source', '')).startswith('measured') else f.get('source'))}"
                            for n, f in factors.items() if n in ("b_row_bytes", "lsm_space_amp"))
    cpu_inputs = (factors.get("cpu_ms_per_op") or {}).get("source", "not given")
    disk_check, cpu_check = check_text(check, "disk"), check_text(check, "cpu")
    rows = []
    tiers = sorted((k.rsplit("_", 1)[1] for k in values if k.startswith("resident_tb_design_")), key=int)
    for tier in tiers:
        disk = values.get(f"nodes_disk_{tier}", values.get(f"nodes_needed_measured_{tier}",
                                                           values.get(f"nodes_needed_design_{tier}")))
        cpu = values.get(f"nodes_cpu_{tier}")
        rows.append([f"<td class='num'>{fmt(int(tier))}</td>",
                     f"<td class='num'>{fmt(values.get(f'resident_tb_design_{tier}'), unit='TB')}</td>",
                     f"<td class='num'>{fmt(values.get(f'resident_tb_measured_{tier}'), unit='TB')}</td>",
                     f"<b>{fmt(disk)}</b><br><small>inputs: {esc(disk_inputs)}; {esc(disk_check)}</small>",
                     (f"<b>{fmt(cpu)}</b><br><small>inputs: CPU per op {esc(cpu_inputs)}; {esc(cpu_check)}</small>"
                      if cpu is not None else "—"),
                     f"<td class='num'>{fmt(values.get(f'server_cores_{tier}'))}</td>",
                     esc(values.get(f"binding_{tier}", "disk only (no CPU costs)"))])
    if not rows:
        return ""
    return ("<h2>Capacity: disk- and CPU-bound nodes</h2>"
            + f"<p><small>§7 factors of the measured rows: {esc(factors_text(values))}.</small></p>"
            + table(["messages / day", "resident (design b_row)", "resident (measured)", "disk-bound nodes",
                     "CPU-bound nodes", "server cores at peak", "binds"], rows, css="wide")
            + "<p><small>From the capacity notebook (assumptions in its conclusion below: peak factor, operations per "
              "message, cores per node); CPU costs from the cpu_cost notebook of this run; the model check predicted a "
              "run it did not see from the same constants (below).</small></p>" + model_check(check))


def model_check(check: Mapping[str, Any]) -> str:
    """The model check's predicted / measured / error per quantity and scope."""
    rows = []
    for c in check.get("checks") or []:
        if c.get("predicted") is None:
            continue
        scope = esc(c["scope"]) + (f" <code>{esc(c['table'])}</code>" if c.get("table") else " (all)")
        low, high = c.get("error_ci_low"), c.get("error_ci_high")
        target = "exact" if c["quantity"] == "sstables" else f"±{100 * c['target']:g}%"
        rows.append([esc(c["quantity"]), scope, f"<td class='num'>{fmt(c['predicted'], unit=c['unit'])}</td>",
                     f"<td class='num'>{fmt(c['measured'], unit=c['unit'])}</td>",
                     f"<td class='num'>{_pct(c.get('error'))}</td>",
                     f"<td class='num'>{_pct(low)} to {_pct(high)}</td>" if low is not None else "—",
                     target, "met" if c.get("met") else "<b>MISSED</b>"])
    if not rows:
        return ""
    where = f"{check.get('server')}, {check.get('nodes')} node(s) at RF {check.get('replication_factor')}"
    return (f"<h3>Model check: the constants against a run they did not see ({esc(where)})</h3>"
            + table(["quantity", "node / table", "predicted", "measured", "error", "error 95% CI", "target", ""],
                    rows, css="wide"))
