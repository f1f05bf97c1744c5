"""Capacity with the measured b_row (design §7) and a production sizing projection.

More: docs/calibration-internals.md.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from lab.results.run_files import figure, is_figure, parse_run_values, read_run_json
from lab.calibration.capacity_model.capacity_inputs import (
    MIX_ROWS,
    Located,
    MixPrice,
    input_confidence,
    locate_b_row,
    locate_cpu,
    locate_cpu_curve,
    locate_knee,
    price,
    resolve_mix,
    row_model_of,
)
from lab.calibration.capacity_model.curve_pricing import NODES_DISAGREE, CpuCurve, curve_sizing, replica_factor
from lab.calibration.capacity_model.cpu_sizing import (
    DEFAULT_CORES_PER_NODE,
    DEFAULT_OPERATIONS_PER_MESSAGE,
    DEFAULT_PEAK_FACTOR,
    DEFAULT_TARGET_CPU_UTILIZATION,
    WRITE_OPERATIONS,
    costs_from_values,
    cpu_sizing,
)
from lab.calibration.capacity_model.aging import AGED, AgedTable
from lab.calibration.capacity_model.hold_apart import HOLD_APART, HoldApart
from lab.calibration.capacity_model.knee_pricing import KneeCapacity, knee_sizing
from lab.calibration.capacity_model.disk_sizing import (
    BYTES_PER_TB,
    DEFAULT_MESSAGES_PER_CONVERSATION_DAY,
    DEFAULT_TARGET_UTILIZATION,
    DEFAULT_TIERS_MESSAGES_PER_DAY,
    project_sizing,
    resident_bytes,
)
from lab.calibration.experiments.capacity_text import conclusion
from lab.results.jsonio import flatten

__all__ = ["Params", "Result", "conclusion", "run"]


@dataclass(frozen=True, kw_only=True)
class Params:
    b_row_bytes: float | None = None          # measured b_row; None: read b_row_values
    b_row_values: str | None = None           # path of a b_row run's values.json, or "auto" (this run's, else the latest)
    run_dir: str | None = None                # the run folder this notebook writes in (for "auto")
    tiers: tuple[float, ...] = DEFAULT_TIERS_MESSAGES_PER_DAY
    usable_disk_bytes_per_node: float = 3.84e12
    target_utilization: float = DEFAULT_TARGET_UTILIZATION
    messages_per_conversation_day: float = DEFAULT_MESSAGES_PER_CONVERSATION_DAY
    shards_per_node: int | None = None        # None: the b_row run's (Scylla shards), else 1
    lsm_space_amp: float | None = None        # None: space_amp_values' steady state if stationary, else appendix B
    space_amp_values: str | None = None       # path of a space_amp run's values.json
    my_mix: str | dict[str, float] | None = None  # a profile name or .toml file, or mean bytes per message
    my_mix_rows: int = MIX_ROWS               # generated messages a profile is priced on
    cpu_values: str | None = None             # path of a cpu_cost run's values.json, or "auto" (this run's, else the latest)
    cpu_curve_values: str | None = None       # path of a cpu_curve run's values.json, or "auto" (this run's, else the latest)
    knee_values: str | None = None            # path of a knee run's values.json, or "auto" (this run's, else the latest)
    operations_per_message: dict[str, float] | None = None  # None: DEFAULT_OPERATIONS_PER_MESSAGE
    peak_factor: float = DEFAULT_PEAK_FACTOR
    cores_per_node: int = DEFAULT_CORES_PER_NODE
    target_cpu_utilization: float = DEFAULT_TARGET_CPU_UTILIZATION


@dataclass(frozen=True, kw_only=True)
class Result:
    params: Params
    b_row_measured_bytes: float | None
    b_row_source: str                        # "parameter", a values.json path, or "none (design value only)"
    design_b_row_bytes: float
    sizing: pd.DataFrame       # tier x source
    sensitivity: pd.DataFrame  # b_row sweep at the starter tier
    b_row_located: Located | None = None     # where the b_row run was found (and how)
    b_row_confidence: str | None = None
    my_mix: MixPrice | None = None           # params.my_mix priced by the row model
    my_mix_located: Located | None = None    # the b_row run whose row model priced it
    my_mix_confidence: str | None = None
    cpu: pd.DataFrame | None = None          # tier x b_row source: cores, CPU- vs disk-bound nodes, which binds
    cpu_operations: pd.DataFrame | None = None  # tier x operation: peak rate, replicas, cores
    cpu_source: str | None = None
    cpu_located: Located | None = None
    cpu_confidence: str | None = None
    cpu_unresolved: tuple[str, ...] = ()     # operations whose CPU interval reached 0 in the cpu_cost run
    lsm_space_amp: float | None = None       # the factor the measured / my_mix rows used
    lsm_space_amp_source: str = "appendix B"
    lsm_space_amp_note: str = ""             # why appendix B's when a space_amp run was given
    cpu_curve: CpuCurve | None = None        # node CPU per send over the rate (cpu_curve notebook)
    cpu_curve_located: Located | None = None
    cpu_curve_sizing: pd.DataFrame | None = None  # tier: CPU-bound nodes priced on the curve
    curve_factor: float | None = None        # the mix's replica copies per send against the curve's keyspace
    knee: KneeCapacity | None = None         # what the measured node carried within the latency target
    knee_located: Located | None = None
    knee_sizing: pd.DataFrame | None = None  # tier: nodes from the knee beside the curve's
    hold_apart: HoldApart | None = None      # what-if: compliance_hold in a table of its own (space_amp run)
    aged: AgedTable | None = None            # what-if: the factor the table reaches at its age (space_amp run)

    def factors(self) -> dict[str, dict[str, Any]]:
        """Each factor of §7 (and the CPU costs): its value and whether it was measured in the run."""
        measured = "measured in this run"
        return {"b_row_bytes": {"value": self.b_row_measured_bytes or self.design_b_row_bytes,
                                "source": measured if self.b_row_measured_bytes else "appendix B"},
                "lsm_space_amp": {"value": self.lsm_space_amp,
                                  "source": measured if self.lsm_space_amp_source.startswith("measured") else
                                  self.lsm_space_amp_source, "note": self.lsm_space_amp_note},
                "replication_factor": {"value": int(self.sizing.replication_factor.iloc[0]), "source": "appendix B"},
                "capacity_retention_days": {"value": float(self.sizing.retention_days.iloc[0]), "source": "appendix B"},
                "cpu_ms_per_op": {"value": None, "source": measured if self.cpu is not None else "not given"}}

    def primary(self) -> str:
        """The b_row source the production sizing is stated in: measured, else the design's."""
        return "measured" if self.b_row_measured_bytes else "design"

    def values(self) -> dict[str, Any]:
        out: dict[str, Any] = {"b_row_measured_bytes": self.b_row_measured_bytes, "b_row_source": self.b_row_source,
                               "design_b_row_bytes": self.design_b_row_bytes,
                               "usable_disk_bytes_per_node": self.params.usable_disk_bytes_per_node,
                               "target_utilization": self.params.target_utilization,
                               "b_row_confidence": self.b_row_confidence,
                               "lsm_space_amp_used": self.lsm_space_amp, "lsm_space_amp_source": self.lsm_space_amp_source,
                               "lsm_space_amp_note": self.lsm_space_amp_note, "factors": self.factors()}
        if self.b_row_located is not None:
            out.update(b_row_from=self.b_row_located.how, b_row_run=self.b_row_located.run_id())
        sizing = self.sizing.assign(tier=self.sizing.messages_per_day.astype(int))
        out |= flatten(sizing, "{value}_{source}_{tier}",
                       {"resident_tb": float, "nodes_needed": int,
                        "disk_tb_per_node": ("disk_bytes_per_node", lambda b: float(b) / BYTES_PER_TB),
                        "partitions_per_node": float, "message_record_sstables_per_node": int})
        out |= flatten(sizing.drop_duplicates("source", keep="last"), "{value}_{source}",
                       {"partition_mb": ("partition_bytes", lambda b: float(b) / 1e6)})
        if self.cpu is not None:
            out.update(cpu_source=self.cpu_source, cpu_confidence=self.cpu_confidence, peak_factor=self.params.peak_factor,
                       cores_per_node=self.params.cores_per_node,
                       operations_per_message=dict(self.params.operations_per_message or DEFAULT_OPERATIONS_PER_MESSAGE))
            if self.cpu_located is not None:
                out.update(cpu_from=self.cpu_located.how, cpu_run=self.cpu_located.run_id())
            cpu = self.cpu.assign(tier=self.cpu.messages_per_day.astype(int))
            mine = cpu.b_row_source == "my_mix"
            out |= flatten(cpu[mine], "{value}_my_mix_{tier}", {"nodes": int, "binding": str})
            out |= flatten(cpu[~mine], "{value}_{tier}",
                           {"server_cores": float, "server_cores_ci_low": "server_cores_low",
                            "server_cores_ci_high": "server_cores_high", "nodes_cpu": int,
                            "nodes_disk": lambda n: int(n) if n is not None else None, "binding": str,
                            "rule_of_thumb_cores": float})
        if self.cpu_curve_sizing is not None:
            at = self.cpu_curve_located
            out.update(cpu_curve_from=at.how, cpu_curve_run=at.run_id(), cpu_curve_replica_factor=self.curve_factor)
            out |= flatten(self.cpu_curve_sizing.assign(tier=self.cpu_curve_sizing.messages_per_day.astype(int)),
                           "{value}_{tier}", {"nodes_cpu_curve": int, "curve_ms_per_send": float,
                                              "curve_sends_per_second_per_node": float, "curve_where": str,
                                              "curve_server_cores": float, "nodes_cpu_disagree": bool})
        if self.hold_apart is not None:
            out["hold_apart"] = self.hold_apart.to_json()
        if self.aged is not None:
            out["aged"] = self.aged.to_json()
        if self.knee_sizing is not None:
            out.update(knee_from=self.knee_located.how, knee_run=self.knee_located.run_id(), knee_slo=self.knee.slo,
                       knee_status=self.knee.status, knee_measured_sends_per_second=self.knee.sends_per_second,
                       knee_searches=self.knee.searches, knee_spread=self.knee.spread,
                       knee_lowest_sends_per_second=self.knee.lowest)
            out |= flatten(self.knee_sizing.assign(tier=self.knee_sizing.messages_per_day.astype(int)), "{value}_{tier}",
                           {"nodes_knee": int, "knee_sends_per_second_per_node": float, "nodes_knee_disagree": bool})
        if self.params.my_mix is not None:
            mix = self.my_mix
            out["my_mix"] = self.params.my_mix if isinstance(self.params.my_mix, str) else dict(self.params.my_mix)
            out.update(my_mix_name=mix.name, my_mix_source=mix.source, my_mix_b_row=mix.to_json(),
                       my_mix_b_row_bytes=mix.b_row_bytes, my_mix_confidence=self.my_mix_confidence,
                       my_mix_from=self.my_mix_located.how, my_mix_run=self.my_mix_located.run_id())
        return out


