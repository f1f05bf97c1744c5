"""The capacity model's predictions for a run it did not see (judged in ``prediction_check``).

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from lab.results.run_files import read_run_json
from lab.calibration.capacity_model.cpu_sizing import costs_from_values, cpu_sizing
from lab.calibration.capacity_model.curve_pricing import CpuCurve
from lab.calibration.capacity_model.row_model import REGRESSORS, RowModel, mix_profile
from lab.calibration.capacity_model.twcs_model import simulate_twcs
from lab.workload import media_for

# a mix no b_row run measures: more photos with larger thumbnails, longer text and captions than
# chat_mix, no E2EE change (name -> base profile, [messages] overrides, as row_model.DESIGN_MIXES)
CHECK_MIXES: dict[str, tuple[str, dict[str, float]]] = {
    "check_mix": ("chat_mix", {"text": 0.55, "image": 0.25, "video": 0.05, "audio": 0.05, "file": 0.05, "custom": 0.05,
                               "text_bytes_median": 150.0, "caption_share": 0.5, "thumbnail_bytes_median": 9000.0}),
}
DISK_TABLES = ("message_record", "message_index", "client_dedup", "conversation_head")
PER_ROW_TABLES = ("message_index", "client_dedup")


def check_profile(name: str) -> Any:
    """The workload profile of a check mix (:data:`CHECK_MIXES`) or any profile by name."""

    return mix_profile(name, CHECK_MIXES, "model-check mix")


@dataclass(frozen=True, kw_only=True)
class Inputs:
    """The constants of one calibration run the predictions use (None: that notebook did not run)."""

    source: str
    rows_per_repeat: int | None                        # rows per b_row repeat: what its per-row bytes amortise
    row_model: RowModel | None
    fitted_mixes: tuple[str, ...]                      # the mixes the row model saw (fitted or held out)
    per_row_bytes: Mapping[str, tuple[float, float | None, float | None]]  # table -> (mean, ci_low, ci_high)
    head_bytes_per_conversation: float | None
    head_sstable_bytes: float | None                   # the fixed components of the head's one SSTable
    cpu_costs: Mapping[str, Any] | None                # lab.calibration.capacity_model.cpu_sizing.costs_from_values
    cpu_server: str | None = None
    cpu_curve: CpuCurve | None = None                  # the cpu_curve notebook's curve (None: not run, or unusable)
    cpu_curve_mix: Mapping[str, float] | None = None   # its mix: operations per send
    cpu_curve_note: str = ""                           # why there is no curve, when its values were given

    def missing(self) -> list[str]:
        out = []
        if self.row_model is None:
            out.append("b_row (row model)")
        if self.head_bytes_per_conversation is None:
            out.append("space_amp (conversation_head bytes)")
        if self.cpu_costs is None:
            out.append("cpu_cost")
        return out

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "rows_per_repeat": self.rows_per_repeat, "fitted_mixes": list(self.fitted_mixes),
                "per_row_bytes": {k: list(v) for k, v in self.per_row_bytes.items()},
                "head_bytes_per_conversation": self.head_bytes_per_conversation,
                "head_sstable_bytes": self.head_sstable_bytes,
                "row_model": self.row_model.to_json() if self.row_model else None,
                "cpu_costs": dict(self.cpu_costs) if self.cpu_costs else None, "missing": self.missing(),
                "cpu_curve_points": None if self.cpu_curve is None else len(self.cpu_curve.usable()),
                "cpu_curve_mix": dict(self.cpu_curve_mix) if self.cpu_curve_mix else None,
                "cpu_curve_note": self.cpu_curve_note}


def curve_from_values(values: Any) -> tuple[CpuCurve | None, dict[str, float] | None, str]:
    """(curve, its mix per send, why not) from a cpu_curve ``values.json``: a file that is not one,
    or a curve without two usable points of positive numbers, gives no curve and one reason."""
    data = values.get("cpu_curve") if isinstance(values, Mapping) else None
    mix = values.get("operations_per_message") if isinstance(values, Mapping) else None
    if not isinstance(data, Mapping) or not isinstance(mix, Mapping):
        return None, None, "the cpu_curve values hold no curve and mix"
    try:
        curve = CpuCurve.from_json(data)
        usable = curve.usable()
        good = [p for p in usable if all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
                                         for v in (p.achieved_sends_per_second, p.server_ms_per_send))]
        clean = {str(op): float(n) for op, n in mix.items()
                 if isinstance(n, (int, float)) and not isinstance(n, bool) and n >= 0}
    except (TypeError, ValueError, AttributeError):
        return None, None, "the cpu_curve values are not a curve"
    if len(good) < 2 or len(good) != len(usable) or not clean:
        return None, None, f"the CPU curve has {len(good)} usable points of positive numbers (2 needed)"
    return curve, clean, ""


def inputs_from_values(*, b_row: Mapping[str, Any] | None, cpu_cost: Mapping[str, Any] | None,
                       space_amp: Mapping[str, Any] | None, source: str,
                       cpu_curve: Any = None) -> Inputs:
    """The inputs from the notebooks' ``values.json`` (any of them may be None)."""

    b_row = b_row or {}
    comp = (b_row.get("compressions") or ["lz4"])[0]
    per_row = {}
    for table in PER_ROW_TABLES:
        mean = b_row.get(f"b_row_{table}_{comp}_bytes")
        if mean is not None:
            per_row[table] = (float(mean), b_row.get(f"b_row_{table}_{comp}_ci_low_bytes"),
                              b_row.get(f"b_row_{table}_{comp}_ci_high_bytes"))
    model = RowModel.from_json(b_row["row_model"]) if b_row.get("row_model") else None
    head = (space_amp or {}).get("conversation_head_bytes_per_conversation")
    fixed = (space_amp or {}).get("conversation_head_sstable_bytes")
    rows = b_row.get("rows_per_repeat")
    curve, curve_mix, curve_note = curve_from_values(cpu_curve) if cpu_curve is not None else (None, None, "")
    return Inputs(cpu_curve=curve, cpu_curve_mix=curve_mix, cpu_curve_note=curve_note,
                  source=source, rows_per_repeat=int(rows) if rows else None, row_model=model, fitted_mixes=tuple((b_row.get("b_row_by_mix") or {}).keys()),
                  per_row_bytes=per_row, head_bytes_per_conversation=float(head) if head else None,
                  head_sstable_bytes=float(fixed) if fixed is not None else None,
                  cpu_costs=costs_from_values(cpu_cost) if cpu_cost and cpu_cost.get("operations") else None,
                  cpu_server=(cpu_cost or {}).get("server"))


