"""Proposed changes to appendix B, as a unified diff for review: never applied here.

``propose(run_dir)`` reads the run's ``calibration.json`` and writes
``<run_dir>/appendix_b.diff``: for each constant whose recommendation differs from the value
in the constants file *now*, the ``value = ...`` line is replaced and a TOML comment with the
evidence goes above it::

    -value = 600
    +# measured 412 B ± 9 (95% CI 403-421; b_row notebook, run 2026...): ...
    +value = 412

The typed defaults of :class:`lab.constants.Constants` (what ``Constants()`` gives the modules
that take appendix B as default arguments) change in the same diff, so the file and the defaults
never disagree (``tests/test_constants.py`` checks they agree).

The paths are ``a/lab/...`` / ``b/lab/...``, so from the repository root ``git apply --check``
reviews it and ``git apply`` applies it. Guarded constants (``message_seq_bucket_width``) are
never part of a proposal, whatever the run says.
"""
from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.constants import APPENDIX_B_PATH, read_entries
from lab.errors import CalibrationError
from lab.calibration.measures import GUARDED_CONSTANTS

DIFF_FILE = "appendix_b.diff"
REPO_RELATIVE_PATH = "lab/appendix_b.toml"
DEFAULTS_PATH = Path(__file__).resolve().parents[1] / "constants.py"
DEFAULTS_RELATIVE_PATH = "lab/constants.py"
_SECTION = re.compile(r"^\[constants\.([A-Za-z0-9_]+)\]\s*$")
_VALUE = re.compile(r"^value\s*=\s*(.+?)\s*$")


@dataclass(frozen=True, kw_only=True)
class Proposal:
    path: Path                       # the diff file
    changes: dict[str, tuple[Any, Any]]  # name -> (value in the file now, proposed)
    skipped: dict[str, str]          # name -> why a recommendation was left out
    diff: str

    @property
    def empty(self) -> bool:
        return not self.changes


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        raise CalibrationError(f"boolean constant value {value!r} is not supported")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    raise CalibrationError(f"cannot write constant value {value!r} to TOML", value=value)


def proposed_text(text: str, changes: dict[str, tuple[Any, str]]) -> str:
    """``text`` (the constants file) with each named constant's value line replaced by
    ``# <evidence>`` + ``value = <new>``; every other byte unchanged."""
    out: list[str] = []
    section = None
    seen = set()
    for line in text.splitlines(keepends=True):
        m = _SECTION.match(line.rstrip("\n"))
        if m:
            section = m.group(1)
        elif line.startswith("["):
            section = None
        vm = _VALUE.match(line.rstrip("\n"))
        if vm and section in changes and section not in seen:
            value, evidence = changes[section]
            newline = "\n" if line.endswith("\n") else ""
            out.append(f"# {evidence}\n".replace("\n", " ").rstrip() + "\n")
            out.append(f"value = {_toml_value(value)}{newline}")
            seen.add(section)
            continue
        out.append(line)
    missing = set(changes) - seen
    if missing:
        raise CalibrationError(f"constants file has no value line for {', '.join(sorted(missing))}",
                               constants=sorted(missing))
    return "".join(out)


def proposed_defaults(text: str, values: dict[str, Any]) -> str:
    """``lab/constants.py`` with the ``name: type = value`` default line of each constant replaced."""
    out, seen = [], set()
    for line in text.splitlines(keepends=True):
        m = re.match(r"^(    ([a-z0-9_]+): (?:int|float) = )([^#\n]+?)(\s*(#.*)?)$", line.rstrip("\n"))
        if m and m.group(2) in values and m.group(2) not in seen:
            newline = "\n" if line.endswith("\n") else ""
            out.append(f"{m.group(1)}{_toml_value(values[m.group(2)])}{m.group(4)}{newline}")
            seen.add(m.group(2))
            continue
        out.append(line)
    missing = set(values) - seen
    if missing:
        raise CalibrationError(f"lab/constants.py has no default for {', '.join(sorted(missing))}",
                               constants=sorted(missing))
    return "".join(out)


def _diff(old: str, new: str, path: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=f"a/{path}", tofile=f"b/{path}"))


def propose(run_dir: Path | str, *, constants_path: Path = APPENDIX_B_PATH, out: Path | None = None,
            defaults_path: Path | None = DEFAULTS_PATH) -> Proposal:
    """Write the diff; ``defaults_path=None`` leaves ``lab/constants.py`` out of it."""
    run_dir = Path(run_dir)
    cal_path = run_dir / "calibration.json"
    if not cal_path.is_file():
        raise CalibrationError(f"{cal_path} does not exist: not a calibration run folder", run_dir=str(run_dir))
    cal = json.loads(cal_path.read_text())
    run_id = cal.get("run_id", run_dir.name)
    entries = read_entries(constants_path)
    changes: dict[str, tuple[Any, str]] = {}
    before: dict[str, tuple[Any, Any]] = {}
    skipped: dict[str, str] = {}
    for name, c in sorted(cal.get("constants", {}).items()):
        rec = c.get("recommended")
        if name not in entries or rec is None or rec == entries[name].value:
            continue
        now = entries[name].value
        if name in GUARDED_CONSTANTS:  # whatever the run says, and even if the file moved
            skipped[name] = "guarded: immutable for existing tables (§27.2.4)"
            continue
        if c.get("measured") is None:  # the file moved, but this run measured nothing to move it back
            skipped[name] = "not measured in this run"
            continue
        if c.get("current") != now:  # the file moved since the run: the run's evidence still names the value
            evidence = f"{c.get('evidence', '')} [run saw {c.get('current')}, file has {now}]"
        else:
            evidence = c.get("evidence", "")
        changes[name] = (rec, f"{evidence} [confidence {c.get('confidence')}, {cal.get('mode')} parameters; was {now}]")
        before[name] = (now, rec)
    text = Path(constants_path).read_text()
    body = _diff(text, proposed_text(text, changes), REPO_RELATIVE_PATH) if changes else ""
    if changes and defaults_path is not None:
        py = Path(defaults_path).read_text()
        body += _diff(py, proposed_defaults(py, {n: v for n, (_, v) in before.items()}), DEFAULTS_RELATIVE_PATH)
    header = (f"Proposed appendix B change from calibration run {run_id} (mode {cal.get('mode', '?')}).\n"
              "Review, then from the repository root: git apply --check <this file> && git apply <this file>\n")
    for name, why in skipped.items():
        header += f"Not proposed: {name} -> {cal['constants'][name]['recommended']}: {why}\n"
    if not changes:
        header += "No constant changes: every recommendation equals the value in the file.\n"
    path = out or run_dir / DIFF_FILE
    path.write_text(header + "\n" + body if body else header)
    return Proposal(path=path, changes=before, skipped=skipped, diff=body)
