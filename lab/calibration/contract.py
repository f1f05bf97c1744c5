"""``calibration.json`` as frozen dataclasses: what a calibration run is, step by step.

The run (:mod:`lab.calibration.calibrate`) replaces its :class:`CalibrationRun` after every step and
writes ``to_json()``, so the file always says how far the run got. Readers of a finished run
(the report, ``--propose``, ``lab compare``) read the JSON; :meth:`CalibrationRun.from_json`
gives the typed view back.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.calibration.recommendations import ConstantAssessment
from lab.results.jsonio import write_json
from lab.results.run_files import Fields, read_run_json

CALIBRATION_FILE = "calibration.json"

SCHEMA_VERSION = 1
NOTEBOOK_STATUSES = ("pending", "running", "ok", "failed", "interrupted", "not run")


@dataclass(frozen=True, kw_only=True)
class RunError:
    """Where a run failed: the notebook and cell (None before the notebooks), the error."""

    notebook: str | None
    cell: int | None
    ename: str | None
    evalue: str | None
    cell_index: int | None = None
    cell_source: str | None = None   # first line of the failing cell

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> RunError | None:
        if not data:
            return None
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: data.get(k) for k in known})

    def where(self) -> str:
        """'in notebook b_row, cell 4', or 'before the first notebook (environment and round trip)'."""
        if not self.notebook:
            return "before the first notebook (environment and round trip)"
        return f"in notebook {self.notebook}" + (f", cell {self.cell}" if self.cell is not None else "")


@dataclass(frozen=True, kw_only=True)
class NotebookRun:
    """One notebook of the suite: its status, parameters and what it left in its folder
    (paths relative to the run folder)."""

    status: str
    parameters: Mapping[str, Any]
    seconds: float | None = None
    notebook: str | None = None       # the executed .ipynb
    html: str | None = None
    values_file: str | None = None
    figures: tuple[str, ...] = ()
    tables: tuple[str, ...] = ()
    values: Mapping[str, Any] = field(default_factory=dict)
    conclusion: str | None = None
    error: RunError | None = None

    def to_json(self) -> dict[str, Any]:
        out = {"status": self.status, "parameters": dict(self.parameters)}
        if self.status in ("pending", "running"):
            return out
        return {**out, "seconds": self.seconds, "notebook": self.notebook, "html": self.html,
                "values_file": self.values_file, "figures": list(self.figures), "tables": list(self.tables),
                "values": dict(self.values), "conclusion": self.conclusion,
                **({"error": self.error.to_json()} if self.error is not None else {})}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NotebookRun:
        return cls(status=data["status"], parameters=dict(data.get("parameters", {})), seconds=data.get("seconds"),
                   notebook=data.get("notebook"), html=data.get("html"), values_file=data.get("values_file"),
                   figures=tuple(data.get("figures", ())), tables=tuple(data.get("tables", ())),
                   values=dict(data.get("values", {})), conclusion=data.get("conclusion"),
                   error=RunError.from_json(data.get("error")))


@dataclass(frozen=True, kw_only=True)
class RoundTrip:
    """The lab's own write/read round trip: small rows one at a time, latencies in µs."""

    n: int
    write_p50_us: float | None
    write_p99_us: float | None
    read_p50_us: float | None
    read_p99_us: float | None
    seconds: float | None = None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, kw_only=True)
class CalibrationRun:
    run_id: str
    mode: str                                       # quick | full
    status: str                                     # running | ok | failed | interrupted (Ctrl-C)
    started_at: str
    error: RunError | None = None
    finished_at: str | None = None
    wall_seconds: float | None = None
    environment: Mapping[str, Any] = field(default_factory=dict)  # results.environment + "parameters"
    round_trip: RoundTrip | None = None
    notebooks: Mapping[str, NotebookRun] = field(default_factory=dict)
    constants: Mapping[str, ConstantAssessment] = field(default_factory=dict)
    proposal: str | None = None                     # file name of the proposed diff
    previous_run: str | None = None                 # run folder each constant's agreement is with
    repeat_check: Mapping[str, Any] | None = None   # --repeat-check: the first run and the comparison
    resumed: tuple[Mapping[str, Any], ...] = ()     # each --resume: started_at, the notebooks it ran
    my_mix: Mapping[str, Any] | None = None         # your mix priced by the capacity notebook (lab.calibration.capacity_model.capacity_inputs)

    def replace(self, **changes: Any) -> CalibrationRun:
        return dataclasses.replace(self, **changes)

    def with_notebook(self, name: str, nb: NotebookRun) -> CalibrationRun:
        return self.replace(notebooks={**self.notebooks, name: nb})

    def measured(self) -> list[str]:
        return [n for n, c in self.constants.items() if c.measured is not None]

    def changed(self) -> list[str]:
        return [n for n, c in self.constants.items() if c.changed]

    def to_json(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "run_id": self.run_id, "mode": self.mode, "status": self.status,
                "error": self.error.to_json() if self.error else None, "started_at": self.started_at,
                "finished_at": self.finished_at, "wall_seconds": self.wall_seconds,
                "environment": dict(self.environment),
                "measurements": {"round_trip": self.round_trip.to_json()} if self.round_trip else {},
                "notebooks": {n: nb.to_json() for n, nb in self.notebooks.items()},
                "constants": {n: c.to_json() for n, c in self.constants.items()}, "proposal": self.proposal,
                "previous_run": self.previous_run, "repeat_check": dict(self.repeat_check) if self.repeat_check else None,
                "resumed": [dict(r) for r in self.resumed], "my_mix": dict(self.my_mix) if self.my_mix else None}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CalibrationRun:
        rt = (data.get("measurements") or {}).get("round_trip")
        return cls(run_id=data["run_id"], mode=data["mode"], status=data["status"], started_at=data["started_at"],
                   error=RunError.from_json(data.get("error")), finished_at=data.get("finished_at"),
                   wall_seconds=data.get("wall_seconds"), environment=dict(data.get("environment") or {}),
                   round_trip=RoundTrip(**rt) if rt else None,
                   notebooks={n: NotebookRun.from_json(nb) for n, nb in (data.get("notebooks") or {}).items()},
                   constants={n: ConstantAssessment.from_json(c) for n, c in (data.get("constants") or {}).items()},
                   proposal=data.get("proposal"), previous_run=data.get("previous_run"),
                   repeat_check=data.get("repeat_check"), resumed=tuple(data.get("resumed") or ()),
                   my_mix=data.get("my_mix"))

    @classmethod
    def from_file(cls, path: Path | str) -> CalibrationRun:
        """``calibration.json`` read through the run-file loader: every field type-checked, every
        notebook name a plain name; any problem one BadRunFile naming the file and field."""
        data = read_run_json(path)
        check_calibration(data, Fields(path), complete=True)
        return cls.from_json(data)


