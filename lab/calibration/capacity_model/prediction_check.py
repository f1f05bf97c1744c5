"""How a prediction of the capacity model is judged against what was measured, and the model
check's conclusion in words.

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

TARGETS: Mapping[str, float] = {"disk": 0.05, "cpu": 0.20, "sstables": 0.0}


@dataclass(frozen=True, kw_only=True)
class Check:
    """One quantity, predicted and measured (module docstring)."""

    quantity: str                 # disk | cpu | sstables
    scope: str                    # a node's address, or "cluster"
    table: str | None
    predicted: float | None
    measured: float
    unit: str
    predicted_low: float | None = None
    predicted_high: float | None = None
    measured_low: float | None = None
    measured_high: float | None = None
    note: str = ""
    rows: int | None = None       # disk: the row copies predicted (per-row input error = difference / rows)

    @property
    def target(self) -> float:
        return TARGETS[self.quantity]

    @property
    def error(self) -> float | None:
        if self.predicted is None or not self.measured:
            return None
        return self.predicted / self.measured - 1

    @property
    def error_interval(self) -> tuple[float | None, float | None]:
        if self.predicted is None or not self.measured:
            return None, None
        pl = self.predicted if self.predicted_low is None else self.predicted_low
        ph = self.predicted if self.predicted_high is None else self.predicted_high
        ml = self.measured if self.measured_low is None else self.measured_low
        mh = self.measured if self.measured_high is None else self.measured_high
        low = pl / mh - 1 if mh > 0 else None
        high = ph / ml - 1 if ml > 0 else None
        if low is not None and high is not None and low == high:
            return None, None  # no interval on either side (one round): a zero-width "95% CI" says nothing
        return low, high

    @property
    def met(self) -> bool | None:
        if self.predicted is None:
            return None
        if self.quantity == "sstables":
            return round(self.predicted) == round(self.measured)
        return self.error is not None and abs(self.error) <= self.target

    @property
    def per_row_error(self) -> float | None:
        """Disk: (predicted - measured) / row copies, bytes: how far the per-row input was off."""
        if self.predicted is None or not self.rows:
            return None
        return (self.predicted - self.measured) / self.rows

    def row(self) -> dict[str, Any]:
        low, high = self.error_interval
        return {**dataclasses.asdict(self), "error": self.error, "error_ci_low": low, "error_ci_high": high,
                "target": self.target, "met": self.met}


def disk_checks(predicted: pd.DataFrame, measured: Mapping[tuple[str, str], int]) -> list[Check]:
    """Per (node, table), per node (tables summed) and for the cluster: predicted against the
    bytes read from the nodes. A table without a prediction is left out of the sums (said in
    the note) so the totals compare like with like."""
    checks = []
    by = {(r.node, r.table): r for r in predicted.itertuples()}
    for (node, table), m in sorted(measured.items()):
        r = by.get((node, table))
        checks.append(Check(quantity="disk", scope=node, table=table, predicted=None if r is None else r.predicted,
                            predicted_low=None if r is None else _num(r.predicted_low),
                            predicted_high=None if r is None else _num(r.predicted_high), measured=float(m), unit="B",
                            note="no input for this table" if r is None else r.input,
                            rows=None if r is None else int(r.rows)))
    for scope in sorted({c.scope for c in checks}) + ["cluster"]:
        part = [c for c in checks if c.predicted is not None and (scope == "cluster" or c.scope == scope)
                and c.table is not None]
        if not part:
            continue
        checks.append(Check(quantity="disk", scope=scope, table=None, predicted=sum(c.predicted for c in part),
                            predicted_low=_sum_or_none([c.predicted_low or c.predicted for c in part]),
                            predicted_high=_sum_or_none([c.predicted_high or c.predicted for c in part]),
                            measured=float(sum(c.measured for c in part)), unit="B",
                            note=f"tables {', '.join(sorted({c.table for c in part}))}",
                            rows=sum(c.rows or 0 for c in part)))
    return checks


def table_totals(checks: list[Check] | tuple[Check, ...]) -> list[Check]:
    """Per table, its (node, table) disk checks summed over the nodes (scope "cluster"): what
    each table's input predicted for the whole cluster, with the row copies it predicted for
    (:meth:`Check.per_row_error`)."""
    out = []
    for table in dict.fromkeys(c.table for c in checks if c.quantity == "disk" and c.table is not None
                               and c.predicted is not None):
        part = [c for c in checks if c.quantity == "disk" and c.table == table and c.predicted is not None]
        out.append(Check(quantity="disk", scope="cluster", table=table, predicted=sum(c.predicted for c in part),
                         predicted_low=_sum_or_none([c.predicted_low for c in part]),
                         predicted_high=_sum_or_none([c.predicted_high for c in part]),
                         measured=float(sum(c.measured for c in part)), unit="B", note=part[0].note,
                         rows=sum(c.rows or 0 for c in part) or None))
    return out


def _num(v: Any) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def _sum_or_none(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else float(sum(values))



# ---- in words ---------------------------------------------------------------------------------
QUANTITY_NAMES = {"disk": "disk", "cpu": "CPU", "sstables": "SSTables"}
ROW_INPUTS = {"message_record": "the row model's bytes per row", "conversation_head": "its bytes per conversation"}


def _pct(x: float | None) -> str:
    return "n/a" if x is None or x != x else f"{100 * x:+.1f}%"


def _verdict(c: Check) -> str:
    low, high = c.error_interval
    ci = f" (95% CI {_pct(low)} to {_pct(high)})" if low is not None and high is not None and low != high else ""
    target = "exact" if c.quantity == "sstables" else f"±{100 * c.target:g}%"
    return f"error {_pct(c.error)}{ci}, target {target}: **{'met' if c.met else 'MISSED'}**"


def input_off(c: Check) -> str:
    """``its per-row input is ~22 B low``: a table's miss in bytes per row copy (disk)."""
    per_row = c.per_row_error
    if per_row is None:
        return ""
    what = ROW_INPUTS.get(c.table or "", "its per-row input")
    return f": {what} is ~{abs(per_row):,.0f} B {'low' if per_row < 0 else 'high'}"