def inputs_from_run(run_dir: Path | str) -> Inputs:
    """The inputs of a calibration run folder (``results/<run-id>/``): its notebooks' values.json."""
    run_dir = Path(run_dir)

    def read(notebook: str) -> dict[str, Any] | None:
        path = run_dir / notebook / "values.json"
        return read_run_json(path) if path.is_file() else None

    return inputs_from_values(b_row=read("b_row"), cpu_cost=read("cpu_cost"), space_amp=read("space_amp"),
                              cpu_curve=read("cpu_curve"), source=run_dir.name)


# ---- disk --------------------------------------------------------------------------------------
def predict_disk(inputs: Inputs, rows: pd.DataFrame) -> pd.DataFrame:
    """Per (node, table): predicted bytes on disk of the rows each node holds, right after they
    were flushed (one SSTable holding each row once: no amplification yet).

    ``rows``: one per message sent, with the regressors of :data:`lab.calibration.capacity_model.row_model.REGRESSORS`
    and, per table, the nodes holding its partition (``<table>_nodes``: a tuple of addresses);
    ``conversation`` identifies the head row (one per conversation)."""
    out = []
    nodes = sorted({n for t in DISK_TABLES for ns in rows[f"{t}_nodes"] for n in ns})
    for node in nodes:
        held = {t: rows[[node in ns for ns in rows[f"{t}_nodes"]]] for t in DISK_TABLES}
        mine = held["message_record"]
        if inputs.row_model is not None and len(mine):
            p = inputs.row_model.predict({c: float(mine[c].mean()) for c in REGRESSORS})
            n = len(mine)
            out.append({"node": node, "table": "message_record", "rows": n, "predicted": n * p["mean"],
                        "predicted_low": n * p["prediction_low"], "predicted_high": n * p["prediction_high"],
                        "input": "row model (b_row)"})
        for table in PER_ROW_TABLES:
            n = len(held[table])
            if table in inputs.per_row_bytes and n:
                mean, lo, hi = inputs.per_row_bytes[table]
                out.append({"node": node, "table": table, "rows": n, "predicted": n * mean,
                            "predicted_low": n * lo if lo is not None else None,
                            "predicted_high": n * hi if hi is not None else None, "input": f"b_row of {table}"})
        conversations = held["conversation_head"].conversation.nunique()
        if inputs.head_bytes_per_conversation is not None and conversations:
            fixed = inputs.head_sstable_bytes or 0.0   # one SSTable's fixed components: the table is flushed once
            out.append({"node": node, "table": "conversation_head", "rows": conversations,
                        "predicted": fixed + conversations * inputs.head_bytes_per_conversation, "predicted_low": None,
                        "predicted_high": None, "input": "conversation_head: one SSTable + bytes per conversation "
                                                         "(space_amp)"})
    return pd.DataFrame(out)


