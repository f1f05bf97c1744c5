"""What a run folder holds, for `lab compare`: a calibration run, a load run, or notebooks run from JupyterLab.

- a calibration run: ``calibration.json``;
- a load run (``lab load``): the per-worker totals (``load/totals/*.json``, the service-time
  histograms of the measured calls), else the HDR interval logs (``load/**/*.hlog``, every
  ``<op>.service`` interval merged); each recorded value repeated by its count, so values
  carry HdrHistogram's 3 significant digits; percentiles and counts from ``load/summary.json``;
- notebooks run from JupyterLab (``<notebook>/values.json`` and no calibration.json): the
  constants assessed from their values as ``lab calibrate`` does (:func:`lab.calibration.recommendations.assess`);
- in any of them, notebook samples tables (``<notebook>/*.csv`` with a ``latency_ms`` or
  ``latency_us`` column, or named ``*samples*`` with a ``*_ms`` / ``*_us`` column), grouped by
  their key columns (:data:`KEY_COLUMNS` present in the table).
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lab.errors import CalibrationError

MAX_SAMPLES_PER_SIDE = 200_000  # HDR histograms of long runs are subsampled (seeded) above this
# columns that name what a latency sample measured (the rest of a samples table are outcomes)
KEY_COLUMNS = ("operation", "op", "shape", "method", "in_size", "scan_limit", "run", "compression", "table", "window")
_SEED = 20240601


@dataclass
class RunData:
    path: Path
    calibration: dict[str, Any] | None
    load_summary: dict[str, dict[str, Any]]           # op -> summary entry
    load_samples: dict[str, np.ndarray]               # op -> latencies (µs)
    notebook_samples: dict[str, dict[str, np.ndarray]]  # "<notebook>/<table>" -> key -> latencies (ms)
    load_meta: dict[str, Any] = field(default_factory=dict)  # load/summary.json beyond its operations

    @property
    def run_id(self) -> str:
        return (self.calibration or {}).get("run_id", self.path.name)


def _hist_samples(hist: Any, rng: np.random.Generator) -> np.ndarray:
    values, counts = [], []
    for it in hist.get_recorded_iterator():
        low = hist.get_lowest_equivalent_value(it.value_iterated_to)
        values.append((low + hist.get_highest_equivalent_value(it.value_iterated_to)) / 2)
        counts.append(it.count_added_in_this_iter_step)
    if not values:
        return np.empty(0)
    counts_arr = np.asarray(counts, dtype=np.int64)
    total = int(counts_arr.sum())
    if total > MAX_SAMPLES_PER_SIDE:  # keep the distribution's shape, not every value
        counts_arr = rng.multinomial(MAX_SAMPLES_PER_SIDE, counts_arr / total)
    return np.repeat(np.asarray(values, dtype=float), counts_arr)


def _load_dir(run: Path) -> tuple[dict[str, dict[str, Any]], dict[str, np.ndarray]]:
    from lab.measure import hdr

    load = run / "load"
    summary: dict[str, dict[str, Any]] = {}
    samples: dict[str, np.ndarray] = {}
    if not load.is_dir():
        return summary, samples
    rng = np.random.default_rng(_SEED)
    path = load / "summary.json"
    if path.is_file():
        data = json.loads(path.read_text())
        ops = data.get("operations", data) if isinstance(data, Mapping) else {}
        for op, entry in ops.items():
            if isinstance(entry, Mapping) and ("service_us" in entry or "service" in entry or "count" in entry):
                summary[op] = dict(entry)
                if isinstance(entry.get("service"), str):  # an encoded histogram (lab.hdr.OpStats.to_json)
                    samples[op] = _hist_samples(hdr.decode(entry["service"]), rng)
    merged: dict[str, Any] = {}
    totals = sorted((load / "totals").glob("*.json"))
    for path in totals:  # per-worker run totals (lab.load): exactly the measured calls
        for op, stats in json.loads(path.read_text()).get("totals", {}).items():
            merged.setdefault(op, hdr.new_histogram()).add(hdr.decode(stats["service"]))
    if not totals:
        for log in sorted(load.glob("**/*.hlog")):
            for interval in hdr.read_interval_log(log):
                if interval.kind == "service":
                    merged.setdefault(interval.op, hdr.new_histogram()).add(interval.histogram)
    for op, hist in merged.items():
        if hist.get_total_count() == 0:
            continue
        samples[op] = _hist_samples(hist, rng)
        if op not in summary:
            summary[op] = {"service_us": hdr.percentiles_us(hist)}
    return summary, samples


def _value_column(columns: list[str]) -> str | None:
    for name in ("latency_ms", "latency_us", "ms", "us"):
        if name in columns:
            return name
    return next((c for c in columns if c.endswith("_ms") or c.endswith("_us")), None)


def _notebook_samples(run: Path) -> dict[str, dict[str, np.ndarray]]:
    import pandas as pd

    out: dict[str, dict[str, np.ndarray]] = {}
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
        for key, g in groups:
            key = key if isinstance(key, tuple) else (key,)
            label = ", ".join(f"{k}={v}" for k, v in zip(keys, key)) or "all"
            out.setdefault(table_name, {})[label] = g[value].to_numpy(dtype=float) * scale
    return out


def notebook_only(path: Path) -> dict[str, Any] | None:
    """A calibration-shaped view of notebooks run from JupyterLab (``<notebook>/values.json``,
    no calibration.json): constants assessed from the values as ``lab calibrate`` does, at low
    confidence when the notebooks ran with ``preset = "quick"`` (``preset``: the one they recorded)."""
    from lab.calibration.recommendations import assess
    from lab.constants import read_entries

    folders = sorted(p.parent for p in path.glob("*/values.json"))
    if not folders:
        return None
    notebooks = {f.name: {"values": json.loads((f / "values.json").read_text()), "dir": f} for f in folders}
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
    cal = json.loads(cal_path.read_text()) if cal_path.is_file() else None
    summary, samples = _load_dir(path)
    if cal is None and not summary:
        cal = notebook_only(path)
    if cal is None and not summary:
        raise CalibrationError(f"{path} is not a run folder: it has no calibration.json, no load/summary.json and no "
                               "<notebook>/values.json", run_dir=str(path))
    load_meta = json.loads((path / "load" / "summary.json").read_text()) if (path / "load" / "summary.json").is_file() \
        else {}
    return RunData(path=path, calibration=cal, load_summary=summary, load_samples=samples,
                   notebook_samples=_notebook_samples(path), load_meta=load_meta)
