"""Which notebook measures which appendix-B constant, and how a measurement becomes a
recommendation with a confidence and an evidence line.

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.calibration.registry import MEASURES, Measure, Rule
from lab.constants import Constant
from lab.results.units import fmt  # the lab's one number formatting

GUARDED_CONSTANTS = frozenset({"message_seq_bucket_width"})
NOT_MEASURED = "not measured in this run"
# relative half-width of the 95 % interval under which a measurement counts as high/medium confidence
# (when the notebook states no precision target of its own)
HIGH_CONFIDENCE_REL_HALF_WIDTH = 0.05
MEDIUM_CONFIDENCE_REL_HALF_WIDTH = 0.15
CONFIDENCE_LEVELS = ("high", "medium", "low", "inconclusive", "none")
CONFIDENCE_LEGEND: dict[str, tuple[str, str]] = {  # level -> (what it means, how to get there)
    "high": ("a full run reached the precision target stated in advance, and both halves of the run agree",
             "the level to change appendix B on"),
    "medium": ("a full run that ran out of its time budget before the target (see precision), interval "
               "within 15% of the value",
               "run `lab calibrate --full` again on a quieter machine, or raise the notebook's budget_seconds"),
    "low": ("a quick run (the shortest parameters: a smoke test of the pipeline), or a wide interval",
            "run `lab calibrate --full`"),
    "inconclusive": ("the first and the second half of the run recommend different values, or fewer than 90% of "
                     "bootstrap resamples choose the recommended value (by the sampling's end): the machine's load "
                     "changed, or the optimum is flat", "no number to change: the constant is kept; run --full "
                     "again when the machine is quiet"),
    "none": ("not measured in this run", "select its notebook (--notebooks)"),
}


def number(value: Any) -> float | None:
    """A finite float from a JSON value, or None (bools, text, NaN and infinities are no measurement)."""
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
                  quick: bool, stated: str | None = None, precision: Mapping[str, Any] | None = None,
                  halves_agree: bool | None = None, stable: bool | None = None) -> str:
    """``stated`` when the notebook gives one; else :data:`CONFIDENCE_LEGEND`'s rules: halves
    that disagree, or a choice too few resamples make (``stable`` False), are "inconclusive"; a
    quick run is "low" (shortest parameters: a smoke test, not a calibration); a full run is
    "high" when it reached its precision target, else by the interval's relative half-width."""
    if stated:
        return str(stated)
    if measured is None:
        return "none"
    if halves_agree is False or stable is False:
        return "inconclusive"
    if quick or (precision and precision.get("too_few_rounds")):
        return "low"  # a smoke test, or no interval at all (fewer rounds than an interval needs)
    if precision and precision.get("status") == "reached":
        return "high"
    if ci is None or ci[0] is None or ci[1] is None:
        return "medium"
    rel = (ci[1] - ci[0]) / 2 / abs(measured) if measured else math.inf
    if rel <= HIGH_CONFIDENCE_REL_HALF_WIDTH and not precision:
        return "high"
    return "medium" if rel <= MEDIUM_CONFIDENCE_REL_HALF_WIDTH else "low"


def _fmt(value: Any) -> str:
    x = number(value)
    return str(value) if x is None else fmt(int(x) if x.is_integer() else x)


def evidence_line(*, measured: Any, unit: str, ci: tuple[Any, Any] | None, notebook: str, run_id: str,
                  what: str = "") -> str:
    """``measured 412 B ± 9 (95% CI 403-421; b_row notebook, run X)``: the line a reviewer reads."""
    text = f"measured {_fmt(measured)} {unit}".rstrip()
    where = f"{notebook} notebook, run {run_id}"
    if ci and number(ci[0]) is not None and number(ci[1]) is not None:
        half = (number(ci[1]) - number(ci[0])) / 2
        text += f" ± {_fmt(half)} (95% CI {_fmt(ci[0])}-{_fmt(ci[1])}; {where})"
    else:
        text += f" ({where})"
    return text + (f": {what}" if what else "")


def observed_values(m: Measure, values: Mapping[str, Any], current: Any) -> dict[str, Any]:
    """The values a measure quotes as evidence, by key (``{current}`` filled in)."""
    keys = [k.format(current=current) for k in m.observe]
    return {k: values[k] for k in keys if k in values and values[k] is not None}


