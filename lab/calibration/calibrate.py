"""Calibration runs: measure on the cluster in front of the lab, write one report; resume one
that did not finish (``--resume``).

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import dataclasses
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.calibration import notebooks as nbs
from lab.calibration.agreement import agreement, previous_run
from lab.calibration.capacity_model.capacity_inputs import my_mix_summary
from lab.calibration.contract import CALIBRATION_FILE, CalibrationRun, NotebookRun, RunError, write_calibration
from lab.calibration.notebooks import VALUES_FILE, failed_inputs, preload, read_values, run_notebook, services_parameter
from lab.calibration.presets import QUICK_PARAMETERS
from lab.calibration.propose import check_proposable, propose
from lab.calibration.recommendations import assess
from lab.calibration.registry import NOTEBOOKS
from lab.calibration.report import write_report
from lab.calibration.round_trip import (
    ROUND_TRIP_KEYSPACE_PREFIX,
    ROUND_TRIPS_FULL,
    ROUND_TRIPS_QUICK,
    measure_round_trip,
)
from lab.cluster.config import ClusterConfig
from lab.cluster.connection import connect
from lab.cluster.services import ServicesConfig, load_services
from lab.constants import APPENDIX_B_PATH, read_entries
from lab.errors import CalibrationError, LabError
from lab.measure import Stopwatch, utc_now_iso
from lab.project import NOTEBOOKS_DIR, RESULTS_DIR
from lab.results.environment import environment, loadavg
from lab.results.jsonio import write_json
from lab.results.run_files import inside
from lab.results.run_folders import new_run_dir
from lab.results.scratch import scratch_keyspace

ENVIRONMENT_FILE = "environment.json"


@dataclass(frozen=True, kw_only=True)
class CalibrationOptions:
    quick: bool = True
    results: Path = RESULTS_DIR
    notebooks: tuple[str, ...] | None = None              # None: the whole suite (lab.calibration.registry.NOTEBOOKS)
    overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # notebook -> parameters
    propose: bool = False
    keep_going: bool = False
    progress: bool = True
    cell_timeout_seconds: float | None = None
    constants_path: Path = APPENDIX_B_PATH
    notebooks_dir: Path | None = None
    allow_quick: bool = False             # propose from a quick run anyway
    previous: Path | None = None          # the run to state agreement with (None: the latest comparable one)
    services: ServicesConfig | None = None  # the notebooks' stores: outbox, hot window (None: the defaults)


@dataclass(frozen=True, kw_only=True)
class CalibrationResult:
    run_dir: Path
    calibration: CalibrationRun

    @property
    def report_path(self) -> Path:
        return self.run_dir / "report.html"

    @property
    def calibration_path(self) -> Path:
        return self.run_dir / CALIBRATION_FILE

    @property
    def interrupted(self) -> bool:
        return self.calibration.status == "interrupted"

    @property
    def interrupted_in(self) -> str | None:
        """The notebook Ctrl-C stopped (None: before the first notebook, or not interrupted)."""
        return next((n for n, nb in self.calibration.notebooks.items() if nb.status == "interrupted"), None)

    @property
    def proposal_path(self) -> Path | None:
        return self.run_dir / self.calibration.proposal if self.calibration.proposal else None


# ---- the run --------------------------------------------------------------------------------
def plan(options: CalibrationOptions, run_dir: Path | None) -> list[tuple[str, dict[str, Any]]]:
    """(notebook, parameters) in suite order: quick parameters (or the notebooks' own defaults
    in full mode) updated by ``overrides``; capacity and model_check read the values of this
    run's b_row, cpu_cost and space_amp (:data:`lab.calibration.notebooks.RUN_INPUTS`)."""
    names = tuple(options.notebooks) if options.notebooks is not None else NOTEBOOKS
    unknown = sorted(set(names) - set(NOTEBOOKS)) + sorted(set(options.overrides) - set(names))
    if unknown:
        raise CalibrationError(f"unknown or unselected notebook(s) {', '.join(unknown)}; suite: "
                               f"{', '.join(NOTEBOOKS)}", notebooks=unknown)
    out = []
    for name in names:
        params = dict(QUICK_PARAMETERS.get(name, {}) if options.quick else {})
        if Path(options.constants_path) != APPENDIX_B_PATH:
            params["constants_file"] = str(Path(options.constants_path).resolve())
        params.update(options.overrides.get(name, {}))
        _check_parameters(name, params, options)
        if run_dir is not None:
            params = nbs.with_run_inputs(name, params, run_dir, names)
        out.append((name, params))
    return out