def missed_under(checks: tuple[Check, ...] | list[Check], quantity: str) -> list[Check]:
    """The checks under a quantity's headline that missed: disk per table (nodes summed) and per
    node (tables summed); CPU per node; SSTables per node and table."""
    mine = [c for c in checks if c.quantity == quantity and c.met is False]
    if quantity == "disk":
        return [c for c in table_totals(checks) if c.met is False] + [c for c in mine if c.scope != "cluster"
                                                                      and c.table is None]
    if quantity == "cpu":
        return [c for c in mine if c.scope != "cluster"]
    return mine


def quantity_verdict(result: Any, quantity: str) -> str | None:
    """``disk: met (-1.1%, target ±5%); per table: `client_dedup` missed (-15.4%): ...``."""
    head = result.headline(quantity)
    if head is None:
        return None
    name = QUANTITY_NAMES[quantity]
    missed = missed_under(result.checks, quantity)
    if quantity == "sstables":
        return (f"{name}: every count exact" if not missed else f"{name}: **{len(missed)} count(s) MISSED** ("
                + ", ".join(f"{c.scope} `{c.table}` {c.measured:.0f}, predicted {c.predicted:.0f}" for c in missed)
                + ")")
    text = f"{name}: {'met' if head.met else '**MISSED**'} ({_pct(head.error)}, target ±{100 * head.target:g}%)"
    tables = [c for c in missed if c.table is not None]
    nodes = [c for c in missed if c.table is None]
    if tables:
        text += "; per table: " + ", ".join(f"`{c.table}` missed ({_pct(c.error)}){input_off(c)}" for c in tables)
    if nodes:
        text += "; per node: " + ", ".join(f"{c.scope} missed ({_pct(c.error)})" for c in nodes)
    return text


def targets_line(result: Any) -> str:
    """The conclusion's last line: each quantity's headline and what missed under it."""
    verdicts = [v for q in QUANTITY_NAMES if (v := quantity_verdict(result, q)) is not None]
    if not verdicts:
        return "Nothing was checked."
    clean = all(result.headline(q) is None or (result.headline(q).met and not missed_under(result.checks, q))
                for q in QUANTITY_NAMES)
    return ("All targets met: " if clean else "Targets: ") + "; ".join(verdicts) + "."


