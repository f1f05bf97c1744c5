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
from typing import Any

from lab.calibration.recommendations import ConstantAssessment

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
    my_mix: Mapping[str, Any] | None = None         # your mix priced by the capacity notebook (lab.calibration.capacity_inputs)

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