def _check_parameters(name: str, params: Mapping[str, Any], options: CalibrationOptions) -> None:
    """Undeclared parameters and values of the wrong type are refused before the run folder exists."""
    nbs.check_parameters(name, params, options.notebooks_dir or NOTEBOOKS_DIR)


def _cell_source(exc: BaseException) -> str | None:
    """First non-blank line of the failing cell (papermill's error carries the source)."""
    source = getattr(exc.__cause__, "source", None)
    if not source:
        return None
    return next((line.strip() for line in str(source).splitlines() if line.strip()), None)


def _collect(run_dir: Path, name: str) -> dict[str, Any]:
    """What a notebook left in its folder (NotebookRun fields), paths relative to the run folder."""

    folder = run_dir / name
    rel = lambda p: p.relative_to(run_dir).as_posix()  # noqa: E731
    executed = folder / f"{name}.ipynb"
    try:
        values = read_values(folder) if folder.is_dir() else {}
    except (OSError, ValueError):  # values.json missing and scrapbook rejected the partial notebook
        values = {}
    conclusion = folder / "conclusion.md"
    return {"notebook": rel(executed) if executed.exists() else None,
            "html": rel(executed.with_suffix(".html")) if executed.with_suffix(".html").exists() else None,
            "values_file": rel(folder / VALUES_FILE) if (folder / VALUES_FILE).exists() else None,
            "figures": tuple(rel(p) for p in sorted(folder.glob("*.png"))),
            "tables": tuple(rel(p) for p in sorted(folder.glob("*.csv"))), "values": values,
            "conclusion": conclusion.read_text().strip() if conclusion.exists() else values.get("conclusion")}


def _assess(cal: CalibrationRun, run_dir: Path, options: CalibrationOptions) -> CalibrationRun:
    ok = {name: {"values": nb.values, "dir": run_dir / name} for name, nb in cal.notebooks.items()
          if nb.status == "ok"}
    constants = assess(read_entries(options.constants_path), ok, run_dir=run_dir, run_id=cal.run_id,
                       quick=options.quick)
    constants = {n: dataclasses.replace(c, notebook_html=cal.notebooks[c.notebook].html)
                 if c.notebook in cal.notebooks else c for n, c in constants.items()}
    return cal.replace(constants=constants)


