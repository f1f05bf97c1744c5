"""The report's capacity section: disk- and CPU-bound nodes per tier, where every input of each
count came from (measured in this run, or appendix B), and the model check's error beside it.

More: docs/calibration-internals.md.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lab.calibration.capacity_model.curve_pricing import NODES_DISAGREE
from lab.results.html import esc, figure, fmt, table

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
    ci = f"; CI {_pct(low)} to {_pct(high)}" if low is not None and high is not None and low != high else ""
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


def _tag(level: str | None) -> str:
    """The confidence a derived figure inherits from its inputs, beside the figure."""
    if not level:
        return ""
    return f" <small class='conf-{esc(level)}'>{esc(level)}</small>"


def _cite(label: str, notebook: str, how: str | None, run: str | None) -> str | None:
    """'b_row from the b_row notebook of this run (R)', '... of run R (the latest b_row run in ...)'."""
    if how == "this run":
        return f"{label} from the {notebook} notebook of this run ({esc(run)})"
    if run:
        return f"{label} from the {notebook} notebook of run {esc(run)}" + (f" ({esc(how)})" if how else "")
    return None


def render(cal: Mapping[str, Any], run_dir: Path | None = None) -> str:
    """Per tier: resident TB and disk-bound nodes for each b_row source (the design's, the
    measured, your mix), CPU-bound nodes and cores, which binds; every derived figure with the
    confidence of its inputs; where the inputs came from and the model check's errors; a
    footnote citing the runs that actually ran."""
    values, check = _values(cal, "capacity"), _values(cal, "model_check")
    tiers = sorted((k.rsplit("_", 1)[1] for k in values if k.startswith("resident_tb_design_")), key=int)
    if not tiers:
        return ""
    factors = values.get("factors") or {}
    disk_inputs = ", ".join(f"{n} {('measured' if str(f.get('source', '')).startswith('measured') else f.get('source'))}"
                            for n, f in factors.items() if n in ("b_row_bytes", "lsm_space_amp"))
    cpu_inputs = (factors.get("cpu_ms_per_op") or {}).get("source", "not given")
    mix = values.get("my_mix_b_row") or {}
    sources = [("design", f"design b_row {fmt(values.get('design_b_row_bytes'), unit='B')}", "design value")]
    if values.get("b_row_measured_bytes"):
        sources.append(("measured", f"measured b_row {fmt(values['b_row_measured_bytes'], unit='B')}",
                        values.get("b_row_confidence")))
    if mix:
        sources.append(("my_mix", f"{values.get('my_mix_name') or 'my_mix'} {fmt(mix.get('mean'), unit='B')} "
                                  f"(95% CI {fmt(mix.get('ci_low'))}–{fmt(mix.get('ci_high'))})",
                        values.get("my_mix_confidence")))
    hold = values.get("hold_apart") or {}
    if hold and any(k.startswith("resident_tb_hold_apart_") for k in values):
        sources.append(("hold_apart", f"what-if: compliance_hold in its own table (factor "
                                      f"{fmt(hold.get('combined_amp'))})", None if hold.get("stationary") else "low"))
    aged = values.get("aged") or {}
    if aged and any(k.startswith("resident_tb_aged_") for k in values):
        sources.append(("aged", f"what-if: message_record at {fmt(aged.get('age_days'))} days (factor "
                                f"{fmt(aged.get('amp'))}, '{aged.get('model')}' model)",
                        None if aged.get("check_ok") else "low"))
    cpu = values.get("cpu_source") is not None
    curve = any(k.startswith("nodes_cpu_curve_") for k in values)
    knee = any(k.startswith("nodes_knee_") and not k.startswith("nodes_knee_disagree_") for k in values)
    cpu_conf = values.get("cpu_confidence")
    rows = []
    for tier in tiers:
        row = [f"<td class='num'>{fmt(int(tier))}</td>"]
        for src, _, conf in sources:
            tag = "" if src == "design" else _tag(conf)
            row.append(f"<td class='num'>{fmt(values.get(f'resident_tb_{src}_{tier}'), unit='TB')}<br>"
                       f"{fmt(values.get(f'nodes_needed_{src}_{tier}'))} nodes{tag}</td>")
        if cpu:
            lo, hi = values.get(f"server_cores_ci_low_{tier}"), values.get(f"server_cores_ci_high_{tier}")
            ci = f" (95% CI {fmt(lo)}–{fmt(hi)})" if lo is not None else ""
            row.append(f"<td class='num'>{fmt(values.get(f'nodes_cpu_{tier}'))} nodes{_tag(cpu_conf)}<br>"
                       f"<small>{fmt(values.get(f'server_cores_{tier}'))} cores{ci}</small></td>")
            binds = [f"{esc(label)}: {esc(values.get(f'binding_{key}{tier}', '?'))}"
                     for key, label in (("", "measured" if values.get("b_row_measured_bytes") else "design"),
                                        ("my_mix_", "your mix")) if f"binding_{key}{tier}" in values]
            row.append("<br>".join(binds))
        if curve:
            flag = (f"<br><b>more than {NODES_DISAGREE:.0%} from the light-rate count</b>"
                    if values.get(f"nodes_cpu_disagree_{tier}") else "")
            row.append(f"<td class='num'>{fmt(values.get(f'nodes_cpu_curve_{tier}'))} nodes<br><small>"
                       f"{fmt(values.get(f'curve_ms_per_send_{tier}'))} ms per send "
                       f"({esc(values.get(f'curve_where_{tier}'))}){flag}</small></td>")
        if knee:
            flag = (f"<br><b>more than {NODES_DISAGREE:.0%} from the curve's count</b>"
                    if values.get(f"nodes_knee_disagree_{tier}") else "")
            bound = "" if values.get("knee_status") == "found" else " (a lower bound on the knee: an upper estimate)"
            row.append(f"<td class='num'>{fmt(values.get(f'nodes_knee_{tier}'))} nodes<br><small>"
                       f"{fmt(values.get(f'knee_sends_per_second_per_node_{tier}'))} sends/s a node at "
                       f"{esc(values.get('knee_slo'))}{esc(bound)}{flag}</small></td>")
        rows.append(row)
    head = ["<th class='num'>messages / day</th>"] + [
        f"<th class='num'>{esc(label)}<br><small>resident, disk-bound nodes</small></th>" for _, label, _ in sources]
    if cpu:
        head += ["<th class='num'>CPU-bound nodes<br><small>server cores at peak, light-rate costs</small></th>", "binds"]
    if curve:
        head += ["<th class='num'>CPU-bound nodes on the curve<br><small>at the per-node rate they imply</small></th>"]
    if knee:
        head += ["<th class='num'>nodes within the latency target<br><small>from the knee, at the CPU "
                 "headroom</small></th>"]
    checks = f"Disk-bound nodes: inputs: {disk_inputs or 'appendix B'}; {check_text(check, 'disk')}."
    if cpu:
        checks += f" CPU-bound nodes: inputs: CPU per op {cpu_inputs}; {check_text(check, 'cpu')}."
    cited = [_cite("b_row", "b_row", values.get("b_row_from"), values.get("b_row_run"))
             or "no measured b_row (the design's only)"]
    if mix:
        model = _cite("the row model", "b_row", values.get("my_mix_from"), values.get("my_mix_run")) or "the row model"
        cited.append(f"{esc(values.get('my_mix_name') or 'my_mix')} ({esc(values.get('my_mix_source'))}) priced by "
                     f"{model}")
    cited.append(_cite("CPU costs", "cpu_cost", values.get("cpu_from"), values.get("cpu_run")) if cpu
                 else "no light-rate CPU costs (cpu_cost did not run)" if curve
                 else "no CPU costs (cpu_cost did not run): the node counts are disk-bound only")
    if curve:
        cited.append(_cite("the CPU curve", "cpu_curve", values.get("cpu_curve_from"), values.get("cpu_curve_run")))
    if knee:
        cited.append(_cite("the knee", "knee", values.get("knee_from"), values.get("knee_run")))
    factors_line = factors_text(values)
    png = Path(run_dir) / "capacity" / "cpu_curve.png" if run_dir is not None else None
    plot = (figure(png, href="capacity/cpu_curve.png", caption="node CPU per send over the rate; red: the point "
                   "each tier was priced at", anchor="fig-capacity-cpu-curve")
            if png is not None and png.is_file() else "")
    return ("<h2>Capacity: disk- and CPU-bound nodes</h2>"
            + (f"<p><small>§7 factors of the measured rows: {esc(factors_line)}.</small></p>" if factors_line else "")
            + table(head, rows, css="wide")
            + f"<p><small>{esc(checks)}</small></p>"
            + "<p><small>From the capacity notebook (assumptions in its conclusion below: peak factor, operations "
              "per message, cores per node). Each derived figure carries the confidence of its inputs. Inputs: "
            + "; ".join(cited) + ". The model check predicted a run it did not see from the same constants (below)."
              "</small></p>" + plot + model_check(check))


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
                     f"<td class='num'>{_pct(low)} to {_pct(high)}</td>" if low is not None and low != high else "—",
                     target, "met" if c.get("met") else "<b>MISSED</b>"])
    if not rows:
        return ""
    where = f"{check.get('server')}, {check.get('nodes')} node(s) at RF {check.get('replication_factor')}"
    return (f"<h3>Model check: the constants against a run they did not see ({esc(where)})</h3>"
            + table(["quantity", "node / table", "predicted", "measured", "error", "error 95% CI", "target", ""],
                    rows, css="wide"))