def _cpu_text(result: Any, cpu: Check) -> str:
    p, load = result.params, result.load
    bound = load.get("loader_bound_rounds") or []
    workers = load.get("workers")
    used = p.cpu_rounds - len(bound)
    text = (f"**CPU** under a fixed-rate mix ({', '.join(f'{op} {r:g}/s' for op, r in p.rates().items())}; "
            f"achieved {load.get('achieved_rate', 0):.1f} of {load.get('requested_rate', 0):.1f} ops/s: "
            f"{load.get('verdict')}"
            + (f"; {workers} worker threads ({load.get('workers_rule')})" if workers else "") + "), "
            + (f"{used} of {p.cpu_rounds} windows ({len(bound)} loader-bound: this process, not the cluster, "
               "set their pace; left out)" if bound else f"{p.cpu_rounds} windows")
            + f" of {p.cpu_window_seconds:g} s net of the idle rate: "
            f"predicted {cpu.predicted:.2f} CPU s, measured {cpu.measured:.2f} CPU s (cluster): {_verdict(cpu)}. "
            + "Per node: " + "; ".join(f"{c.scope} {_pct(c.error)}" for c in result.checks
                                      if c.quantity == "cpu" and c.scope != "cluster") + ".")
    light = result.light_rates()["model_check_cpu_light_rates_error"] if result.inputs.cpu_curve is not None else None
    if light is not None:
        text += (" Priced on the CPU curve at the load the mix put on each node (the operations weighed against "
                 f"each other by cpu_cost's costs); each at cpu_cost's own rate it would have been {_pct(light)}.")
    elif result.inputs.cpu_curve_note:
        text += f" Priced at cpu_cost's rates: no CPU curve ({result.inputs.cpu_curve_note})."
    d = result.cpu_diagnosis
    if len(d) and d.difference_seconds.notna().any():
        top = d.iloc[0]
        text += (f" Diagnosis (each operation's cost measured here): `{top.op}` was furthest off: at cpu_cost's rate "
                 f"{top.predicted_seconds:.2f} CPU s for its {top.ops} calls, {top.local_seconds:.2f} s at its cost "
                 f"here ({_pct(top.relative)}).")
    return text


def _disk_text(result: Any) -> str:
    p = result.params
    head = result.headline("disk")
    totals = table_totals(result.checks)
    text = (f"**Disk** after {result.sends:,} sends of `{p.check_mix}` (never measured by the b_row run) "
            f"through the full write path, flushed: predicted {head.predicted / 1e6:,.2f} MB, measured "
            f"{head.measured / 1e6:,.2f} MB on the nodes' disks ({head.note}): {_verdict(head)}. "
            if head is not None else "**Disk**: ")
    text += "Per table: " + "; ".join(f"`{c.table}` {_pct(c.error)}" for c in totals) + "."
    worst = max(totals, key=lambda c: abs(c.predicted - c.measured), default=None)
    if head is not None and not head.met and worst is not None:
        text += (f" The input furthest off: `{worst.table}` (predicted {worst.predicted / 1e6:,.2f} MB, measured "
                 f"{worst.measured / 1e6:,.2f} MB{input_off(worst)}).")
    return text


def conclusion(result: Any) -> str:
    """The model check in words: where it ran, each part, and the targets line."""
    p = result.params
    where = (f"{result.server}, {result.nodes} node(s) at RF {result.replication_factor}"
             + (" (a single node: the disk and CPU parts at RF 1; `lab node start --nodes 3` for RF 3)"
                if result.nodes == 1 else ""))
    missing = result.inputs.missing()
    lines = [f"**Model check** on {where}, predicting from the constants of calibration run `{result.inputs.source}`"
             + (f" (missing: {', '.join(missing)})" if missing else "") + "."]
    for part, why in result.skipped.items():
        lines.append(f"**{part}**: not checked: {why}.")
    if any(c.quantity == "disk" for c in result.checks):
        lines.append(_disk_text(result))
    cpu = result.headline("cpu")
    if cpu is not None:
        lines.append(_cpu_text(result, cpu))
    sst = [c for c in result.checks if c.quantity == "sstables"]
    if sst:
        off = [c for c in sst if not c.met]
        lines.append(f"**SSTables** after {p.sstable_days} simulated days (a flush per day): "
                     + "; ".join(f"{c.scope} `{c.table}` {c.measured:.0f} (predicted {c.predicted:.0f})" for c in sst)
                     + (": every count exact." if not off else
                        f": **{len(off)} count(s) differ from the window arithmetic**."))
    lines.append(targets_line(result))
    return "\n\n".join(lines)