def resolve_b_row(b_row_bytes: float | None, values_path: str | Path | None) -> tuple[float | None, str]:
    """(b_row, where it came from): the parameter, else a b_row run's values.json, else None."""
    if b_row_bytes is not None:
        return float(b_row_bytes), "parameter"
    if values_path is not None and Path(values_path).exists():
        values = read_run_json(values_path)
        if values.get("b_row_bytes") is not None:
            b_row = parse_run_values(values_path, values["b_row_bytes"], lambda v: figure(v, "b_row_bytes", high=1e7))
            return b_row, str(values_path)
    return None, "none (design value only)"


def resolve_shards(shards_per_node: int | None, values_path: str | Path | None) -> int:
    """Shards per node: the parameter, else what the b_row run's cluster reported, else 1."""
    if shards_per_node is not None:
        return int(shards_per_node)
    if values_path is not None and Path(values_path).exists():
        shards = read_run_json(values_path).get("shards_per_node") or 1
        return int(parse_run_values(values_path, shards, lambda v: figure(v, "shards_per_node", high=4096)))
    return 1


def resolve_space_amp(value: float | None, values_path: str | Path | None, v: Mapping[str, Any] | None,
                      constants: Any) -> tuple[float, str, str]:
    """(lsm_space_amp, where it came from, why not measured): the parameter; else a space_amp
    run's steady-state factor (``v``, its values.json read from ``values_path``) when it measured
    one and it is stationary; else appendix B's."""
    if value is not None:
        return float(value), "parameter", ""
    if v is None:
        return constants.lsm_space_amp, "appendix B", "no space_amp run given"
    amp = v.get("lsm_space_amp")
    if amp is None:
        return constants.lsm_space_amp, "appendix B", f"the space_amp run {values_path} reached no steady state"
    amp = figure(amp, "lsm_space_amp")
    if v.get("lsm_space_amp_stationary") is False:
        h = v.get("lsm_space_amp_halves")
        first, second = (h.get("first"), h.get("second")) if isinstance(h, Mapping) else (None, None)
        halves = (f"{first:.2f} then {second:.2f}" if is_figure(first) and is_figure(second)
                  else "its halves not recorded")
        return (constants.lsm_space_amp, "appendix B",
                f"the space_amp run's factor is not stationary: {halves} "
                f"over the steady interval (measured {amp:.2f} and growing)")
    return amp, f"measured ({values_path})", ""