def row_composition(messages: pd.DataFrame) -> pd.DataFrame:
    """Per row: the row model's regressors (:func:`lab.calibration.capacity_model.row_model.composition`, row by row)."""

    out = []
    for row in messages.to_dict("records"):
        media = media_for(row)
        thumb = len(media.thumbnail) if media is not None else 0
        meta = len(dataclasses.replace(media, thumbnail=b"").encode()) if media is not None else 0
        out.append({"payload_bytes": float(row["body_bytes"]), "media_metadata_bytes": float(meta),
                    "thumbnail_bytes": float(thumb)})
    return pd.DataFrame(out, index=messages.index)


# ---- CPU ---------------------------------------------------------------------------------------
def operation_sequence(rates: Mapping[str, float], length: int = 1000) -> list[str]:
    """A fixed-rate load's operations in order: each op's share of ``length`` calls follows its
    rate, evenly spread (smooth weighted round robin), so any window carries the stated mix."""
    if not rates or any(not isinstance(r, (int, float)) or isinstance(r, bool) or r < 0 for r in rates.values()) \
            or sum(rates.values()) <= 0:
        from lab.errors import ValidationError

        raise ValidationError(f"rates must map operations to ops/s >= 0, some > 0, got {dict(rates)}", field="rates")
    total = float(sum(rates.values()))
    credit = {op: 0.0 for op in rates}
    out = []
    for _ in range(length):
        for op, r in rates.items():
            credit[op] += r
        op = max(credit, key=lambda o: credit[o])
        credit[op] -= total
        out.append(op)
    return out


def predict_cpu(inputs: Inputs, counts: Mapping[str, int], wall_seconds: float, *,
                replication_factor: int) -> dict[str, Any]:
    """Server CPU seconds, whole cluster, for the operations ``counts`` completed in
    ``wall_seconds``, by the capacity model's CPU arithmetic (:func:`cpu_sizing` at a peak factor
    of 1: rate x CPU per op x replicas, writes on RF replicas, reads on a quorum, scaled from the
    replication cpu_cost measured at). ``per_op``: each operation's share."""

    total = sum(counts.values())
    costs = dict(inputs.cpu_costs or {})
    if not total or not costs or wall_seconds <= 0:
        return {"seconds": None, "low": None, "high": None, "per_op": {}}
    sizing = cpu_sizing(messages_per_day=total / wall_seconds * 86_400,
                        operations_per_message={op: n / total for op, n in counts.items() if n},
                        peak_factor=1.0, cores_per_node=1, target_cpu_utilization=1.0,
                        replication_factor=replication_factor, **costs)
    low = sizing.server_cores_low * wall_seconds if sizing.server_cores_low is not None else None
    high = sizing.server_cores_high * wall_seconds if sizing.server_cores_high is not None else None
    return {"seconds": sizing.server_cores * wall_seconds, "low": low, "high": high,
            "per_op": {op: e["cores"] * wall_seconds for op, e in sizing.operations.items()},
            "replicas": {op: e["replicas"] for op, e in sizing.operations.items()}}


