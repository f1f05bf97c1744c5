"""The runs in a results folder, and one constant across them (``lab runs``).

More: docs/comparison-internals.md.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.calibration.contract import check_calibration
from lab.comparison.rundata import notebook_only
from lab.constants import read_entries
from lab.errors import BadRunFile, ValidationError
from lab.results.run_files import Fields, read_run_json
from lab.results.units import fmt

KINDS = ("calibration", "notebooks", "load", "soak", "bench", "compare")


@dataclass(frozen=True, kw_only=True)
class MeasuredConstant:
    measured: float | int
    unit: str
    confidence: str
    recommended: float | int | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    changed: bool = False
    inconclusive: bool = False
    agreement: str | None = None          # with the previous comparable run (calibration runs)

    def text(self) -> str:
        return f"{fmt(self.measured, unit=self.unit or None)} ({self.confidence})"


@dataclass(frozen=True, kw_only=True)
class RunEntry:
    run_id: str
    path: Path
    kinds: tuple[str, ...]
    started: str | None                   # ISO-8601 UTC
    mode: str | None                      # quick | full | notebooks | fixed-rate | closed-loop | ...
    status: str | None                    # ok | failed | interrupted | running | None (not recorded)
    server: str | None                    # "cassandra 5.0.9, 1 node"
    notebooks: tuple[str, ...] = ()
    constants: Mapping[str, MeasuredConstant] = field(default_factory=dict)
    requested_rate: float | None = None   # load runs: calls/s asked for (None: closed loop, or not a load run)
    achieved_rate: float | None = None
    verdict: str | None = None            # load runs: valid | loader-bound | machine-bound (summary.json's)
    processes: int | None = None          # load runs: load-generator processes

    @property
    def kind(self) -> str:
        return "+".join(self.kinds)

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["path"], out["kind"] = str(self.path), self.kind
        return out


@dataclass(frozen=True, kw_only=True)
class HistoryPoint:
    run_id: str
    started: str | None
    mode: str | None
    server: str | None
    value: MeasuredConstant

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "started": self.started, "mode": self.mode, "server": self.server,
                **dataclasses.asdict(self.value)}


def _read(path: Path) -> dict[str, Any] | None:
    """``path``'s JSON object, None when absent; BadRunFile when present but not one."""
    return read_run_json(path) if path.is_file() else None


def _server(env: Mapping[str, Any] | None) -> str | None:
    env = env or {}
    if not env.get("server"):
        return None
    nodes = env.get("nodes")
    tail = f", {nodes} node{'s' if nodes != 1 else ''}" if isinstance(nodes, int) else ""
    return f"{env['server']} {env.get('server_version') or ''}".strip() + tail


def _oldest_mtime(path: Path) -> str | None:
    times = [p.stat().st_mtime for p in path.rglob("*") if p.is_file()]
    if not times:
        return None
    return _dt.datetime.fromtimestamp(min(times), _dt.UTC).isoformat(timespec="seconds")


def _constants(entries: Mapping[str, Any] | None) -> dict[str, MeasuredConstant]:
    out = {}
    for name, c in (entries or {}).items():
        if not isinstance(c, Mapping) or c.get("measured") is None:
            continue
        agreement = (c.get("agreement") or {}).get("status") if isinstance(c.get("agreement"), Mapping) else None
        out[name] = MeasuredConstant(measured=c["measured"], unit=str(c.get("unit") or ""),
                                     confidence=str(c.get("confidence") or "none"), recommended=c.get("recommended"),
                                     ci_low=c.get("ci_low"), ci_high=c.get("ci_high"),
                                     changed=bool(c.get("changed")), inconclusive=bool(c.get("inconclusive")),
                                     agreement=agreement)
    return out


def read_run(path: Path | str) -> RunEntry | None:
    """What ``path`` holds as a run, or None when it is not a run folder."""
    path = Path(path)
    if not path.is_dir():
        return None
    cal = _read(path / "calibration.json")
    if cal is not None:
        check_calibration(cal, Fields(path / "calibration.json"))
    comparison = _read(path / "comparison.json")
    load = _read(path / "load" / "summary.json")
    soak = _read(path / "soak" / "summary.json")
    nbs = notebook_only(path) if cal is None else None
    kinds = [k for k, present in (("calibration", cal is not None), ("notebooks", nbs is not None),
                                  ("load", load is not None), ("soak", soak is not None),
                                  ("bench", (path / "bench").is_dir()), ("compare", comparison is not None)) if present]
    if not kinds:
        return None
    fields: dict[str, Any] = {"mode": None, "status": None, "server": None, "constants": {}}
    if cal is not None:
        fields = {"mode": cal.get("mode"), "status": cal.get("status"), "server": _server(cal.get("environment")),
                  "constants": _constants(cal.get("constants"))}
        notebooks = tuple(cal.get("notebooks") or ())
    elif nbs is not None:
        fields = {"mode": nbs["preset"] or "notebooks", "status": "ok", "server": nbs["environment"]["server"],
                  "constants": _constants(nbs["constants"])}
        notebooks = tuple(nbs["notebooks"])
    else:
        notebooks = ()
    if load is not None:
        f = Fields(path / "load" / "summary.json")
        env = f.get(f.get(load, "parameters", dict, default={}), "environment", dict, where="parameters", default={})
        f.get(env, "server", str, where="parameters.environment")
        fields["mode"] = fields["mode"] or f.get(load, "mode", str)
        fields["server"] = fields["server"] or _server(env)
        verdict = f.get(f.get(load, "verdict", dict, default={}), "verdict", str, where="verdict")
        audit_ok = f.get(f.get(load, "audit", dict, default={}), "ok", bool, where="audit", default=True)
        fields["status"] = fields["status"] or (
            "audit failed" if not audit_ok else verdict if verdict in ("loader-bound", "machine-bound") else "ok")
        fields.update(requested_rate=f.get(load, "requested_rate", float), achieved_rate=f.get(load, "achieved_rate", float),
                      verdict=verdict, processes=f.get(load, "processes", int))
    started = (cal or {}).get("started_at") or _oldest_mtime(path)
    return RunEntry(run_id=(cal or {}).get("run_id", path.name), path=path, kinds=tuple(kinds), started=started,
                    notebooks=notebooks, **fields)


def list_runs(results: Path | str, *, problems: list[BadRunFile] | None = None) -> list[RunEntry]:
    """Every run folder directly under ``results``, oldest first. A run with a bad file raises
    BadRunFile, or is left out and its error appended to ``problems`` when a list is given."""
    results = Path(results)
    if not results.is_dir():
        return []
    runs = []
    for p in sorted(results.iterdir()):
        try:
            run = read_run(p)
        except BadRunFile as exc:
            if problems is None:
                raise
            problems.append(exc)
            continue
        if run is not None:
            runs.append(run)
    return sorted(runs, key=lambda r: (r.started or "", r.run_id))


def constant_history(results: Path | str, name: str, *, runs: list[RunEntry] | None = None) -> list[HistoryPoint]:
    """``name`` in every run that measured it, oldest first."""

    known = read_entries()
    if name not in known:
        raise ValidationError(f"no appendix-B constant {name!r} (known: {', '.join(sorted(known))})", constant=name)
    runs = list_runs(results) if runs is None else runs
    return [HistoryPoint(run_id=r.run_id, started=r.started, mode=r.mode, server=r.server, value=r.constants[name])
            for r in runs if name in r.constants]