def _located(given: str | None, auto: Any, run_dir: str | None) -> Located | None:
    """A values.json given as a path ("this run" when it is in this run's folder, else "given"),
    found ("auto"), or none."""
    if given is None:
        return None
    if given == "auto":
        return auto()
    path = Path(given)
    if not path.exists():
        return Located(path=None, how=f"{given} not found")
    mine = run_dir is not None and path.resolve().parent.parent == Path(run_dir).resolve()
    return Located(path=path, how="this run" if mine else "given")


def run(params: Params, *, constants: Any) -> Result:
    b_row_at = _located(params.b_row_values, lambda: locate_b_row(params.run_dir), params.run_dir)
    b_row_path = b_row_at.path if b_row_at is not None else None
    measured, source = resolve_b_row(params.b_row_bytes, b_row_path)
    shards = resolve_shards(params.shards_per_node, b_row_path)
    b_row_conf = (input_confidence(b_row_path, measured="b_row_bytes", ci=("b_row_ci_low_bytes", "b_row_ci_high_bytes"),
                                   precision="b_row_precision") if params.b_row_bytes is None else None)
    mix = mix_at = mix_conf = None
    if params.my_mix is not None:
        spec = resolve_mix(params.my_mix)
        mix_at = (b_row_at if b_row_at is not None and b_row_at.path is not None and _has_model(b_row_at.path)
                  else locate_b_row(params.run_dir, need_row_model=True))
        mix = price(spec, row_model_of(mix_at), rows=params.my_mix_rows)  # CalibrationError when it cannot
        mix_conf = input_confidence(mix_at.path, measured="b_row_bytes",
                                    ci=("b_row_ci_low_bytes", "b_row_ci_high_bytes"), precision="b_row_precision")
    space = _space_amp_values(params.space_amp_values)
    amp, amp_source, amp_note = parse_run_values(params.space_amp_values, space, lambda v: resolve_space_amp(
        params.lsm_space_amp, params.space_amp_values, v, constants))
    sources = [("design", constants.b_row_bytes)] + ([("measured", measured)] if measured else [])
    sources += [("my_mix", mix.b_row_bytes)] if mix else []
    apart = parse_run_values(params.space_amp_values, space, HoldApart.from_values) if space is not None else None
    aged = parse_run_values(params.space_amp_values, space, AgedTable.from_values) if space is not None else None
    amps = {"design": constants.lsm_space_amp, HOLD_APART: apart.combined_amp if apart else None,
            AGED: aged.amp if aged else None}
    sources += [(HOLD_APART, measured or constants.b_row_bytes)] if apart else []
    sources += [(AGED, measured or constants.b_row_bytes)] if aged else []
    # the design rows keep the design's own factors; the measured and my_mix rows use the measured
    # lsm_space_amp; the what-if rows both tables' factor together
    sizing = pd.DataFrame([{"source": name, **_sized(params, constants.replace(
        b_row_bytes=b_row, lsm_space_amp=amps.get(name) or amp), tier, shards)}
        for name, b_row in sources for tier in params.tiers])
    extra = [constants.b_row_bytes] + ([measured] if measured else []) + ([mix.ci_high] if mix else [])
    sweep = np.unique(np.concatenate([np.linspace(200, max(4000, 1.2 * max(extra)), 39), extra]))
    sensitivity = pd.DataFrame({"b_row_bytes": sweep, "resident_tb": [
        resident_bytes(m_day=constants.capacity_messages_per_day, b_row_bytes=float(b), lsm_space_amp=amp,
                       replication_factor=constants.replication_factor,
                       retention_days=constants.capacity_retention_days) / BYTES_PER_TB for b in sweep]})
    cpu_at = _located(params.cpu_values, lambda: locate_cpu(params.run_dir), params.run_dir)
    cpu_path = cpu_at.path if cpu_at is not None else None
    cpu_values = read_run_json(cpu_path) if cpu_path is not None and Path(cpu_path).exists() else None
    costs = parse_run_values(cpu_path, cpu_values, costs_from_values) if cpu_values is not None else None
    cpu, cpu_ops = _cpu(params, costs, sizing, constants)
    unresolved: tuple[str, ...] = ()
    cpu_conf = None
    if cpu is not None:
        unresolved = tuple(op for op in cpu_values.get("operations") or [] if cpu_values.get(f"cpu_{op}_resolved") is False)
        cpu_conf = input_confidence(cpu_path, measured="", precision="cpu_precision", unresolved=bool(unresolved))
    curve_at, curve, curve_rows, factor = _curve(params, sizing, cpu, costs, constants)
    knee_at, knee, knee_rows = _knee(params, curve_rows, factor, constants)
    return Result(params=params, b_row_measured_bytes=measured, b_row_source=source,
                  design_b_row_bytes=constants.b_row_bytes, sizing=sizing, sensitivity=sensitivity,
                  b_row_located=b_row_at if b_row_path is not None else None, b_row_confidence=b_row_conf,
                  my_mix=mix, my_mix_located=mix_at, my_mix_confidence=mix_conf, cpu=cpu, cpu_operations=cpu_ops,
                  cpu_source=str(cpu_path) if cpu is not None else None, cpu_located=cpu_at,
                  cpu_confidence=cpu_conf, cpu_unresolved=unresolved,
                  lsm_space_amp=amp, lsm_space_amp_source=amp_source, lsm_space_amp_note=amp_note,
                  cpu_curve=curve, cpu_curve_located=curve_at, cpu_curve_sizing=curve_rows, curve_factor=factor,
                  knee=knee, knee_located=knee_at, knee_sizing=knee_rows, hold_apart=apart, aged=aged)


