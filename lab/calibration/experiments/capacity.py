"""Capacity with the measured b_row (design §7) and a production sizing projection.

Pure arithmetic over ``lab.calibration.capacity``: no cluster needed. b_row comes from a b_row run
(``values.json`` of the b_row notebook: the value itself, or a path) and is set next to the
design's 600 B for each traffic tier: resident bytes, nodes needed on a given disk at a target
utilization, disk per node, partitions per node, and SSTables per node after a year of TWCS
windows (per shard on Scylla: times the shards per node, from the parameter or the b_row run).

b_row is bytes of ONE replica per row (the b_row notebook divides the bytes summed over the
nodes by the copies of each row), so the §7 formula's RF factor is the only one applied here.

Your product's mix: ``my_mix`` gives the mean payload, media_metadata and thumbnail bytes per
message of a mix the lab never generated; the b_row run's row model
(:mod:`lab.calibration.row_model`) prices it (with its interval) and the sizing gets a third
source, ``my_mix``, beside the design's and the measured b_row.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lab.calibration.capacity import (BYTES_PER_TB, DEFAULT_MESSAGES_PER_CONVERSATION_DAY, DEFAULT_TARGET_UTILIZATION,
                        DEFAULT_TIERS_MESSAGES_PER_DAY, project_sizing, resident_bytes)


@dataclass(frozen=True, kw_only=True)
class Params:
    b_row_bytes: float | None = None          # measured b_row; None: read b_row_values
    b_row_values: str | None = None           # path of a b_row run's values.json
    tiers: tuple[float, ...] = DEFAULT_TIERS_MESSAGES_PER_DAY
    usable_disk_bytes_per_node: float = 3.84e12
    target_utilization: float = DEFAULT_TARGET_UTILIZATION
    messages_per_conversation_day: float = DEFAULT_MESSAGES_PER_CONVERSATION_DAY
    shards_per_node: int | None = None        # None: the b_row run's (Scylla shards), else 1
    lsm_space_amp: float | None = None        # None: appendix B
    my_mix: dict[str, float] | None = None    # mean bytes per message: payload_bytes, media_metadata_bytes, thumbnail_bytes


@dataclass(frozen=True, kw_only=True)
class Result:
    params: Params
    b_row_measured_bytes: float | None
    b_row_source: str
    design_b_row_bytes: float
    sizing: pd.DataFrame       # tier x source
    sensitivity: pd.DataFrame  # b_row sweep at the starter tier
    my_mix: dict[str, float] | None = None   # the row model's price of params.my_mix (mean, ci, prediction)
    my_mix_error: str | None = None

    def values(self) -> dict[str, Any]:
        out: dict[str, Any] = {"b_row_measured_bytes": self.b_row_measured_bytes, "b_row_source": self.b_row_source,
                               "design_b_row_bytes": self.design_b_row_bytes,
                               "usable_disk_bytes_per_node": self.params.usable_disk_bytes_per_node,
                               "target_utilization": self.params.target_utilization}
        for r in self.sizing.itertuples():
            key = f"{r.source}_{int(r.messages_per_day):d}"
            out[f"resident_tb_{key}"] = float(r.resident_tb)
            out[f"nodes_needed_{key}"] = int(r.nodes_needed)
            out[f"disk_tb_per_node_{key}"] = float(r.disk_bytes_per_node) / BYTES_PER_TB
            out[f"partitions_per_node_{key}"] = float(r.partitions_per_node)
            out[f"message_record_sstables_per_node_{key}"] = int(r.message_record_sstables_per_node)
            out[f"partition_mb_{r.source}"] = float(r.partition_bytes) / 1e6
        if self.params.my_mix is not None:
            out["my_mix"] = dict(self.params.my_mix)
            out["my_mix_b_row"] = self.my_mix
            out["my_mix_b_row_bytes"] = self.my_mix["mean"] if self.my_mix else None
            out["my_mix_error"] = self.my_mix_error
        return out


def resolve_b_row(b_row_bytes: float | None, values_path: str | Path | None) -> tuple[float | None, str]:
    """(b_row, where it came from): the parameter, else a b_row run's values.json, else None."""
    if b_row_bytes is not None:
        return float(b_row_bytes), "parameter"
    if values_path is not None and Path(values_path).exists():
        values = json.loads(Path(values_path).read_text())
        if values.get("b_row_bytes"):
            return float(values["b_row_bytes"]), str(values_path)
    return None, "none (design value only)"


def resolve_shards(shards_per_node: int | None, values_path: str | Path | None) -> int:
    """Shards per node: the parameter, else what the b_row run's cluster reported, else 1."""
    if shards_per_node is not None:
        return int(shards_per_node)
    if values_path is not None and Path(values_path).exists():
        return int(json.loads(Path(values_path).read_text()).get("shards_per_node") or 1)
    return 1


