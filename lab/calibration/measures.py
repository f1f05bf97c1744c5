"""Which notebook measures which appendix-B constant, and how a measurement becomes a
recommendation with a confidence and an evidence line.

A notebook writes ``results/<run-id>/<notebook>/values.json``. Two ways lead from it to a
constant, the first winning:

1. the notebook states it itself under ``values["appendix_b"][<constant>]``: an object with
   ``measured`` and any of ``recommended``, ``ci_low``, ``ci_high``, ``confidence``,
   ``evidence``, ``figure`` (a file name in the notebook's folder);
2. a :class:`Measure` below names the value keys to read (``measured``, the interval, the
   notebook's own recommendation) and the rule that turns them into a recommendation.

Rules. ``interval``: keep the current value when it lies inside the measured 95 % interval,
else recommend the measured value rounded to the constant's precision. ``notebook``: the
notebook's recommendation (e.g. the IN-list size with the lowest per-row cost inside the p99
budget). ``report``: observed for the record, never a recommendation: the constant is a
policy or guarded, and the notebook measures its consequences (SSTable counts per TWCS window,
the size of a full partition), not the constant itself; ``measured`` stays null and the
evidence quotes the observed values.

``message_seq_bucket_width`` is guarded: it cannot change for existing tables (§27.2.4), so
its recommendation is always the current value; a different measured optimum is recorded as
``suggested_for_new_tables`` only.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from collections.abc import Mapping

from lab.constants import Constant

GUARDED_CONSTANTS = frozenset({"message_seq_bucket_width"})
NOT_MEASURED = "not measured in this run"
Rule = Literal["interval", "notebook", "report"]
# relative half-width of the 95 % interval under which a measurement counts as high/medium confidence
HIGH_CONFIDENCE_REL_HALF_WIDTH = 0.05
MEDIUM_CONFIDENCE_REL_HALF_WIDTH = 0.15


@dataclass(frozen=True, kw_only=True)
class Measure:
    constant: str
    notebook: str
    measured: str | None              # key in values.json (None: observed, not measured)
    rule: Rule
    ci: tuple[str, str] | None = None  # keys of the 95 % interval
    recommended: str | None = None     # key of the notebook's own recommendation (rule "notebook")
    figure: str | None = None          # stem of the PNG behind it (default: the notebook's first figure)
    what: str = ""                     # how the notebook measured it, for the evidence line
    observe: tuple[str, ...] = ()      # further value keys quoted in the evidence ({current} = the value now)


MEASURES: tuple[Measure, ...] = (
    Measure(constant="b_row_bytes", notebook="b_row", measured="b_row_bytes", rule="interval",
            ci=("b_row_ci_low_bytes", "b_row_ci_high_bytes"), figure="b_row",
            what="live disk bytes / rows after flush + major compaction, message_record, default compression"),
    Measure(constant="batch_read_in_list_limit", notebook="in_limit", measured="recommended_in_limit",
            rule="notebook", recommended="recommended_in_limit", figure="in_limit",
            what="IN size with the lowest per-row latency inside the p99 budget and the server limit",
            observe=("recommended_p99_ms", "recommended_per_row_us", "in{current}_p99_ms", "server_in_limit",
                     "p99_budget_ms")),
    Measure(constant="batch_read_range_min_density", notebook="grouped_reads", measured="recommended_range_min_density",
            rule="notebook", recommended="recommended_range_min_density", figure="grouped_reads",
            what="density of a group's seqs in their span where one range read costs the server (trace time) "
                 "as much as the IN lists it replaces, over a fully written partition",
            observe=("density_entries", "density100_range_server_us", "density100_in_server_us",
                     "density50_range_server_us", "density50_in_server_us")),
    Measure(constant="history_max_empty_bucket_scan", notebook="empty_buckets", measured="recommended_scan_limit",
            rule="notebook", recommended="recommended_scan_limit", figure="empty_buckets",
            what="smallest limit leaving the workload's seq holes scannable, at the measured cost per empty bucket",
            observe=("per_empty_bucket_ms", "worst_case_page_ms_at_recommended",
                     "workload_truncated_share_at_recommended", "workload_truncated_share_at_design")),
    Measure(constant="message_record_twcs_window_days", notebook="twcs_sstables", measured=None, rule="report",
            figure="twcs_sstables", what="SSTable counts over simulated days; the window is a policy, not measured",
            observe=("message_record_w{current}d_sstables", "message_record_w{current}d_predicted_sstables",
                     "message_record_w{current}d_steady_state_windows", "all_match_prediction")),
    Measure(constant="client_dedup_twcs_window_hours", notebook="twcs_sstables", measured=None, rule="report",
            figure="twcs_sstables", what="SSTable counts over simulated hours; the window is a policy, not measured",
            observe=("client_dedup_w{current}h_sstables", "client_dedup_w{current}h_predicted_sstables",
                     "client_dedup_w{current}h_steady_state_windows")),
    Measure(constant="message_seq_bucket_width", notebook="b_row", measured=None, rule="report", figure="b_row",
            what="guarded: fixed for existing tables; full-partition size at this width reported",
            observe=("partition_bytes_at_width", "design_partition_bytes")),
)


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) or math.isinf(x) else x


def round_like(value: float, current: float | int) -> float | int:
    """An int constant stays an int; a float keeps three significant digits."""
    if isinstance(current, int) and not isinstance(current, bool):
        return int(round(value))
    if value == 0:
        return 0.0
    digits = 2 - int(math.floor(math.log10(abs(value))))
    return round(value, max(digits, 0))


def confidence_of(measured: float | None, ci: tuple[float | None, float | None] | None, *,
                  quick: bool, stated: str | None = None) -> str:
    """``stated`` when the notebook gives one; else from the interval's relative half-width,
    capped at "low" in quick mode (shortest parameters: a smoke test, not a calibration)."""
    if stated:
        return str(stated)
    if measured is None:
        return "none"
    if quick:
        return "low"
    if ci is None or ci[0] is None or ci[1] is None:
        return "medium"
    rel = (ci[1] - ci[0]) / 2 / abs(measured) if measured else math.inf
    if rel <= HIGH_CONFIDENCE_REL_HALF_WIDTH:
        return "high"
    return "medium" if rel <= MEDIUM_CONFIDENCE_REL_HALF_WIDTH else "low"


def _fmt(value: Any) -> str:
    from lab.results.units import fmt  # the lab's one number formatting

    x = _num(value)
    return str(value) if x is None else fmt(int(x) if x.is_integer() else x)


def evidence_line(*, measured: Any, unit: str, ci: tuple[Any, Any] | None, notebook: str, run_id: str,
                  what: str = "") -> str:
    """``measured 412 B ± 9 (95% CI 403-421; b_row notebook, run X)``: the line a reviewer reads."""
    text = f"measured {_fmt(measured)} {unit}".rstrip()
    where = f"{notebook} notebook, run {run_id}"
    if ci and _num(ci[0]) is not None and _num(ci[1]) is not None:
        half = (_num(ci[1]) - _num(ci[0])) / 2
        text += f" ± {_fmt(half)} (95% CI {_fmt(ci[0])}-{_fmt(ci[1])}; {where})"
    else:
        text += f" ({where})"
    return text + (f": {what}" if what else "")


def _observed(m: Measure, values: Mapping[str, Any], current: Any) -> str:
    keys = [k.format(current=current) for k in m.observe]
    return ", ".join(f"{k}={_fmt(values[k])}" for k in keys if k in values and values[k] is not None)


def _figure(folder: Path | None, stem: str | None, run_dir: Path) -> str | None:
    """The figure's path relative to the run folder: ``stem.png`` if it exists, else the first PNG."""
    if folder is None or not folder.is_dir():
        return None
    candidates = [folder / f"{stem}.png"] if stem else []
    candidates += sorted(folder.glob("*.png"))
    for path in candidates:
        if path.is_file():
            return path.relative_to(run_dir).as_posix()
    return None