def _observed(m: Measure, values: Mapping[str, Any], current: Any) -> str:
    return ", ".join(f"{k}={_fmt(v)}" for k, v in observed_values(m, values, current).items())


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
    precision: Mapping[str, Any] | None = None   # lab.calibration.precision.Precision.to_json()
    halves: Mapping[str, Any] | None = None      # {"first", "second", "agree"}
    inconclusive: bool = False                   # halves disagree or the choice is unstable: recommended = current
    inconclusive_reason: str | None = None       # what made it inconclusive, in words
    stability: Mapping[str, Any] | None = None   # lab.calibration.stability.Stability.to_json()
    recommended_ci_low: float | None = None      # the recommendation's own interval (bootstrap)
    recommended_ci_high: float | None = None
    observed: Mapping[str, Any] | None = None    # the values quoted in the evidence, by key
    agreement: Mapping[str, Any] | None = None   # with the previous run (lab.calibration.agreement)

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
        if isinstance(stated, Mapping) and number(stated.get("measured")) is not None:
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
                    "figure": _figure(folder, m.figure, ctx["run_dir"]),
                    "observed": observed_values(m, values, entry.value)})
        return True
    if number(values.get(m.measured)) is None:
        if m.measured not in values:
            return False
        # it ran and decided nothing (e.g. no IN size met the p99 budget)
        row.update({"notebook": m.notebook, "rule": m.rule, "figure": _figure(folder, m.figure, ctx["run_dir"]),
                    "evidence": f"{where} gave no value for {m.measured} ({m.what}); {observed or 'nothing observed'}",
                    "observed": observed_values(m, values, entry.value)})
        return True
    stated = {"measured": values[m.measured],
              "ci_low": values.get(m.ci[0]) if m.ci else None, "ci_high": values.get(m.ci[1]) if m.ci else None,
              "recommended": values.get(m.recommended) if m.recommended else None,
              "precision": values.get(m.precision) if m.precision else None,
              "halves": values.get(m.halves) if m.halves else None,
              "stability": values.get(m.stability) if m.stability else None,
              "recommended_ci_low": values.get(m.rec_ci[0]) if m.rec_ci else None,
              "recommended_ci_high": values.get(m.rec_ci[1]) if m.rec_ci else None,
              "observed": observed_values(m, values, entry.value)}
    _apply(row, entry, stated, notebook=m.notebook, folder=folder, rule=m.rule,
           what=m.what + (f"; {observed}" if observed else ""), figure_stem=m.figure, **ctx)
    return True


def _apply(row: dict[str, Any], entry: Constant, stated: Mapping[str, Any], *, notebook: str, folder: Path | None,
           run_dir: Path, run_id: str, quick: bool, rule: Rule, what: str, figure_stem: str | None) -> None:
    measured = number(stated.get("measured"))
    if measured is not None and measured.is_integer() and isinstance(entry.value, int):
        measured = int(measured)
    lo, hi = number(stated.get("ci_low")), number(stated.get("ci_high"))
    current = entry.value
    if rule == "interval":
        if lo is None or hi is None:  # too few rounds for an interval: nothing to recommend from
            recommended = current
            if measured is not None:
                what += " [too few rounds for an interval: no recommendation]"
        else:
            inside = lo <= float(current) <= hi
            recommended = current if inside or measured is None else round_like(measured, current)
    elif rule == "notebook":
        rec = number(stated.get("recommended"))
        recommended = current if rec is None else round_like(rec, current)
    else:
        recommended = current
    halves = stated.get("halves") if isinstance(stated.get("halves"), Mapping) else None
    split = bool(halves) and not halves.get("agree", halves.get("first") == halves.get("second"))
    stability = stated.get("stability") if isinstance(stated.get("stability"), Mapping) else None
    chosen = stability is not None and stability.get("choice") is not None
    unstable = chosen and not stability.get("stable")
    reason = None
    if split:  # a number that changes between the halves of one run is not a recommendation
        reason = f"inconclusive: first half {_fmt(halves.get('first'))}, second half {_fmt(halves.get('second'))}"
    elif unstable:  # nor is a choice too few resamples of the run make
        reason = str(stability.get("text") or "inconclusive: the choice is not stable")
    inconclusive = split or unstable
    if inconclusive:
        what += f" [{reason}]"
        recommended = current
    if entry.name in GUARDED_CONSTANTS:
        if recommended != current:
            row["suggested_for_new_tables"] = recommended
        recommended = current
    precision = stated.get("precision") if isinstance(stated.get("precision"), Mapping) else None
    row.update({
        "measured": measured, "ci_low": lo, "ci_high": hi, "recommended": recommended, "notebook": notebook,
        "confidence": confidence_of(measured, (lo, hi) if lo is not None else None, quick=quick,
                                    stated=stated.get("confidence"), precision=precision,
                                    halves_agree=None if not halves else not split,
                                    stable=not unstable if chosen else None),
        "evidence": evidence_line(measured=measured, unit=entry.unit, ci=(lo, hi) if lo is not None else None,
                                  notebook=notebook, run_id=run_id, what=what),
        "figure": _figure(folder, figure_stem, run_dir), "rule": rule,
        "changed": recommended != current, "precision": dict(precision) if precision else None,
        "halves": dict(halves) if halves else None, "inconclusive": inconclusive, "inconclusive_reason": reason,
        "stability": dict(stability) if stability else None,
        "recommended_ci_low": number(stated.get("recommended_ci_low")),
        "recommended_ci_high": number(stated.get("recommended_ci_high")),
        "observed": dict(stated.get("observed") or {}) or None})
