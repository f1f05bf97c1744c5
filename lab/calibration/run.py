"""Calibration runs: measure on the cluster in front of the lab, write one report.

``run_calibration(config, CalibrationOptions(...))`` makes a fresh ``results/<run-id>/``
(exclusive create: runs never overwrite each other) and

1. records the environment (server kind and version, nodes, RF, machine, git commit, the
   embedded node's start-up and jar-resolution times) and a write/read round trip;
2. runs the notebook suite headless through :func:`lab.calibration.notebooks.run_notebook` (papermill),
   one folder per notebook: executed ``.ipynb``, its HTML, figures, tables, ``values.json``;
3. turns the notebooks' values into ``constants.<name>`` for every appendix-B constant
   (:mod:`lab.calibration.measures`), and writes ``calibration.json`` (the machine-readable contract),
   ``environment.json`` and ``report.html`` (:mod:`lab.calibration.report`);
4. with ``propose``: ``appendix_b.diff`` (:mod:`lab.calibration.propose`), never applied.

``calibration.json`` is rewritten after every step, so a run that dies half-way still says
what it measured. A failing notebook stops the suite (unless ``keep_going``): the run is
marked failed with the notebook, the cell and the error, the report is written with the
partial results, and :class:`~lab.errors.CalibrationError` is raised.
"""
from __future__ import annotations

import datetime as _dt
import json
import statistics
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Mapping

from lab.project import RESULTS_DIR
from lab.cluster.config import ClusterConfig
from lab.constants import APPENDIX_B_PATH, read_entries
from lab.errors import CalibrationError, LabError
from lab.results.runs import git_commit, git_dirty, machine, new_run_dir

ROUND_TRIPS_QUICK = 200
ROUND_TRIPS_FULL = 2000
ROUND_TRIP_PAYLOAD_BYTES = 100
CALIBRATION_FILE = "calibration.json"
ENVIRONMENT_FILE = "environment.json"
SCHEMA_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class CalibrationOptions:
    quick: bool = True
    results: Path = RESULTS_DIR
    notebooks: tuple[str, ...] | None = None              # None: the whole suite (lab.notebooks.NOTEBOOKS)
    overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # notebook -> parameters
    propose: bool = False
    keep_going: bool = False
    progress: bool = True
    cell_timeout_seconds: float | None = None
    constants_path: Path = APPENDIX_B_PATH
    notebooks_dir: Path | None = None


@dataclass(frozen=True, kw_only=True)
class CalibrationResult:
    run_dir: Path
    calibration: dict[str, Any]

    @property
    def report_path(self) -> Path:
        return self.run_dir / "report.html"

    @property
    def calibration_path(self) -> Path:
        return self.run_dir / CALIBRATION_FILE

    @property
    def proposal_path(self) -> Path | None:
        return self.run_dir / self.calibration["proposal"] if self.calibration.get("proposal") else None


# ---- measurements of the lab itself ---------------------------------------------------------
def measure_round_trip(conn: Any, keyspace: str, n: int) -> dict[str, float]:
    """Write then read ``n`` small rows one at a time; latencies in microseconds."""
    conn.execute(f"CREATE TABLE IF NOT EXISTS {keyspace}.lab_round_trip (k uuid PRIMARY KEY, v blob)")
    conn.wait_schema_agreement()
    insert = conn.prepare(f"INSERT INTO {keyspace}.lab_round_trip (k, v) VALUES (?, ?)")
    select = conn.prepare(f"SELECT v FROM {keyspace}.lab_round_trip WHERE k = ?", key_columns=("k",))
    keys = [uuid.uuid4() for _ in range(n)]
    writes, reads = [], []
    for k in keys:
        t0 = time.perf_counter_ns()
        conn.execute(insert, (k, b"x" * ROUND_TRIP_PAYLOAD_BYTES))
        writes.append((time.perf_counter_ns() - t0) / 1000)
    for k in keys:
        t0 = time.perf_counter_ns()
        row = conn.execute(select, (k,)).one()
        reads.append((time.perf_counter_ns() - t0) / 1000)
        if row is None:
            raise CalibrationError(f"round trip lost key {k}", keyspace=keyspace)

    def pct(xs: list[float], q: float) -> float:
        return sorted(xs)[min(len(xs) - 1, int(q * len(xs)))]

    return {"n": n, "write_p50_us": statistics.median(writes), "write_p99_us": pct(writes, 0.99),
            "read_p50_us": statistics.median(reads), "read_p99_us": pct(reads, 0.99)}