def _curve(params: Params, sizing: pd.DataFrame, cpu: pd.DataFrame | None, costs: Mapping[str, Any] | None,
           constants: Any) -> tuple[Located | None, CpuCurve | None, pd.DataFrame | None, float | None]:
    """The CPU curve (given, this run's or the latest) and each tier's nodes priced on it, beside
    the per-operation (light-rate) pricing when there is one: a gap over NODES_DISAGREE is flagged."""
    at = _located(params.cpu_curve_values, lambda: locate_cpu_curve(params.run_dir), params.run_dir)
    if at is None or at.path is None:
        return at, None, None, None
    values = read_run_json(at.path)
    curve, measured_rf = parse_run_values(at.path, values, lambda v: (
        CpuCurve.from_json(v.get("cpu_curve") or {}),
        int(figure(v.get("measured_replication_factor") or 1, "measured_replication_factor", high=64))))
    if not curve.usable():
        return at, curve, None, None
    mix = dict(params.operations_per_message or DEFAULT_OPERATIONS_PER_MESSAGE)
    shares = None
    if cpu is not None and params.cpu_values and params.cpu_values != "none" and costs:
        shares = {op: n * costs["cpu_ms_per_op"].get(op, 0.0) for op, n in mix.items()}
    factor = replica_factor(mix, replication_factor=constants.replication_factor,
                            measured_replication_factor=measured_rf,
                            cost_shares=shares, write_operations=WRITE_OPERATIONS)
    light = {} if cpu is None else {r.messages_per_day: int(r.nodes_cpu) for r in cpu[cpu.b_row_source != "my_mix"]
                                    .itertuples()}
    rows = pd.DataFrame(curve_sizing(curve, tiers=params.tiers, sends_per_message=mix.get("send", 1.0),
                                     peak_factor=params.peak_factor, factor=factor, cores_per_node=params.cores_per_node,
                                     target_cpu_utilization=params.target_cpu_utilization,
                                     replication_factor=constants.replication_factor, start_nodes=light))
    rows["nodes_cpu_light"] = [light.get(t) for t in rows.messages_per_day]
    rows["nodes_cpu_disagree"] = [bool(n is not None and abs(c / n - 1) > NODES_DISAGREE)
                                  for c, n in zip(rows.nodes_cpu_curve, rows.nodes_cpu_light)]
    return at, curve, rows, factor