def _run_parameters(mode: str, options: CalibrationOptions, suite: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """What the run runs with, recorded in calibration.json's environment from its first write
    (before the environment is measured), so that ``--resume`` of a run stopped at any point takes
    the run's own constants file and services (no secrets), never today's: the notebooks' stores
    (experiments.common.scratch_store) open with these services."""

    services = options.services if options.services is not None else ServicesConfig()
    return {"mode": mode, "round_trips": ROUND_TRIPS_QUICK if options.quick else ROUND_TRIPS_FULL,
            "notebooks": {name: params for name, params in suite},
            "constants_file": str(options.constants_path), "services": services_parameter(services)}


def _measure_lab(config: ClusterConfig, options: CalibrationOptions, suite: list[tuple[str, dict[str, Any]]],
                 run_dir: Path, cal: CalibrationRun) -> CalibrationRun:
    """Environment and the write/read round trip (in a scratch keyspace), on a connection of this process."""

    services = options.services if options.services is not None else ServicesConfig()
    parameters = _run_parameters(cal.mode, options, suite)
    with connect(config) as conn:
        env = {**environment(config, conn, services=services.describe_store()).to_json(), "parameters": parameters}
        with scratch_keyspace(conn, ROUND_TRIP_KEYSPACE_PREFIX) as keyspace:
            round_trip = measure_round_trip(conn, keyspace, parameters["round_trips"])
    write_json(run_dir / ENVIRONMENT_FILE, env)
    return cal.replace(environment=env, round_trip=round_trip)


def _run_one(name: str, params: dict[str, Any], config: ClusterConfig, options: CalibrationOptions,
             run_dir: Path) -> tuple[NotebookRun, CalibrationError | None]:
    """One notebook through lab.calibration.notebooks.run_notebook: its entry of calibration.json (status,
    seconds, files, values) and the failure, if any."""

    failure, error = None, None
    watch = Stopwatch()
    try:
        run_notebook(name, params, run_dir, config=config, services=options.services,
                     cell_timeout_seconds=options.cell_timeout_seconds,
                     **({"notebooks_dir": options.notebooks_dir} if options.notebooks_dir else {}))
        status = "ok"
    except CalibrationError as exc:
        status, failure = "failed", exc
        error = RunError(notebook=name, cell=exc.facts.get("cell"), cell_index=exc.facts.get("cell_index"),
                         cell_source=_cell_source(exc), ename=exc.facts.get("ename"), evalue=exc.facts.get("evalue"))
    entry = NotebookRun(status=status, parameters=dict(params), seconds=watch.seconds(1), error=error,
                        **_collect(run_dir, name))
    if entry.status == "ok" and not entry.values:
        # a notebook that "succeeds" without recording anything took a wrong branch
        evalue = f"{name} finished but recorded no values ({name}/values.json missing)"
        entry = dataclasses.replace(entry, status="failed",
                                    error=RunError(notebook=name, cell=None, ename="NoValues", evalue=evalue))
        failure = CalibrationError(evalue, notebook=name, cell=None, ename="NoValues", evalue=evalue)
    return entry, failure


def _not_run_for(name: str, params: dict[str, Any], blocked: list[str]) -> NotebookRun:
    """``name``'s entry when an input notebook of this run did not finish: not run, and why."""
    evalue = f"{name} not run: it reads the values of {' and '.join(blocked)} of this run, which did not finish"
    return NotebookRun(status="not run", parameters=dict(params), seconds=0.0,
                       error=RunError(notebook=name, cell=None, ename="InputNotMeasured", evalue=evalue))


def _pending(cal: CalibrationRun, suite: list[tuple[str, dict[str, Any]]]) -> CalibrationRun:
    for name, params in suite:
        cal = cal.with_notebook(name, NotebookRun(status="pending", parameters=dict(params)))
    return cal


def _run_suite(suite: list[tuple[str, dict[str, Any]]], config: ClusterConfig, options: CalibrationOptions,
               run_dir: Path, cal: CalibrationRun) -> tuple[CalibrationRun, CalibrationError | None, bool]:
    """The notebooks in order: (the run, the first failure, whether Ctrl-C stopped it). An
    interrupted notebook keeps its partial output and is marked "interrupted"; the rest "not run"."""

    failure, current, interrupted = None, None, False
    bar = _progress(len(suite), options.progress and bool(suite))
    watch = Stopwatch()
    try:
        if suite:
            preload()  # before any notebook is "running": a Ctrl-C during these imports could be lost
        for name, params in suite:
            current, watch = (name, params), Stopwatch()
            bar.set_description(f"notebook {name}")
            blocked = failed_inputs(name, params, run_dir, {n: nb.status for n, nb in cal.notebooks.items()})
            if blocked:  # (--keep-going) it reads the values of a notebook of this run that failed
                entry, failed = _not_run_for(name, params, blocked), None
            else:
                running = NotebookRun(status="running", parameters=dict(params))
                cal = write_calibration(run_dir, cal.with_notebook(name, running))
                entry, failed = _run_one(name, params, config, options, run_dir)
            current, failure = None, failed or failure
            cal = write_calibration(run_dir, cal.with_notebook(name, entry))
            bar.update(1)
            bar.write(entry.error.evalue if blocked else f"{name}: {entry.status} in {entry.seconds:.0f} s",
                      file=sys.stderr)
            if failure is not None and not options.keep_going:
                break
    except KeyboardInterrupt:
        interrupted = True
        if current is not None:
            name, params = current
            cal = cal.with_notebook(name, NotebookRun(status="interrupted", parameters=dict(params),
                                                      seconds=watch.seconds(1), **_collect(run_dir, name)))
    finally:
        bar.close()
        cal = cal.replace(notebooks={n: NotebookRun(status="not run", parameters=nb.parameters)
                                     if nb.status in ("pending", "running") else nb
                                     for n, nb in cal.notebooks.items()})
    return cal, failure, interrupted


def _with_agreement(cal: CalibrationRun, run_dir: Path, options: CalibrationOptions) -> CalibrationRun:
    """Each constant's agreement with the previous run (explicit, else the latest comparable)."""

    previous = Path(options.previous) if options.previous is not None else previous_run(run_dir, cal.to_json())
    if previous is None or not (previous / CALIBRATION_FILE).is_file():
        return cal
    before = {n: c.to_json() for n, c in CalibrationRun.from_file(previous / CALIBRATION_FILE).constants.items()}
    constants = {n: dataclasses.replace(c, agreement={**agreement(before.get(n), c.to_json()),
                                                      "previous_run": previous.name})
                 for n, c in cal.constants.items()}
    return cal.replace(constants=constants, previous_run=str(previous))


def _finish(cal: CalibrationRun, run_dir: Path, options: CalibrationOptions, watch: Stopwatch,
            wall_before: float = 0.0) -> CalibrationRun:

    cal = _with_agreement(_assess(cal, run_dir, options), run_dir, options)
    if cal.environment:  # a shared machine's load at the end, beside the one at the start
        cal = cal.replace(environment={**cal.environment, "loadavg_at_end": loadavg()})
    capacity = cal.notebooks.get("capacity")
    return write_calibration(run_dir, cal.replace(finished_at=utc_now_iso(), wall_seconds=round(wall_before + watch.seconds(1), 1),
                                       my_mix=my_mix_summary(capacity.values if capacity else {})))


def run_calibration(config: ClusterConfig, options: CalibrationOptions | None = None) -> CalibrationResult:
    """One calibration run into a fresh ``results/<run-id>/``. Ctrl-C ends it as "interrupted"
    (report written, partial results kept): the result says so, nothing is raised."""

    options = options or CalibrationOptions()
    plan(options, None)  # unknown notebooks or parameters: refused before a run folder exists
    if options.propose:
        check_proposable("quick" if options.quick else "full", allow_quick=options.allow_quick)
    with connect(config):  # so is an unreachable cluster (ConnectError, with its fix)
        run_dir = new_run_dir(options.results)
    suite = plan(options, run_dir)
    mode = "quick" if options.quick else "full"
    cal = CalibrationRun(run_id=run_dir.name, mode=mode, status="running", started_at=utc_now_iso(),
                         environment={"parameters": _run_parameters(mode, options, suite)})
    return run_session(config, options, run_dir, write_calibration(run_dir, _pending(cal, suite)), suite)


def run_session(config: ClusterConfig, options: CalibrationOptions, run_dir: Path, cal: CalibrationRun,
             suite: list[tuple[str, dict[str, Any]]], wall_before: float = 0.0) -> CalibrationResult:
    """The lab's own measurements (unless a resumed run has them), the notebooks, the report."""

    watch = Stopwatch()
    failure: CalibrationError | None = None
    interrupted = False
    try:
        if cal.round_trip is None:
            cal = _measure_lab(config, options, [(n, dict(nb.parameters)) for n, nb in cal.notebooks.items()], run_dir,
                               cal)
        cal, failure, interrupted = _run_suite(suite, config, options, run_dir, cal)
    except CalibrationError as exc:
        failure = exc
    except LabError as exc:  # no cluster, bad config: the run folder still says why
        failure = CalibrationError(f"{type(exc).__name__}: {exc}", notebook=None, cell=None,
                                   ename=type(exc).__name__, evalue=str(exc))
        failure.__cause__ = exc
    except KeyboardInterrupt:  # before the first notebook
        interrupted = True
    if interrupted:
        cal = cal.replace(status="interrupted", notebooks={n: nb if nb.status in ("ok", "failed", "interrupted") else
                                                           NotebookRun(status="not run", parameters=nb.parameters)
                                                           for n, nb in cal.notebooks.items()})
        cal = _finish(cal, run_dir, options, watch, wall_before)
        write_report(cal.to_json(), run_dir)
        return CalibrationResult(run_dir=run_dir, calibration=cal)
    if failure is not None:
        failed = next((nb.error for nb in cal.notebooks.values() if nb.error is not None), None)
        cal = cal.replace(status="failed", error=failed or RunError(
            notebook=failure.facts.get("notebook"), cell=failure.facts.get("cell"),
            ename=failure.facts.get("ename", type(failure).__name__), evalue=failure.facts.get("evalue", str(failure))))
    else:
        cal = cal.replace(status="ok")
    cal = _finish(cal, run_dir, options, watch, wall_before)
    if options.propose and failure is None:
        cal = write_calibration(run_dir, cal.replace(proposal=propose(run_dir, constants_path=options.constants_path,
                                                           allow_quick=options.allow_quick).path.name))
    write_report(cal.to_json(), run_dir)
    if failure is not None:
        e = cal.error
        source = f" (`{e.cell_source}`)" if e.cell_source else ""
        raise CalibrationError(f"calibration run {run_dir.name} failed {e.where()}{source}: {e.ename}: "
                               f"{e.evalue}; partial results in {run_dir}", run_dir=run_dir,
                               notebook=e.notebook, cell=e.cell, ename=e.ename, evalue=e.evalue) from failure
    return CalibrationResult(run_dir=run_dir, calibration=cal)


# ---- resuming a run ------------------------------------------------------------------------
def unfinished(run_dir: Path | str) -> list[str]:
    """The notebooks of a run not finished ok (what ``--resume`` would run), in suite order."""
    path = Path(run_dir) / CALIBRATION_FILE
    if not path.is_file():
        raise CalibrationError(f"{run_dir} has no calibration.json: not a calibration run to resume", run_dir=run_dir)
    return [n for n, nb in CalibrationRun.from_file(path).notebooks.items() if nb.status != "ok"]


def resume_calibration(config: ClusterConfig, run_dir: Path | str, *, progress: bool = True,
                       cell_timeout_seconds: float | None = None, notebooks_dir: Path | None = None,
                       services: ServicesConfig | None = None) -> CalibrationResult:
    """Run the notebooks of ``run_dir`` not yet finished (interrupted, failed, not run) into the
    same folder with the run's own mode, parameters and services (outbox, hot window), then
    assess and report the whole run. ``services`` gives the passwords (never recorded) and, for
    a run that recorded no services, all of them."""
    run_dir = Path(run_dir)
    if not (run_dir / CALIBRATION_FILE).is_file():
        raise CalibrationError(f"{run_dir} has no calibration.json: not a calibration run to resume", run_dir=run_dir)
    cal = CalibrationRun.from_file(run_dir / CALIBRATION_FILE)
    left = [(n, dict(nb.parameters)) for n, nb in cal.notebooks.items() if nb.status != "ok"]
    if not left and cal.round_trip is not None:
        raise CalibrationError(f"nothing to resume: every notebook of run {cal.run_id} finished ok "
                               f"({', '.join(cal.notebooks) or 'none selected'})", run_dir=run_dir)
    for name, params in left:  # the notebooks may have changed since: refuse before anything runs
        nbs.check_parameters(name, params, notebooks_dir or NOTEBOOKS_DIR)
    constants = (cal.environment.get("parameters") or {}).get("constants_file")
    options = CalibrationOptions(quick=cal.mode == "quick", results=run_dir.parent, notebooks=tuple(cal.notebooks),
                                 progress=progress, cell_timeout_seconds=cell_timeout_seconds,
                                 constants_path=Path(constants) if constants else APPENDIX_B_PATH,
                                 notebooks_dir=notebooks_dir,
                                 services=_run_services((cal.environment.get("parameters") or {}).get("services"),
                                                        services))
    for name, _ in left:  # an unfinished notebook's partial output would mix with the new one's values
        folder = inside(run_dir, name, file=str(run_dir / CALIBRATION_FILE), field=f"notebooks.{name}")
        if folder.resolve().parent != run_dir.resolve():
            raise CalibrationError(f"{folder} is not a notebook folder of {run_dir}: not removed", run_dir=run_dir)
        shutil.rmtree(folder, ignore_errors=True)
    cal = cal.replace(status="running", error=None, finished_at=None, resumed=(*cal.resumed, {
        "started_at": utc_now_iso(), "notebooks": [n for n, _ in left]}))
    return run_session(config, options, run_dir, write_calibration(run_dir, cal), left, wall_before=cal.wall_seconds or 0.0)


def _run_services(recorded: Mapping[str, Any] | None, given: ServicesConfig | None) -> ServicesConfig | None:
    """The services a run recorded, with the passwords of ``given`` (``given`` itself when the run
    recorded none)."""
    if recorded is None:
        return given
    secrets = {k: getattr(given, k) for k in ("kafka_sasl_password", "redis_password")
               if given is not None and getattr(given, k) is not None}
    return load_services(flags={**recorded, **secrets}, env={})


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
