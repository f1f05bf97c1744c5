"""The capacity notebook's conclusion in words: the sizing per tier, §7's factors, your mix, the
CPU side (light-rate costs, the curve, the knee) and the compliance_hold what-if.

More: docs/calibration-internals.md.
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from lab.calibration.capacity_model.cpu_sizing import DEFAULT_OPERATIONS_PER_MESSAGE
from lab.calibration.capacity_model.curve_pricing import NODES_DISAGREE
from lab.calibration.capacity_model.aging import AGED, aged_lines
from lab.calibration.capacity_model.hold_apart import HOLD_APART, what_if_lines
from lab.calibration.capacity_model.knee_pricing import knee_lines
from lab.results.html import md_code, md_text

Result = Any  # lab.calibration.experiments.capacity.Result: not imported, capacity imports this module


def _conf(level: str | None) -> str:
    return f" ({level} confidence)" if level else ""


def conclusion(result: Result) -> str:
    s = result.sizing
    design = s[s.source == "design"].iloc[0]
    lines = [f"**Design starter tier** ({design.messages_per_day:,.0f} messages/day, b_row {result.design_b_row_bytes:,.0f} B, "
             f"space amp {design.lsm_space_amp}, RF {design.replication_factor}, {design.retention_days:.0f} days): "
             f"{design.resident_tb:.1f} TB resident (the design's 15.8 TB)."]
    if result.b_row_measured_bytes:
        m = s[s.source == "measured"].iloc[0]
        at = result.b_row_located
        where = (f"the b_row run {md_text(at.run_id())}, {md_text(at.how)}" if at is not None and at.how != "this run"
                 else "the b_row notebook of this run" if at is not None else md_text(result.b_row_source))
        lines.append(f"**With the measured b_row** ({result.b_row_measured_bytes:,.0f} B"
                     f"{', ' + result.b_row_confidence + ' confidence' if result.b_row_confidence else ''}, "
                     f"from {where}): {m.resident_tb:.1f} TB, {m.resident_tb / design.resident_tb:.2f}x the estimate; "
                     f"one full partition {m.partition_bytes / 1e6:.2f} MB vs {design.partition_bytes / 1e6:.2f} MB.")
    else:
        lines.append("No measured b_row: no b_row run in this run folder or beside it; run the b_row notebook first "
                     "(or pass `b_row_bytes`).")
    text = "\n\n".join(lines)
    if result.my_mix is not None:
        text += "\n\n" + mix_lines(result)
    use = result.primary()
    rows = [f"- {r.messages_per_day:,.0f} messages/day: {r.resident_tb:.1f} TB over **{r.nodes_needed} nodes** "
            f"({r.disk_bytes_per_node / 1e12:.2f} TB each on {result.params.usable_disk_bytes_per_node / 1e12:.2f} TB "
            f"disks at <= {result.params.target_utilization:.0%}), {r.partitions_per_node:,.0f} partitions and "
            f"{r.message_record_sstables_per_node} message_record SSTables per node after a year of 7-day TWCS windows."
            for r in s[s.source == use].itertuples()]
    conf = (f", {result.b_row_confidence} confidence" if result.b_row_confidence else "") if use == "measured" \
        else ": an estimate"
    text += f"\n\nProduction sizing ({use} b_row{conf}):\n\n" + "\n".join(rows)
    return text + factor_lines(result) + hold_apart_lines(result) + aged_table_lines(result) + cpu_lines(result)


def factor_lines(result: Result) -> str:
    """Which factors of §7 this run measured and which it took from appendix B."""
    f = result.factors()
    parts = [f"{name} {v['value']:,.4g} ({v['source']})" for name, v in f.items()
             if name != "cpu_ms_per_op" and v["value"] is not None]
    note = f" lsm_space_amp is appendix B's: {f['lsm_space_amp']['note']}." if f["lsm_space_amp"]["note"] else ""
    return "\n\n**Factors of §7** in the measured rows: " + "; ".join(parts) + "." + note


def mix_lines(result: Result) -> str:
    """Your mix: its price with the interval and where the row model came from, its nodes per tier."""
    mix, at = result.my_mix, result.my_mix_located
    comp = ", ".join(f"{k.replace('_bytes', '')} {v:,.0f} B" for k, v in mix.composition.items())
    model = "this run's b_row" if at.how == "this run" else f"the b_row run {md_text(at.run_id())} ({md_text(at.how)})"
    sample = f" over {mix.rows:,} generated messages" if mix.rows else ""
    out = [f"**Your mix {md_code(mix.name)}** ({md_text(mix.source)}; per message {comp}{sample}): b_row **{mix.b_row_bytes:,.0f} B** "
           f"(95% CI {mix.ci_low:,.0f}-{mix.ci_high:,.0f}"
           f"{'; ' + result.my_mix_confidence + ' confidence' if result.my_mix_confidence else ''}) by the row model of "
           f"{model}:", ""]
    s = result.sizing
    cpu = result.cpu[result.cpu.b_row_source == "my_mix"] if result.cpu is not None else None
    for r in s[s.source == "my_mix"].itertuples():
        line = f"- {r.messages_per_day:,.0f} messages/day: {r.resident_tb:.1f} TB over **{r.nodes_needed} nodes** (disk)"
        if cpu is not None and len(cpu):
            c = cpu[cpu.messages_per_day == r.messages_per_day].iloc[0]
            line += f"; with the CPU side **{c.nodes} nodes**, {c.binding.upper()} binds"
        out.append(line + ".")
    return "\n".join(out)


def _cpu_where(result: Result) -> str:
    at = result.cpu_located
    if at is None or at.how == "given":
        return md_text(result.cpu_source)
    return "the cpu_cost notebook of this run" if at.how == "this run" else f"{md_text(at.run_id())} ({md_text(at.how)})"


def cpu_lines(result: Result) -> str:
    if result.cpu is None:
        why = md_text(result.cpu_located.how) if result.cpu_located is not None else "none given (`cpu_values`)"
        return (f"\n\n**CPU per operation**: {why}: no light-rate CPU side; run the cpu_cost notebook for it."
                + curve_lines(result) + _knee_text(result))
    p = result.params
    mix = ", ".join(f"{op} {n:g}" for op, n in (p.operations_per_message or DEFAULT_OPERATIONS_PER_MESSAGE).items())
    out = [f"\n\n**CPU side** (server CPU per operation from {_cpu_where(result)}; per message sent: {mix}; peak "
           f"{p.peak_factor:g}x the daily mean; {p.cores_per_node} cores per node at <= {p.target_cpu_utilization:.0%}; "
           "writes on RF replicas, reads on a quorum):", ""]
    for r in result.cpu[result.cpu.b_row_source != "my_mix"].itertuples():
        ci = (f" (95% CI {r.server_cores_low:,.1f}-{r.server_cores_high:,.1f}, nodes {r.nodes_cpu_low}-{r.nodes_cpu_high}"
              f"{'; ' + result.cpu_confidence + ' confidence' if result.cpu_confidence else ''})"
              if r.server_cores_low is not None else _conf(result.cpu_confidence))
        out.append(f"- {r.messages_per_day:,.0f} messages/day: peak {r.peak_messages_per_second:,.0f} sends/s, "
                   f"{r.server_cores:,.1f} server cores{ci} -> **{r.nodes_cpu} CPU-bound nodes** vs "
                   f"**{r.nodes_disk} disk-bound**: {r.binding.upper()} binds ({r.nodes} nodes). ScyllaDB's ~12.5K "
                   f"simple ops/s per core would give {r.rule_of_thumb_cores:,.1f} cores for the same "
                   f"{r.peak_requests_per_second:,.0f} CQL requests/s.")
    if result.cpu_unresolved:
        out.append(f"\n**Not resolved**: the CPU cost of {', '.join(result.cpu_unresolved)} did not rise above the "
                   "shared node's background in the cpu_cost run (its interval reaches 0): counted at its median, "
                   "at least 0, until a quieter run.")
    out.append("\nWhat these counts are: each operation priced at the light fixed rate cpu_cost ran it at, where the "
               "node burns more CPU per operation than under load, on the lab's machine (a JVM sharing its cores with "
               "the load generator), not on production hardware: an upper estimate of the CPU-bound nodes.")
    return "\n".join(out) + curve_lines(result) + _knee_text(result)


def curve_lines(result: Result) -> str:
    """The CPU-bound nodes priced on the CPU curve, per tier, beside the light-rate counts."""
    rows = result.cpu_curve_sizing
    if rows is None:
        at = result.cpu_curve_located
        why = ("no usable point in it" if result.cpu_curve is not None else md_text(at.how) if at is not None
               else "none given (`cpu_curve_values`)")
        return f"\n\n**CPU curve**: {why}; run the cpu_curve notebook to price the CPU side at the rate it runs at."
    at = result.cpu_curve_located
    where = "the cpu_curve notebook of this run" if at.how == "this run" else f"{md_text(at.run_id())} ({md_text(at.how)})"
    out = [f"\n\n**CPU side on the curve** (node CPU per send of the whole mix over the rate, from {where}; each "
           "tier priced at the cost for the per-node rate its node count implies, per core scaled from the measured "
           f"node's {result.cpu_curve.node_cores} cores; {result.curve_factor:.2f} replica copies per send):", ""]
    for r in rows.itertuples():
        light = ("" if r.nodes_cpu_light is None or pd.isna(r.nodes_cpu_light)
                 else f" vs **{int(r.nodes_cpu_light)}** at the light rates" + (
                     f" (**more than {NODES_DISAGREE:.0%} apart**)" if r.nodes_cpu_disagree else ""))
        out.append(f"- {r.messages_per_day:,.0f} messages/day: peak {r.peak_sends_per_second:,.0f} sends/s -> "
                   f"**{r.nodes_cpu_curve} CPU-bound nodes**{light}; each node carrying {r.curve_sends_per_second_per_node:,.0f} "
                   f"sends/s of replica work ({r.curve_measured_rate:,.0f}/s on the curve's node), {r.curve_ms_per_send:.2f} "
                   f"ms per send ({r.curve_where}), {r.curve_server_cores:,.1f} server cores.")
    if (rows.curve_where == "above the measured range").any():
        out.append("\nAbove the curve's highest usable rate the cost there is used: the node's CPU per send falls as "
                   "the rate rises, so these counts are an upper estimate there.")
    return "\n".join(out)


def _knee_text(result: Result) -> str:
    at = result.knee_located
    if result.knee_sizing is None:
        why = ("none given (`knee_values`)" if at is None else md_text(at.how) if at.path is None
               else f"{md_text(at.run_id())} found no knee")
        return knee_lines(None, [], where=why, headroom=result.params.target_cpu_utilization,
                          cores_per_node=result.params.cores_per_node)
    where = "the knee notebook of this run" if at.how == "this run" else f"{md_text(at.run_id())} ({md_text(at.how)})"
    return knee_lines(result.knee, result.knee_sizing.to_dict("records"), where=where,
                      headroom=result.params.target_cpu_utilization, cores_per_node=result.params.cores_per_node)


def aged_table_lines(result: Result) -> str:
    """The what-if: the same tiers at the factor message_record reaches at the projected age."""
    if result.aged is None:
        return ""
    s = result.sizing
    return aged_lines(result.aged, s[s.source == AGED].to_dict("records"), s[s.source == result.primary()].to_dict("records"),
                      one_table_amp=result.lsm_space_amp)


def hold_apart_lines(result: Result) -> str:
    """The what-if: the same tiers with compliance_hold's rows in a table of their own."""
    if result.hold_apart is None:
        return ""
    s = result.sizing
    return what_if_lines(result.hold_apart, s[s.source == HOLD_APART].to_dict("records"),
                         s[s.source == result.primary()].to_dict("records"), one_table_amp=result.lsm_space_amp,
                         one_table_note=md_text(result.lsm_space_amp_note))