def _space_amp_values(values_path: str | None) -> dict[str, Any] | None:
    """The space_amp run's values.json (the factor and both what-ifs read it), or None without one."""
    if values_path is None or not Path(values_path).exists():
        return None
    return read_run_json(values_path)


def _knee(params: Params, curve_rows: pd.DataFrame | None, factor: float | None,
          constants: Any) -> tuple[Located | None, KneeCapacity | None, pd.DataFrame | None]:
    """The knee (given, this run's or the latest) and each tier's nodes from it, beside the curve's."""
    at = _located(params.knee_values, lambda: locate_knee(params.run_dir), params.run_dir)
    if at is None or at.path is None:
        return at, None, None
    knee = parse_run_values(at.path, read_run_json(at.path), KneeCapacity.from_values)
    if knee is None:
        return at, None, None
    mix = dict(params.operations_per_message or DEFAULT_OPERATIONS_PER_MESSAGE)
    if factor is None:
        factor = replica_factor(mix, replication_factor=constants.replication_factor, measured_replication_factor=1,
                                write_operations=WRITE_OPERATIONS)
    curve = ({} if curve_rows is None else
             {r.messages_per_day: int(r.nodes_cpu_curve) for r in curve_rows.itertuples()})
    rows = knee_sizing(knee, tiers=params.tiers, sends_per_message=mix.get("send", 1.0), peak_factor=params.peak_factor,
                       replica_factor=factor, cores_per_node=params.cores_per_node,
                       headroom=params.target_cpu_utilization, replication_factor=constants.replication_factor,
                       curve_nodes=curve)
    return at, knee, pd.DataFrame(rows)


