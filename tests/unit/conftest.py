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