@dataclass(frozen=True, kw_only=True)
class ConstantAssessment:
    """``constants.<name>`` of calibration.json: one appendix-B constant after a run."""

    current: float | int
    measured: float | int | None
    recommended: float | int
    unit: str
    confidence: str                      # high | medium | low | none
    evidence: str
    figure: str | None                   # PNG path relative to the run folder
    notebook: str | None                 # the notebook that measured or observed it
    ci_low: float | None
    ci_high: float | None
    section: str
    doc: str
    guarded: bool
    changed: bool                        # recommended != current
    rule: Rule | None = None
    suggested_for_new_tables: float | int | None = None  # guarded constants only
    notebook_html: str | None = None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ConstantAssessment:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def assess(entries: Mapping[str, Constant], notebooks: Mapping[str, Mapping[str, Any]], *, run_dir: Path,
           run_id: str, quick: bool) -> dict[str, ConstantAssessment]:
    """``constants.<name>`` of calibration.json for every entry of the constants file.

    ``notebooks`` maps a notebook name to ``{"values": {...}, "dir": Path, ...}`` (the notebooks
    that succeeded). A constant no notebook measured keeps ``recommended = current``."""
    out: dict[str, ConstantAssessment] = {}
    for name, entry in entries.items():
        row: dict[str, Any] = {"current": entry.value, "measured": None, "recommended": entry.value,
                               "unit": entry.unit, "confidence": "none", "evidence": NOT_MEASURED,
                               "figure": None, "notebook": None, "ci_low": None, "ci_high": None,
                               "section": entry.section, "doc": entry.doc, "guarded": name in GUARDED_CONSTANTS,
                               "changed": False}
        ctx = {"run_dir": run_dir, "run_id": run_id, "quick": quick}
        if not _from_statement(row, entry, notebooks, ctx):
            for m in (m for m in MEASURES if m.constant == name):
                if _from_measure(row, entry, m, notebooks.get(m.notebook), ctx):
                    break
        out[name] = ConstantAssessment(**row)
    return out