def _has_model(values_path: Path) -> bool:
    try:
        return bool(read_run_json(values_path).get("row_model"))
    except (OSError, ValueError):
        return False


def _sized(params: Params, c: Any, tier: float, shards: int) -> dict[str, Any]:
    """One tier at one b_row: the nodes needed, then the sizing on that many nodes."""
    common = {"constants": c, "messages_per_day": tier, "usable_disk_bytes_per_node": params.usable_disk_bytes_per_node,
              "target_utilization": params.target_utilization,
              "messages_per_conversation_day": params.messages_per_conversation_day, "shards_per_node": shards}
    need = project_sizing(**common)
    return project_sizing(**common, node_count=need.nodes_needed).as_row()


def _cpu(params: Params, costs: Mapping[str, Any] | None, sizing: pd.DataFrame,
         constants: Any) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """Per tier: the CPU sizing (``costs``: from the cpu_cost run's values.json, read once) beside
    the disk-bound nodes of the measured b_row (else the design's) and, when priced, of your mix."""
    if costs is None:
        return None, None
    mix = dict(params.operations_per_message or DEFAULT_OPERATIONS_PER_MESSAGE)
    mix = {op: n for op, n in mix.items() if op in costs["cpu_ms_per_op"] or n == 0}  # ops not measured: said below
    sources = ["measured" if (sizing.source == "measured").any() else "design"]
    sources += ["my_mix"] if (sizing.source == "my_mix").any() else []
    rows, op_rows = [], []
    for tier in params.tiers:
        for source in sources:
            disk = sizing[(sizing.source == source) & (sizing.messages_per_day == tier)]
            c = cpu_sizing(messages_per_day=tier, operations_per_message=mix, peak_factor=params.peak_factor,
                           cores_per_node=params.cores_per_node, target_cpu_utilization=params.target_cpu_utilization,
                           replication_factor=constants.replication_factor,
                           nodes_disk=int(disk.nodes_needed.iloc[0]) if len(disk) else None, **costs)
            rows.append({**c.as_row(), "b_row_source": source})
            if source == sources[0]:
                op_rows += [{"messages_per_day": tier, "op": op, **entry} for op, entry in c.operations.items()]
    return pd.DataFrame(rows), pd.DataFrame(op_rows)