def environment(conn: Any, config: ClusterConfig, parameters: dict[str, Any]) -> dict[str, Any]:
    from lab.cluster.embedded.node import EmbeddedCluster, NodeOptions

    state = EmbeddedCluster(NodeOptions(home=config.lab_home)).read_state()
    embedded = state is not None and set(config.contact_points) & set(state.contact_points)
    return {
        "server": conn.server_kind(), "server_version": conn.server_version(),
        "nodes": len(conn.hosts()), "replication_factor": config.replication_factor,
        "embedded": bool(embedded),
        "node_startup_seconds": state.startup_seconds if embedded else None,
        "jar_resolution_seconds": state.resolve_seconds if embedded else None,
        "machine": machine(), "git_commit": git_commit(), "git_dirty": git_dirty(),
        "cluster": config.redacted(), "parameters": parameters,
    }


# ---- the run --------------------------------------------------------------------------------
def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def _write(run_dir: Path, cal: dict[str, Any]) -> None:
    tmp = run_dir / f".{CALIBRATION_FILE}.tmp"
    tmp.write_text(json.dumps(cal, indent=2, default=str) + "\n")
    tmp.replace(run_dir / CALIBRATION_FILE)  # readers never see half a file


def plan(options: CalibrationOptions, run_dir: Path | None) -> list[tuple[str, dict[str, Any]]]:
    """(notebook, parameters) in suite order: quick parameters (or the notebooks' own defaults
    in full mode) updated by ``overrides``; capacity reads the b_row of this run."""
    from lab.calibration import notebooks as nbs

    names = tuple(options.notebooks) if options.notebooks is not None else nbs.NOTEBOOKS
    unknown = sorted(set(names) - set(nbs.NOTEBOOKS)) + sorted(set(options.overrides) - set(names))
    if unknown:
        raise CalibrationError(f"unknown or unselected notebook(s) {', '.join(unknown)}; suite: "
                               f"{', '.join(nbs.NOTEBOOKS)}", notebooks=unknown)
    out = []
    for name in names:
        params = dict(nbs.QUICK_PARAMETERS.get(name, {}) if options.quick else {})
        if Path(options.constants_path) != APPENDIX_B_PATH:
            params["constants_file"] = str(Path(options.constants_path).resolve())
        params.update(options.overrides.get(name, {}))
        _check_parameters(name, params, options)
        if (name == "capacity" and run_dir is not None and "b_row" in names and "b_row_values" not in params
                and "b_row_bytes" not in params):
            params["b_row_values"] = str((run_dir / "b_row" / nbs.VALUES_FILE).resolve())
        out.append((name, params))
    return out


def _check_parameters(name: str, params: Mapping[str, Any], options: CalibrationOptions) -> None:
    """papermill injects any name, and a misspelt one is silently ignored: refuse parameters the
    notebook's ``parameters`` cell does not declare."""
    import papermill as pm

    from lab.calibration import notebooks as nbs

    path = nbs.notebook_path(name, options.notebooks_dir or nbs.NOTEBOOKS_DIR)
    declared = set(pm.inspect_notebook(str(path)))
    unknown = sorted(set(params) - declared)
    if unknown:
        raise CalibrationError(f"notebook {name} has no parameter {', '.join(unknown)} "
                               f"(its parameters: {', '.join(sorted(declared))})", notebook=name, parameters=unknown)


def _cell_source(exc: BaseException) -> str | None:
    """First non-blank line of the failing cell (papermill's error carries the source)."""
    source = getattr(exc.__cause__, "source", None)
    if not source:
        return None
    return next((line.strip() for line in str(source).splitlines() if line.strip()), None)


def _collect(run_dir: Path, name: str) -> dict[str, Any]:
    """What a notebook left in its folder, paths relative to the run folder."""
    from lab.calibration.notebooks import VALUES_FILE, read_values

    folder = run_dir / name
    rel = lambda p: p.relative_to(run_dir).as_posix()  # noqa: E731
    executed = folder / f"{name}.ipynb"
    entry: dict[str, Any] = {
        "notebook": rel(executed) if executed.exists() else None,
        "html": rel(executed.with_suffix(".html")) if executed.with_suffix(".html").exists() else None,
        "values_file": rel(folder / VALUES_FILE) if (folder / VALUES_FILE).exists() else None,
        "figures": [rel(p) for p in sorted(folder.glob("*.png"))],
        "tables": [rel(p) for p in sorted(folder.glob("*.csv"))],
    }
    try:
        entry["values"] = read_values(folder) if folder.is_dir() else {}
    except (OSError, ValueError):  # values.json missing and scrapbook rejected the partial notebook
        entry["values"] = {}
    conclusion = folder / "conclusion.md"
    entry["conclusion"] = conclusion.read_text().strip() if conclusion.exists() else entry["values"].get("conclusion")
    return entry


