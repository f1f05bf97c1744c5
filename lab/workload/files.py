"""Datasets on disk: ``<table>.parquet`` per table plus ``manifest.json`` (profile, seed, size,
counts, sha256 of each file). Same inputs, same hashes; :func:`load` checks them.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pandas as pd

from lab.constants import Constants
from lab.errors import ValidationError
from lab.project import DATASETS_OUT_DIR
from lab.results.jsonio import write_json
from lab.workload.synthesis import GENERATOR_VERSION, Workload, generate

_DEFAULTS = Constants.appendix_b()

DEFAULT_OUT_DIR = DATASETS_OUT_DIR
TABLES = ("messages", "conversations", "holes")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def dataset_dir(profile: str, size: str | int, seed: int, out_dir: Path = DEFAULT_OUT_DIR) -> Path:
    return Path(out_dir) / f"{profile}-{size}-s{seed}"


def save(workload: Workload, out_dir: Path | None = None) -> dict[str, Any]:
    """Write ``<table>.parquet`` for each table plus ``manifest.json``; returns the manifest."""
    out = Path(out_dir) if out_dir is not None else dataset_dir(workload.profile.name, workload.size, workload.seed)
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    for name in TABLES:
        path = out / f"{name}.parquet"
        getattr(workload, name).to_parquet(path, index=False, engine="pyarrow", compression="zstd")
        files[path.name] = {"sha256": _sha256(path), "bytes": path.stat().st_size,
                            "rows": int(len(getattr(workload, name)))}
    combined = hashlib.sha256("".join(f"{k}:{v['sha256']}\n" for k, v in sorted(files.items())).encode()).hexdigest()
    manifest = {
        "profile": workload.profile.name, "profile_sha256": workload.profile.source_sha256,
        "description": workload.profile.description, "generator_version": GENERATOR_VERSION,
        "seed": workload.seed, "size": workload.size, "bucket_width": workload.bucket_width,
        "seq_reservation_window": workload.profile.holes.window,
        "counts": workload.stats(), "files": files, "sha256": combined,
    }
    write_json(out / "manifest.json", manifest, sort_keys=True)
    return manifest


def load(path: Path) -> tuple[dict[str, Any], dict[str, pd.DataFrame]]:
    """(manifest, tables) of a saved dataset; each file's sha256 is checked against the manifest."""
    path = Path(path)
    manifest = json.loads((path / "manifest.json").read_text())
    tables = {}
    for name in TABLES:
        f = path / f"{name}.parquet"
        if _sha256(f) != manifest["files"][f.name]["sha256"]:
            raise ValidationError(f"{f} does not match its manifest sha256", path=str(f))
        tables[name] = pd.read_parquet(f)
    return manifest, tables


def ensure(profile: str, *, size: str | int = "quick", seed: int = 0, out_dir: Path = DEFAULT_OUT_DIR,
           bucket_width: int = _DEFAULTS.message_seq_bucket_width) -> tuple[dict[str, Any], Workload]:
    """Generate and save (or regenerate over) the dataset; returns (manifest, workload)."""
    workload = generate(profile, size=size, seed=seed, bucket_width=bucket_width)
    return save(workload, dataset_dir(workload.profile.name, size, seed, out_dir)), workload
