"""What a run folder holds, for `lab compare`: a calibration run, a load run, or notebooks run from JupyterLab.

More: docs/comparison-internals.md.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lab.calibration.contract import check_calibration
from lab.calibration.recommendations import assess
from lab.constants import read_entries
from lab.errors import BadRunFile, CalibrationError
from lab.measure import hdr
from lab.results.run_files import Fields, inside, read_run_json

# columns that name what a latency sample measured (the rest of a samples table are outcomes)
KEY_COLUMNS = ("operation", "op", "shape", "method", "in_size", "scan_limit", "run", "compression", "table", "window")
ROUND_COLUMNS = ("round", "repeat")  # the interleaved rounds of a notebook: its time order
WINDOW_SECONDS = 1.0                  # a load run's windows: its interval logs' one-second intervals


@dataclass
class RunData:
    path: Path
    calibration: dict[str, Any] | None
    load_summary: dict[str, dict[str, Any]]                       # op -> summary entry
    load_windows: dict[str, dict[str, list[Any]]]                 # op -> kind -> HdrHistogram per window
    notebook_samples: dict[str, dict[str, list[np.ndarray]]]      # "<nb>/<table>" -> key -> latencies (ms) per round
    load_meta: dict[str, Any] = field(default_factory=dict)       # load/summary.json beyond its operations

    @property
    def run_id(self) -> str:
        return (self.calibration or {}).get("run_id", self.path.resolve().name)


def _measured_window(meta: Mapping[str, Any], f: Fields) -> tuple[float, float]:
    """[start, end) of the measured calls, in seconds from the logs' base time (the run's t0)."""
    start = float(f.get(meta, "warmup_seconds", float, default=0.0))
    length = f.get(meta, "measured_seconds", float)
    return start, start + float(length) if length else float("inf")


@contextmanager
def _bad_file(path: Path, field: str | None) -> Iterator[None]:
    """A parse error inside one file as a BadRunFile naming it (and the field)."""
    try:
        yield
    except BadRunFile:
        raise
    except (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError, EOFError) as exc:
        where = f"{field}: " if field else ""
        raise BadRunFile(f"{path}: {where}unreadable ({type(exc).__name__}: {str(exc)[:100]})",
                         file=str(path), field=field) from None


def _load_dir(run: Path, meta: Mapping[str, Any]) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, list[Any]]]]:
    load = run / "load"
    summary: dict[str, dict[str, Any]] = {}
    if not load.is_dir():
        return summary, {}
    ops = meta.get("operations", meta) if isinstance(meta, Mapping) else {}
    f = Fields(load / "summary.json")
    if not isinstance(ops, Mapping):
        raise f.fail("operations", "is not a JSON object")
    for op, entry in ops.items():
        if isinstance(entry, Mapping) and ("service_us" in entry or "count" in entry):
            f.get(entry, "count", int, where=f"operations.{op}")
            f.get(entry, "errors", int, where=f"operations.{op}")
            for key in ("service_us", "corrected_us"):
                pct = f.get(entry, key, dict, where=f"operations.{op}", default={})
                for q in (q for q in pct if q[:1] == "p" and q[1:].replace(".", "").isdigit()):
                    f.get(pct, q, (int, float), where=f"operations.{op}.{key}")
            summary[op] = dict(entry)
        elif isinstance(entry, Mapping) and isinstance(entry.get("service"), str):  # OpStats.to_json: histograms
            with _bad_file(load / "summary.json", f"operations.{op}"):
                stats = hdr.OpStats.from_json(entry)
            summary[op] = {"count": stats.count, "errors": stats.count - stats.ok,
                           "service_us": hdr.percentiles_us(stats.service)}
    start, end = _measured_window(meta, f)
    by_time: dict[str, dict[str, dict[int, Any]]] = {}
    for log in sorted(load.glob("**/*.hlog")):
        inside(run, log, file=str(log), field="(interval log)")
        with _bad_file(log, None):
            for iv in hdr.read_interval_log(log):
                mid = iv.start_s + iv.length_s / 2
                if not start <= mid < end or iv.kind not in hdr.KINDS:
                    continue
                slot = by_time.setdefault(iv.op, {}).setdefault(iv.kind, {})
                slot.setdefault(int((mid - start) // WINDOW_SECONDS), hdr.new_histogram()).add(iv.histogram)
    windows = {op: {kind: [w[k] for k in sorted(w)] for kind, w in kinds.items()} for op, kinds in by_time.items()}
    if not summary:  # no summary.json: the per-worker totals
        merged: dict[str, Any] = {}
        for path in sorted((load / "totals").glob("*.json")):
            totals = Fields(path).get(read_run_json(path), "totals", dict, default={})
            for op, stats in totals.items():
                with _bad_file(path, f"totals.{op}"):
                    merged.setdefault(op, hdr.OpStats()).merge(hdr.OpStats.from_json(stats))
        for op, stats in merged.items():
            if stats.count:
                summary[op] = {"count": stats.count, "service_us": hdr.percentiles_us(stats.service)}
                if stats.corrected.get_total_count():
                    summary[op]["corrected_us"] = hdr.percentiles_us(stats.corrected)
    return summary, windows


def _value_column(columns: list[str]) -> str | None:
    for name in ("latency_ms", "latency_us", "ms", "us"):
        if name in columns:
            return name
    return next((c for c in columns if c.endswith("_ms") or c.endswith("_us")), None)


def _notebook_samples(run: Path) -> dict[str, dict[str, list[np.ndarray]]]:
    import pandas as pd

    out: dict[str, dict[str, list[np.ndarray]]] = {}
    for path in sorted(run.glob("*/*.csv")):
        try:
            df = pd.read_csv(path)
        except (pd.errors.EmptyDataError, pd.errors.ParserError):  # an empty table: nothing measured there
            continue
        value = _value_column(list(df.columns))
        # a samples table: named so, or one latency per row in a ``latency_ms`` / ``latency_us`` column
        if value is None or not ("samples" in path.stem or value in ("latency_ms", "latency_us")):
            continue
        if "ok" in df.columns:
            df = df[df["ok"].astype(bool)]
        keys = [c for c in KEY_COLUMNS if c in df.columns]
        scale = 1e-3 if value.endswith("us") else 1.0
        groups = df.groupby(keys, sort=True) if keys else [((), df)]
        table_name = f"{path.parent.name}/{path.stem}"
        rounds = next((c for c in ROUND_COLUMNS if c in df.columns), None)
        for key, g in groups:
            key = key if isinstance(key, tuple) else (key,)
            label = ", ".join(f"{k}={v}" for k, v in zip(keys, key)) or "all"
            values = g[value].to_numpy(dtype=float) * scale
            if rounds is None:  # rows in the order measured: one window each
                out.setdefault(table_name, {})[label] = [values[i:i + 1] for i in range(len(values))]
            else:
                order = g[rounds].to_numpy()
                out.setdefault(table_name, {})[label] = [values[order == r] for r in sorted(set(order.tolist()))]
    return out


def notebook_only(path: Path) -> dict[str, Any] | None:
    """A calibration-shaped view of notebooks run from JupyterLab (``<notebook>/values.json``,
    no calibration.json): constants assessed from the values as ``lab calibrate`` does, at low
    confidence when the notebooks ran with ``preset = "quick"`` (``preset``: the one they recorded)."""

    folders = sorted(p.parent for p in path.glob("*/values.json"))
    if not folders:
        return None
    notebooks = {f.name: {"values": read_run_json(f / "values.json"), "dir": f} for f in folders}
    presets = {nb["values"].get("preset") for nb in notebooks.values()} - {None}
    preset = presets.pop() if len(presets) == 1 else None
    constants = assess(read_entries(), notebooks, run_dir=path, run_id=path.name, quick=preset == "quick")
    server = next((nb["values"].get("server") for nb in notebooks.values() if nb["values"].get("server")), None)
    return {"run_id": path.name, "mode": "notebooks", "preset": preset, "status": "ok",
            "environment": {"server": server, "parameters": {"notebooks": {}}},
            "notebooks": {n: {"status": "ok", "values": nb["values"]} for n, nb in notebooks.items()},
            "constants": {n: c.to_json() for n, c in constants.items()}, "notebook_only": True}


def load_run(path: Path | str) -> RunData:
    path = Path(path)
    if not path.is_dir():
        raise CalibrationError(f"run folder {path} does not exist", run_dir=str(path))
    cal_path = path / "calibration.json"
    cal = read_run_json(cal_path) if cal_path.is_file() else None
    if cal is not None:
        check_calibration(cal, Fields(cal_path))
    meta_path = path / "load" / "summary.json"
    load_meta = read_run_json(meta_path) if meta_path.is_file() else {}
    summary, windows = _load_dir(path, load_meta)
    if cal is None and not summary:
        cal = notebook_only(path)
    if cal is None and not summary:
        raise CalibrationError(f"{path} is not a run folder: it has no calibration.json, no load/summary.json and no "
                               "<notebook>/values.json", run_dir=str(path))
    return RunData(path=path, calibration=cal, load_summary=summary, load_windows=windows,
                   notebook_samples=_notebook_samples(path), load_meta=load_meta)