def _from_statement(row: dict[str, Any], entry: Constant, notebooks: Mapping[str, Mapping[str, Any]],
                    ctx: dict[str, Any]) -> bool:
    """A notebook's own ``values["appendix_b"][<constant>]`` (wins over :data:`MEASURES`)."""
    for nb_name, nb in notebooks.items():
        stated = ((nb.get("values") or {}).get("appendix_b") or {}).get(entry.name)
        if isinstance(stated, Mapping) and _num(stated.get("measured")) is not None:
            _apply(row, entry, stated, notebook=nb_name, folder=nb.get("dir"),
                   rule="notebook" if "recommended" in stated else "interval",
                   what=str(stated.get("evidence", "")), figure_stem=stated.get("figure"), **ctx)
            return True
    return False


def _from_measure(row: dict[str, Any], entry: Constant, m: Measure, nb: Mapping[str, Any] | None,
                  ctx: dict[str, Any]) -> bool:
    """Fill ``row`` from one :class:`Measure`; False when its notebook did not run or record it."""
    values = (nb or {}).get("values") or {}
    folder = (nb or {}).get("dir")
    observed = _observed(m, values, entry.value)
    where = f"{m.notebook} notebook, run {ctx['run_id']}"
    if m.measured is None:  # observed, not measured
        if not observed:
            return False
        row.update({"notebook": m.notebook, "rule": m.rule, "evidence": f"observed in {where}: {m.what}; {observed}",
                    "figure": _figure(folder, m.figure, ctx["run_dir"])})
        return True
    if _num(values.get(m.measured)) is None:
        if m.measured not in values:
            return False
        # it ran and decided nothing (e.g. no IN size met the p99 budget)
        row.update({"notebook": m.notebook, "rule": m.rule, "figure": _figure(folder, m.figure, ctx["run_dir"]),
                    "evidence": f"{where} gave no value for {m.measured} ({m.what}); {observed or 'nothing observed'}"})
        return True
    stated = {"measured": values[m.measured],
              "ci_low": values.get(m.ci[0]) if m.ci else None, "ci_high": values.get(m.ci[1]) if m.ci else None,
              "recommended": values.get(m.recommended) if m.recommended else None}
    _apply(row, entry, stated, notebook=m.notebook, folder=folder, rule=m.rule,
           what=m.what + (f"; {observed}" if observed else ""), figure_stem=m.figure, **ctx)
    return True


def _apply(row: dict[str, Any], entry: Constant, stated: Mapping[str, Any], *, notebook: str, folder: Path | None,
           run_dir: Path, run_id: str, quick: bool, rule: Rule, what: str, figure_stem: str | None) -> None:
    measured = _num(stated.get("measured"))
    if measured is not None and measured.is_integer() and isinstance(entry.value, int):
        measured = int(measured)
    lo, hi = _num(stated.get("ci_low")), _num(stated.get("ci_high"))
    current = entry.value
    if rule == "interval":
        inside = lo is not None and hi is not None and lo <= float(current) <= hi
        recommended = current if inside or measured is None else round_like(measured, current)
    elif rule == "notebook":
        rec = _num(stated.get("recommended"))
        recommended = current if rec is None else round_like(rec, current)
    else:
        recommended = current
    if entry.name in GUARDED_CONSTANTS:
        if recommended != current:
            row["suggested_for_new_tables"] = recommended
        recommended = current
    row.update({
        "measured": measured, "ci_low": lo, "ci_high": hi, "recommended": recommended, "notebook": notebook,
        "confidence": confidence_of(measured, (lo, hi) if lo is not None else None, quick=quick,
                                    stated=stated.get("confidence")),
        "evidence": evidence_line(measured=measured, unit=entry.unit, ci=(lo, hi) if lo is not None else None,
                                  notebook=notebook, run_id=run_id, what=what),
        "figure": _figure(folder, figure_stem, run_dir), "rule": rule,
        "changed": recommended != current})