_NUMBER = (int, float)


def check_calibration(data: Mapping[str, Any], f: Fields, *, complete: bool = False) -> None:
    """The types of a calibration.json's fields; with ``complete``, also every field that
    :meth:`CalibrationRun.from_json` needs (readers of parts, such as ``lab compare``, need fewer)."""
    run_id = f.get(data, "run_id", str, required=complete)
    if run_id is not None:
        f.name(run_id, "run_id")
    for key in ("mode", "status", "started_at"):
        f.get(data, key, str, required=complete)
    for key in ("finished_at", "proposal", "previous_run"):
        f.get(data, key, str)
    f.get(data, "wall_seconds", _NUMBER)
    f.get(data, "environment", dict)
    f.get(data, "repeat_check", dict)
    f.get(data, "my_mix", dict)
    _check_error(f, f.get(data, "error", dict), "error")
    rt = f.get(f.get(data, "measurements", dict, default={}), "round_trip", dict, where="measurements")
    if rt is not None:
        f.get(rt, "n", int, where="measurements.round_trip", required=True)
        for key in ("write_p50_us", "write_p99_us", "read_p50_us", "read_p99_us", "seconds"):
            f.get(rt, key, _NUMBER, where="measurements.round_trip")
        unknown = set(rt) - {"n", "write_p50_us", "write_p99_us", "read_p50_us", "read_p99_us", "seconds"}
        if unknown:
            raise f.fail("measurements.round_trip", f"unknown field {sorted(unknown)[0]!r}")
    for i, entry in enumerate(f.get(data, "resumed", list, default=[])):
        if not isinstance(entry, dict):
            raise f.fail(f"resumed[{i}]", "is not a JSON object")
    for name, nb in (f.get(data, "notebooks", dict, default={})).items():
        where = f"notebooks.{f.name(name, 'notebooks')}"
        if not isinstance(nb, dict):
            raise f.fail(where, "is not a JSON object")
        f.get(nb, "status", str, where=where, required=complete)
        f.get(nb, "parameters", dict, where=where)
        f.get(nb, "values", dict, where=where)
        f.get(nb, "seconds", _NUMBER, where=where)
        for key in ("notebook", "html", "values_file", "conclusion"):
            f.get(nb, key, str, where=where)
        for key in ("figures", "tables"):
            if any(not isinstance(x, str) for x in f.get(nb, key, list, where=where, default=[])):
                raise f.fail(f"{where}.{key}", "holds something other than file names")
        _check_error(f, f.get(nb, "error", dict, where=where), f"{where}.error")
    for name, c in (f.get(data, "constants", dict, default={})).items():
        where = f"constants.{f.name(name, 'constants')}"
        if not isinstance(c, dict):
            raise f.fail(where, "is not a JSON object")
        for key, kind in _CONSTANT_FIELDS.items():
            f.get(c, key, kind, where=where, required=complete and key in _CONSTANT_REQUIRED)


_CONSTANT_FIELDS: dict[str, type | tuple[type, ...]] = {
    "current": _NUMBER, "measured": _NUMBER, "recommended": _NUMBER, "unit": str, "confidence": str,
    "evidence": str, "figure": str, "notebook": str, "ci_low": _NUMBER, "ci_high": _NUMBER, "section": str,
    "doc": str, "guarded": bool, "changed": bool, "rule": str, "suggested_for_new_tables": _NUMBER,
    "notebook_html": str, "precision": dict, "halves": dict, "inconclusive": bool,
    "recommended_ci_low": _NUMBER, "recommended_ci_high": _NUMBER, "observed": dict, "agreement": dict}
_CONSTANT_REQUIRED = ("current", "recommended", "unit", "confidence", "evidence", "section", "doc", "guarded",
                      "changed")


def _check_error(f: Fields, error: Mapping[str, Any] | None, where: str) -> None:
    if error is None:
        return
    for key in ("notebook", "ename", "evalue", "cell_source"):
        f.get(error, key, str, where=where)
    for key in ("cell", "cell_index"):
        f.get(error, key, int, where=where)


def write_calibration(run_dir: Path, cal: CalibrationRun) -> CalibrationRun:
    """calibration.json of ``run_dir``, written atomically; returns ``cal``."""
    write_json(run_dir / CALIBRATION_FILE, cal.to_json())  # atomic: readers never see half a file
    return cal