def _assess(cal: dict[str, Any], run_dir: Path, options: CalibrationOptions) -> None:
    from lab.calibration.measures import assess

    ok = {name: {**nb, "dir": run_dir / name} for name, nb in cal["notebooks"].items() if nb["status"] == "ok"}
    constants = assess(read_entries(options.constants_path), ok, run_dir=run_dir, run_id=cal["run_id"],
                       quick=options.quick)
    for c in constants.values():
        if c.get("notebook") in cal["notebooks"]:
            c["notebook_html"] = cal["notebooks"][c["notebook"]].get("html")
    cal["constants"] = constants


def _measure_lab(config: ClusterConfig, options: CalibrationOptions, suite: list[tuple[str, dict[str, Any]]],
                 run_dir: Path, cal: dict[str, Any]) -> None:
    """Environment and the write/read round trip, on a connection of this process."""
    from lab.cluster.connection import connect

    parameters = {"mode": cal["mode"], "round_trips": ROUND_TRIPS_QUICK if options.quick else ROUND_TRIPS_FULL,
                  "notebooks": {name: params for name, params in suite},
                  "constants_file": str(options.constants_path)}
    with connect(config) as conn:
        conn.create_keyspace(config.keyspace)  # as the server's dialect spells it
        cal["environment"] = environment(conn, config, parameters)
        t0 = time.monotonic()
        cal["measurements"]["round_trip"] = measure_round_trip(conn, config.keyspace, parameters["round_trips"])
        cal["measurements"]["round_trip"]["seconds"] = round(time.monotonic() - t0, 2)
    (run_dir / ENVIRONMENT_FILE).write_text(json.dumps(cal["environment"], indent=2, default=str) + "\n")


def _run_one(name: str, params: dict[str, Any], config: ClusterConfig, options: CalibrationOptions,
             run_dir: Path, entry: dict[str, Any]) -> CalibrationError | None:
    """One notebook through lab.notebooks.run_notebook; ``entry`` (its part of calibration.json)
    gets status, seconds, files and values. Returns the failure, if any."""
    from lab.calibration.notebooks import run_notebook

    failure = None
    t0 = time.monotonic()
    try:
        run_notebook(name, params, run_dir, config=config, cell_timeout_seconds=options.cell_timeout_seconds,
                     **({"notebooks_dir": options.notebooks_dir} if options.notebooks_dir else {}))
        entry["status"] = "ok"
    except CalibrationError as exc:
        entry["status"] = "failed"
        entry["error"] = {"notebook": name, "cell": exc.facts.get("cell"), "cell_index": exc.facts.get("cell_index"),
                          "cell_source": _cell_source(exc), "ename": exc.facts.get("ename"),
                          "evalue": exc.facts.get("evalue")}
        failure = exc
    entry["seconds"] = round(time.monotonic() - t0, 1)
    entry.update(_collect(run_dir, name))
    if entry["status"] == "ok" and not entry["values"]:
        # a notebook that "succeeds" without recording anything took a wrong branch
        evalue = f"{name} finished but recorded no values ({name}/values.json missing)"
        entry["status"] = "failed"
        entry["error"] = {"notebook": name, "cell": None, "ename": "NoValues", "evalue": evalue}
        failure = CalibrationError(evalue, notebook=name, cell=None, ename="NoValues", evalue=evalue)
    return failure


def _run_suite(suite: list[tuple[str, dict[str, Any]]], config: ClusterConfig, options: CalibrationOptions,
               run_dir: Path, cal: dict[str, Any]) -> CalibrationError | None:
    failure = None
    for name, params in suite:
        cal["notebooks"][name] = {"status": "pending", "parameters": dict(params)}
    _write(run_dir, cal)
    bar = _progress(len(suite), options.progress and bool(suite))
    try:
        for name, params in suite:
            bar.set_description(f"notebook {name}")
            entry = cal["notebooks"][name]
            entry["status"] = "running"
            _write(run_dir, cal)
            failure = _run_one(name, params, config, options, run_dir, entry) or failure
            bar.update(1)
            bar.write(f"{name}: {entry['status']} in {entry['seconds']:.0f} s", file=sys.stderr)
            _write(run_dir, cal)
            if failure is not None and not options.keep_going:
                break
    finally:
        bar.close()
        for entry in cal["notebooks"].values():
            if entry["status"] in ("pending", "running"):
                entry["status"] = "not run"
    return failure


