"""Run folders under ``results/``: one per run, never overwritten."""
from __future__ import annotations

import datetime as _dt
import uuid
from pathlib import Path

from lab.project import RESULTS_DIR


def new_run_id(prefix: str = "") -> str:
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{prefix}{stamp}-{uuid.uuid4().hex[:6]}"


def new_run_dir(results: Path = RESULTS_DIR, prefix: str = "") -> Path:
    """A fresh folder ``results/<run-id>/`` (exclusive create: runs never overwrite each other)."""
    results = Path(results)
    results.mkdir(parents=True, exist_ok=True)
    while True:
        path = results / new_run_id(prefix)
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
