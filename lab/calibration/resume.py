"""``lab calibrate --resume RUN_DIR``: the notebooks of a run not finished ok, run into the same
folder with the run's own mode, parameters and services (recorded in calibration.json from its
first write), then one assessment and report of the whole run (lab.calibration.calibrate)."""
from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lab.calibration.calibrate import CALIBRATION_FILE, CalibrationOptions, CalibrationResult, run_session, write_calibration
from lab.calibration.contract import CalibrationRun
from lab.cluster.config import ClusterConfig
from lab.cluster.services import ServicesConfig
from lab.errors import CalibrationError
from lab.results.run_files import inside
from lab.constants import APPENDIX_B_PATH
from lab.measure import utc_now_iso

__all__ = ["resume_calibration", "unfinished"]


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
    from lab.calibration import notebooks as nbs

    for name, params in left:  # the notebooks may have changed since: refuse before anything runs
        nbs.check_parameters(name, params, notebooks_dir or nbs.NOTEBOOKS_DIR)
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
    from lab.cluster.services import load_services

    if recorded is None:
        return given
    secrets = {k: getattr(given, k) for k in ("kafka_sasl_password", "redis_password")
               if given is not None and getattr(given, k) is not None}
    return load_services(flags={**recorded, **secrets}, env={})
