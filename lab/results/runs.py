"""Run folders under ``results/``: one per run, never overwritten."""
from __future__ import annotations

import datetime as _dt
import os
import platform
import subprocess
import uuid
from pathlib import Path
from typing import Any

from lab.project import RESULTS_DIR



def new_run_id(prefix: str = "") -> str:
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{prefix}{stamp}-{uuid.uuid4().hex[:6]}"


def new_run_dir(results: Path = RESULTS_DIR, prefix: str = "") -> Path:
    """A fresh folder ``results/<run-id>/`` (exclusive create: runs never overwrite each other)."""
    results.mkdir(parents=True, exist_ok=True)
    while True:
        path = results / new_run_id(prefix)
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue


def _git(args: list[str], cwd: Path | None) -> subprocess.CompletedProcess | None:
    # GIT_OPTIONAL_LOCKS=0: `git status` must not refresh (write) the index of the lead's work tree
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=cwd, timeout=10, env=env)
    except (OSError, subprocess.SubprocessError):
        return None


def git_commit(cwd: Path | None = None) -> str | None:
    """HEAD's commit id, or None outside a repository / before the first commit."""
    out = _git(["rev-parse", "--verify", "-q", "HEAD"], cwd)
    return out.stdout.strip() or None if out is not None and out.returncode == 0 else None


def git_dirty(cwd: Path | None = None) -> bool | None:
    """True when tracked or untracked files differ from HEAD (the run measured uncommitted code)."""
    out = _git(["status", "--porcelain", "--untracked-files=normal"], cwd)
    return bool(out.stdout.strip()) if out is not None and out.returncode == 0 else None


def machine() -> dict[str, Any]:
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        mem = None
    return {"hostname": platform.node(), "cpus": os.cpu_count(), "memory_bytes": mem,
            "platform": platform.platform(), "python": platform.python_version()}
