"""``make unit`` runs in-process tests only: with ``LAB_UNIT_IN_PROCESS=1`` (the Makefile sets it) a
unit test that starts a process (an interpreter, git, a kernel) fails with the fix, unless it is
marked ``spawns`` (those run under ``make test``, and ``make unit`` deselects them)."""
from __future__ import annotations

import os
import subprocess

import pytest

IN_PROCESS = os.environ.get("LAB_UNIT_IN_PROCESS") == "1"
RECORD = os.environ.get("LAB_UNIT_RECORD_SPAWNS")  # a file: list the spawning tests instead of failing


class SpawnedProcess(AssertionError):
    pass


@pytest.fixture(autouse=True)
def _in_process_only(request, monkeypatch):
    if not (IN_PROCESS or RECORD) or request.node.get_closest_marker("spawns"):
        yield
        return
    spawned = []

    def refuse(*args, **kwargs):
        spawned.append(request.node.nodeid)
        if RECORD:
            return original(*args, **kwargs) if args else None
        raise SpawnedProcess(f"{request.node.nodeid} started a process: mark it @pytest.mark.spawns "
                             "(make test runs it; make unit is in-process only)")

    original = subprocess.Popen._execute_child
    monkeypatch.setattr(subprocess.Popen, "_execute_child", lambda self, *a, **k: refuse(self, *a, **k))
    for name in ("fork", "posix_spawn", "posix_spawnp"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, (lambda f: lambda *a, **k: (refuse(), f(*a, **k))[1] if RECORD
                                           else refuse())(getattr(os, name)))
    yield
    if RECORD and spawned:
        with open(RECORD, "a") as f:
            f.write(spawned[0] + "\n")


@pytest.fixture
def capacity_with_space_amp(tmp_path):
    """``run(values)``: the capacity notebook at b_row 1,400 B with ``values`` as its space_amp
    run's values.json (the what-if tests' one set-up)."""
    import json

    from lab.calibration.experiments import capacity, common

    def run(values):
        path = tmp_path / "space_amp.json"
        path.write_text(json.dumps(values))
        return capacity.run(capacity.Params(b_row_bytes=1400.0, space_amp_values=str(path)),
                            constants=common.constants_from(None))
    return run