def predict_cpu_on_curve(light: Mapping[str, Any], wall_seconds: float, *, curve: CpuCurve,
                         curve_mix: Mapping[str, float], costs: Mapping[str, float], nodes: int) -> dict[str, Any]:
    """Server CPU seconds, whole cluster, priced on the CPU curve at the load the run put on each node.

    The node's CPU per operation falls as its total load rises (the curve), so an operation's cost
    at one rate prices no other load. The costs at cpu_cost's rates weigh the operations against
    each other: ``light`` (:func:`predict_cpu`'s answer) over the curve's mix per send at the same
    costs is the load in sends/s of that mix, each node taking an even share; the curve gives what a
    node burns there. ``low``/``high`` map cpu_cost's interval the same way."""

    per_send = sum(float(n) * costs[op] for op, n in curve_mix.items() if op in costs and n > 0)
    if light.get("seconds") is None or per_send <= 0 or wall_seconds <= 0 or nodes < 1:
        return {"seconds": None, "low": None, "high": None, "sends_per_second_per_node": None, "where": None}

    def at(seconds: float | None) -> tuple[float | None, Any]:
        if seconds is None:
            return None, None
        rate = seconds / wall_seconds * 1000 / nodes / per_send
        cost = curve.cost_at(rate)
        return rate * cost.ms_per_send / 1000 * nodes * wall_seconds, cost

    seconds, cost = at(light["seconds"])
    return {"seconds": seconds, "low": at(light.get("low"))[0], "high": at(light.get("high"))[0],
            "sends_per_second_per_node": cost.rate, "ms_per_send": cost.ms_per_send, "where": cost.where}


def cpu_diagnosis(predicted_per_op: Mapping[str, float], counts: Mapping[str, int],
                  local_ms_per_op: Mapping[str, float]) -> pd.DataFrame:
    """Which operation's input was off: per operation, the CPU seconds the calibration's cost
    predicted against the seconds its cost measured on this cluster gives (``local_ms_per_op``,
    from single-operation windows here), largest difference first."""
    rows = []
    for op, predicted in predicted_per_op.items():
        here = local_ms_per_op.get(op)
        local = None if here is None else max(here, 0.0) * counts.get(op, 0) / 1000
        rows.append({"op": op, "ops": counts.get(op, 0), "predicted_seconds": predicted, "local_seconds": local,
                     "difference_seconds": None if local is None else predicted - local,
                     "relative": None if not local else predicted / local - 1})
    out = pd.DataFrame(rows)
    if len(out):
        out = out.reindex(out.difference_seconds.abs().sort_values(ascending=False, na_position="last").index)
    return out.reset_index(drop=True)


# ---- SSTables ----------------------------------------------------------------------------------
def predict_sstables(flushes: list[Mapping[tuple[str, int], int]]) -> dict[str, int]:
    """Per node: SSTables after ``flushes`` (each: compaction group (node, shard) -> the TWCS
    window of the newest row that flush put there), by the window arithmetic per group."""
    groups = sorted({g for f in flushes for g in f})
    out: dict[str, int] = {}
    for group in groups:
        windows = [f[group] for f in flushes if group in f]
        out[group[0]] = out.get(group[0], 0) + simulate_twcs(windows)[-1]
    return out
