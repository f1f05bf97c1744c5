"""Proposed changes to appendix B, as a unified diff for review: never applied here.

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit

from lab.calibration.contract import CALIBRATION_FILE, CalibrationRun, write_calibration
from lab.calibration.recommendations import GUARDED_CONSTANTS
from lab.calibration.report import write_report
from lab.constants import APPENDIX_B_PATH, read_entries
from lab.errors import CalibrationError

DIFF_FILE = "appendix_b.diff"
REPO_RELATIVE_PATH = "lab/appendix_b.toml"


@dataclass(frozen=True, kw_only=True)
class Proposal:
    path: Path                       # the diff file
    changes: dict[str, tuple[Any, Any]]  # name -> (value in the file now, proposed)
    skipped: dict[str, str]          # name -> why a recommendation was left out
    diff: str

    @property
    def empty(self) -> bool:
        return not self.changes


def proposed_text(text: str, changes: dict[str, tuple[Any, str]]) -> str:
    """``text`` (the constants file) with each named constant's ``value`` replaced and its
    evidence as the line's comment; every other byte unchanged."""
    doc = tomlkit.parse(text)
    table = doc.get("constants", {})
    missing = sorted(n for n in changes if n not in table or "value" not in table[n])
    if missing:
        raise CalibrationError(f"constants file has no value for {', '.join(missing)}", constants=missing)
    for name, (value, evidence) in changes.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise CalibrationError(f"cannot write constant value {value!r} to TOML", constant=name, value=value)
        item = tomlkit.item(value)
        item.comment(" ".join(str(evidence).split()))  # one line: a TOML comment ends at the newline
        table[name]["value"] = item
    return tomlkit.dumps(doc)


def _diff(old: str, new: str, path: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=f"a/{path}", tofile=f"b/{path}"))


def check_proposable(mode: str, *, allow_quick: bool, run_id: str | None = None) -> None:
    """A quick run's numbers are a smoke test's: no proposal from them unless asked for."""
    if mode == "quick" and not allow_quick:
        raise CalibrationError(f"{'run ' + run_id + ' is' if run_id else 'this is'} a quick run: its numbers are a "
                               "smoke test of the pipeline (low confidence), not a calibration; propose from "
                               "`lab calibrate --full`, or add --allow-quick to write the diff anyway",
                               mode=mode, run_id=run_id)


def propose(run_dir: Path | str, *, constants_path: Path = APPENDIX_B_PATH, out: Path | None = None,
            allow_quick: bool = False) -> Proposal:
    """Write the diff of the constants file that the run recommends (a quick run: only with
    ``allow_quick``, and the diff's header says so)."""
    run_dir = Path(run_dir)
    cal_path = run_dir / "calibration.json"
    if not cal_path.is_file():
        raise CalibrationError(f"{cal_path} does not exist: not a calibration run folder", run_dir=str(run_dir))
    cal = CalibrationRun.from_file(cal_path)
    check_proposable(cal.mode, allow_quick=allow_quick, run_id=cal.run_id)
    entries = read_entries(constants_path)
    changes: dict[str, tuple[Any, str]] = {}
    before: dict[str, tuple[Any, Any]] = {}
    skipped: dict[str, str] = {}
    for name, c in sorted(cal.constants.items()):
        if name not in entries or c.recommended is None or c.recommended == entries[name].value:
            continue
        now = entries[name].value
        if name in GUARDED_CONSTANTS:  # whatever the run says, and even if the file moved
            skipped[name] = "guarded: immutable for existing tables (§27.2.4)"
            continue
        if c.measured is None:  # the file moved, but this run measured nothing to move it back
            skipped[name] = "not measured in this run"
            continue
        evidence = c.evidence
        if c.current != now:  # the file moved since the run: the run's evidence still names the value
            evidence = f"{evidence} [run saw {c.current}, file has {now}]"
        changes[name] = (c.recommended, f"{evidence} [confidence {c.confidence}, {cal.mode} parameters; was {now}]")
        before[name] = (now, c.recommended)
    text = Path(constants_path).read_text()
    body = _diff(text, proposed_text(text, changes), REPO_RELATIVE_PATH) if changes else ""
    header = (f"Proposed appendix B change from calibration run {cal.run_id} (mode {cal.mode}).\n"
              "Review, then from the repository root: git apply --check <this file> && git apply <this file>\n")
    if cal.mode == "quick":
        header += ("QUICK RUN (written with --allow-quick): a smoke test's numbers, low confidence; "
                   "do not apply without a full run.\n")
    for name, c in sorted(cal.constants.items()):
        if c.inconclusive:
            why = c.inconclusive_reason or "inconclusive (the two halves of the run disagree)"
            header += f"Not proposed: {name}: {why}\n"
    for name, why in skipped.items():
        header += f"Not proposed: {name} -> {cal.constants[name].recommended}: {why}\n"
    if not changes:
        header += "No constant changes: every recommendation equals the value in the file.\n"
    path = out or run_dir / DIFF_FILE
    path.write_text(header + "\n" + body if body else header)
    return Proposal(path=path, changes=before, skipped=skipped, diff=body)


def propose_from(run_dir: Path | str, *, constants_path: Path = APPENDIX_B_PATH, allow_quick: bool = False) -> Path:
    """``appendix_b.diff`` for an existing run (the report is re-rendered to link it)."""

    run_dir = Path(run_dir)
    proposal = propose(run_dir, constants_path=constants_path, allow_quick=allow_quick)
    cal = write_calibration(run_dir, CalibrationRun.from_file(run_dir / CALIBRATION_FILE).replace(
        proposal=proposal.path.name))
    write_report(cal.to_json(), run_dir)
    return proposal.path