def _finish(cal: dict[str, Any], run_dir: Path, options: CalibrationOptions, t_start: float) -> None:
    _assess(cal, run_dir, options)
    cal["finished_at"] = _now()
    cal["wall_seconds"] = round(time.monotonic() - t_start, 1)
    _write(run_dir, cal)


def run_calibration(config: ClusterConfig, options: CalibrationOptions | None = None) -> CalibrationResult:
    from lab.calibration.report import write_report

    options = options or CalibrationOptions()
    plan(options, None)  # unknown notebooks or parameters: refused before a run folder exists
    run_dir = new_run_dir(options.results)
    t_start = time.monotonic()
    cal: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "run_id": run_dir.name,
                           "mode": "quick" if options.quick else "full", "status": "running", "error": None,
                           "started_at": _now(), "finished_at": None, "wall_seconds": None, "environment": {},
                           "measurements": {}, "notebooks": {}, "constants": {}, "proposal": None}
    failure: CalibrationError | None = None
    try:
        suite = plan(options, run_dir)
        _measure_lab(config, options, suite, run_dir, cal)
        failure = _run_suite(suite, config, options, run_dir, cal)
    except CalibrationError as exc:
        failure = exc
    except LabError as exc:  # no cluster, bad config: the run folder still says why
        failure = CalibrationError(f"{type(exc).__name__}: {exc}", notebook=None, cell=None,
                                   ename=type(exc).__name__, evalue=str(exc))
        failure.__cause__ = exc
    except KeyboardInterrupt:
        cal["status"] = "interrupted"
        _finish(cal, run_dir, options, t_start)
        write_report(cal, run_dir)
        raise
    if failure is not None:
        failed = next((nb["error"] for nb in cal["notebooks"].values() if nb.get("error")), None)
        cal["status"] = "failed"
        cal["error"] = failed or {"notebook": failure.facts.get("notebook"), "cell": failure.facts.get("cell"),
                                  "ename": failure.facts.get("ename", type(failure).__name__),
                                  "evalue": failure.facts.get("evalue", str(failure))}
    else:
        cal["status"] = "ok"
    _finish(cal, run_dir, options, t_start)
    if options.propose and failure is None:
        from lab.calibration.propose import propose

        cal["proposal"] = propose(run_dir, constants_path=options.constants_path).path.name
        _write(run_dir, cal)
    write_report(cal, run_dir)
    if failure is not None:
        e = cal["error"]
        where = (f"notebook {e.get('notebook')}" + (f", cell {e['cell']}" if e.get("cell") is not None else "")
                 if e.get("notebook") else "before the notebooks")
        source = f" (`{e['cell_source']}`)" if e.get("cell_source") else ""
        raise CalibrationError(f"calibration run {run_dir.name} failed in {where}{source}: {e.get('ename')}: "
                               f"{e.get('evalue')}; partial results in {run_dir}", run_dir=run_dir,
                               notebook=e.get("notebook"), cell=e.get("cell"), ename=e.get("ename"),
                               evalue=e.get("evalue")) from failure
    return CalibrationResult(run_dir=run_dir, calibration=cal)


def propose_from(run_dir: Path | str, *, constants_path: Path = APPENDIX_B_PATH) -> Path:
    """``appendix_b.diff`` for an existing run (the report is re-rendered to link it)."""
    from lab.calibration.propose import propose
    from lab.calibration.report import write_report

    run_dir = Path(run_dir)
    proposal = propose(run_dir, constants_path=constants_path)
    cal = json.loads((run_dir / CALIBRATION_FILE).read_text())
    cal["proposal"] = proposal.path.name
    _write(run_dir, cal)
    write_report(cal, run_dir)
    return proposal.path


class _NoBar:
    def set_description(self, _: str) -> None: ...
    def update(self, _: int) -> None: ...
    def close(self) -> None: ...
    def write(self, _: str, file: Any = None) -> None: ...


def _progress(total: int, enabled: bool) -> Any:
    if not enabled:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, unit="notebook", dynamic_ncols=True, file=sys.stderr)