def price_mix(mix: dict[str, float], values_path: str | Path | None) -> tuple[dict[str, float] | None, str | None]:
    """(b_row of ``mix`` by the b_row run's row model, None) or (None, why not)."""
    from lab.calibration.row_model import RowModel

    if values_path is None or not Path(values_path).exists():
        return None, "no b_row run (b_row_values) to take the row model from"
    model = json.loads(Path(values_path).read_text()).get("row_model")
    if not model:
        return None, f"the b_row run {values_path} has no row model (its fit_mixes were not measured)"
    return RowModel.from_json(model).predict(mix), None


def run(params: Params, *, constants: Any) -> Result:
    measured, source = resolve_b_row(params.b_row_bytes, params.b_row_values)
    shards = resolve_shards(params.shards_per_node, params.b_row_values)
    priced, priced_error = price_mix(params.my_mix, params.b_row_values) if params.my_mix is not None else (None, None)
    if params.lsm_space_amp is not None:
        constants = constants.replace(lsm_space_amp=params.lsm_space_amp)
    rows = []
    sources = [("design", constants.b_row_bytes)] + ([("measured", measured)] if measured else [])
    sources += [("my_mix", priced["mean"])] if priced else []
    for name, b_row in sources:
        c = constants.replace(b_row_bytes=b_row)
        for tier in params.tiers:
            need = project_sizing(constants=c, messages_per_day=tier,
                                  usable_disk_bytes_per_node=params.usable_disk_bytes_per_node,
                                  target_utilization=params.target_utilization,
                                  messages_per_conversation_day=params.messages_per_conversation_day,
                                  shards_per_node=shards)
            at = project_sizing(constants=c, messages_per_day=tier, node_count=need.nodes_needed,
                                usable_disk_bytes_per_node=params.usable_disk_bytes_per_node,
                                target_utilization=params.target_utilization,
                                messages_per_conversation_day=params.messages_per_conversation_day,
                                shards_per_node=shards)
            rows.append({"source": name, **at.as_row()})
    sizing = pd.DataFrame(rows)
    sweep = np.unique(np.concatenate([np.linspace(200, 4000, 39), [constants.b_row_bytes] + ([measured] if measured else [])]))
    sensitivity = pd.DataFrame({"b_row_bytes": sweep, "resident_tb": [
        resident_bytes(m_day=constants.capacity_messages_per_day, b_row_bytes=float(b), lsm_space_amp=constants.lsm_space_amp,
                       replication_factor=constants.replication_factor,
                       retention_days=constants.capacity_retention_days) / BYTES_PER_TB for b in sweep]})
    return Result(params=params, b_row_measured_bytes=measured, b_row_source=source,
                  design_b_row_bytes=constants.b_row_bytes, sizing=sizing, sensitivity=sensitivity,
                  my_mix=priced, my_mix_error=priced_error)


def conclusion(result: Result) -> str:
    s = result.sizing
    design = s[s.source == "design"].iloc[0]
    lines = [f"**Design starter tier** ({design.messages_per_day:,.0f} messages/day, b_row {result.design_b_row_bytes:,.0f} B, "
             f"space amp {design.lsm_space_amp}, RF {design.replication_factor}, {design.retention_days:.0f} days): "
             f"{design.resident_tb:.1f} TB resident (the design's 15.8 TB)."]
    if result.b_row_measured_bytes:
        m = s[s.source == "measured"].iloc[0]
        lines.append(f"**With the measured b_row** ({result.b_row_measured_bytes:.0f} B, from {result.b_row_source}): "
                     f"{m.resident_tb:.1f} TB, {m.resident_tb / design.resident_tb:.2f}x the estimate; one full "
                     f"partition {m.partition_bytes / 1e6:.2f} MB vs {design.partition_bytes / 1e6:.2f} MB.")
    else:
        lines.append("No measured b_row was given: run the b_row notebook first (or pass `b_row_bytes`).")
    if result.params.my_mix is not None:
        if result.my_mix:
            mine = s[s.source == "my_mix"].iloc[0]
            mx = result.my_mix
            lines[-1] += (f" **Your mix** ({', '.join(f'{k} {v:,.0f}' for k, v in result.params.my_mix.items())} per "
                          f"message): b_row {mx['mean']:,.0f} B (95% CI {mx['ci_low']:,.0f}-{mx['ci_high']:,.0f}) by the "
                          f"row model, {mine.resident_tb:.1f} TB at the starter tier.")
        else:
            lines[-1] += f" Your mix could not be priced: {result.my_mix_error}."
    use = "measured" if result.b_row_measured_bytes else "design"
    for r in s[s.source == use].itertuples():
        lines.append(f"- {r.messages_per_day:,.0f} messages/day: {r.resident_tb:.1f} TB over **{r.nodes_needed} nodes** "
                     f"({r.disk_bytes_per_node / 1e12:.2f} TB each on {result.params.usable_disk_bytes_per_node / 1e12:.2f} TB "
                     f"disks at <= {result.params.target_utilization:.0%}), {r.partitions_per_node:,.0f} partitions and "
                     f"{r.message_record_sstables_per_node} message_record SSTables per node after a year of "
                     "7-day TWCS windows.")
    return "\n\n".join(lines[:2]) + f"\n\nProduction sizing ({use} b_row):\n\n" + "\n".join(lines[2:])
