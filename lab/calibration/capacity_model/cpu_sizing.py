"""The CPU side of capacity: cores and nodes for a daily message volume, a read/write mix and a
peak factor, from measured CPU seconds per operation, beside the disk-bound node count.

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lab.errors import ValidationError
from lab.results.run_files import MAX_FIGURE, figure

SECONDS_PER_DAY = 86_400
WRITE_OPERATIONS = frozenset({"send", "react"})
SCYLLA_SIMPLE_OPS_PER_CORE_SECOND = 12_500
# Assumptions, not measurements: what a message costs besides its send, per message sent.
# Each recipient opens the latest page now and then, scrolls back rarely, syncs a mailbox on
# reconnect (a grouped read of a backlog), and reacts sometimes. Replace with your product's.
DEFAULT_OPERATIONS_PER_MESSAGE: Mapping[str, float] = {
    "send": 1.0, "history_latest": 2.0, "history_older": 0.2, "batch_s1_group": 0.002, "batch_s1_dm": 0.02,
    "react": 0.3}
DEFAULT_PEAK_FACTOR = 3.0             # peak hour over the daily mean rate
DEFAULT_CORES_PER_NODE = 16
DEFAULT_TARGET_CPU_UTILIZATION = 0.6  # headroom for compaction, repair and a node down


@dataclass(frozen=True, kw_only=True)
class CpuSizing:
    messages_per_day: float
    peak_factor: float
    peak_messages_per_second: float
    operations: Mapping[str, Mapping[str, float]]   # op -> per_message, peak_per_second, replicas, cores, ...
    server_cores: float
    server_cores_low: float | None
    server_cores_high: float | None
    loadgen_cores: float | None        # client cores the same peak needs (the lab's client, measured apart)
    cores_per_node: int
    target_cpu_utilization: float
    nodes_cpu: int
    nodes_cpu_low: int | None
    nodes_cpu_high: int | None
    nodes_disk: int | None
    binding: str                       # cpu | disk | unknown
    nodes: int
    peak_requests_per_second: float
    rule_of_thumb_cores: float         # ScyllaDB's ~12.5K simple ops/s per core, same peak

    def as_row(self) -> dict[str, Any]:
        row = dataclasses.asdict(self)
        row.pop("operations")
        return row


def _check(name: str, value: Any, *, low: float = 0.0, inclusive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or math.isinf(value) \
            or (value < low if inclusive else value <= low):
        raise ValidationError(f"{name} must be a number {'>=' if inclusive else '>'} {low:g}, got {value!r}",
                              field=name, value=value)
    return float(value)


def _nodes(cores: float, per_node: float, rf: int) -> int:
    return max(rf, math.ceil(max(cores, 0.0) / per_node)) if per_node > 0 else rf


def cpu_sizing(*, messages_per_day: float, cpu_ms_per_op: Mapping[str, float],
               cpu_ms_interval: Mapping[str, tuple[float | None, float | None]] | None = None,
               requests_per_op: Mapping[str, float] | None = None,
               loadgen_ms_per_op: Mapping[str, float] | None = None,
               operations_per_message: Mapping[str, float] = DEFAULT_OPERATIONS_PER_MESSAGE,
               peak_factor: float = DEFAULT_PEAK_FACTOR, cores_per_node: int = DEFAULT_CORES_PER_NODE,
               target_cpu_utilization: float = DEFAULT_TARGET_CPU_UTILIZATION, replication_factor: int = 3,
               measured_replication_factor: int = 1, nodes_disk: int | None = None) -> CpuSizing:
    """Cores and nodes for the peak of ``messages_per_day`` (module docstring)."""
    _check("messages_per_day", messages_per_day)
    _check("peak_factor", peak_factor, low=1.0, inclusive=True)
    _check("target_cpu_utilization", target_cpu_utilization)
    if target_cpu_utilization > 1:
        raise ValidationError(f"target_cpu_utilization must be in (0, 1], got {target_cpu_utilization}",
                              field="target_cpu_utilization", value=target_cpu_utilization)
    if isinstance(cores_per_node, bool) or not isinstance(cores_per_node, int) or cores_per_node < 1:
        raise ValidationError(f"cores_per_node must be a positive int, got {cores_per_node!r}", field="cores_per_node")
    missing = sorted(op for op, n in operations_per_message.items() if n and op not in cpu_ms_per_op)
    if missing:
        raise ValidationError(f"no measured CPU cost for {', '.join(missing)} (measure them in the cpu_cost notebook, "
                              "or set their operations_per_message to 0)", operations=missing)
    for op, n in operations_per_message.items():
        _check(f"operations_per_message[{op}]", n, inclusive=True)
    peak_messages = messages_per_day / SECONDS_PER_DAY * peak_factor
    read_replicas = replication_factor // 2 + 1
    measured_read_replicas = measured_replication_factor // 2 + 1
    ops: dict[str, dict[str, float]] = {}
    cores = low = high = 0.0
    bounded = cpu_ms_interval is not None
    loadgen = 0.0 if loadgen_ms_per_op is not None else None
    requests = 0.0
    for op, per_message in operations_per_message.items():
        if not per_message:
            continue
        rate = peak_messages * per_message
        replicas = (replication_factor / measured_replication_factor if op in WRITE_OPERATIONS
                    else read_replicas / measured_read_replicas)
        ms = max(float(cpu_ms_per_op[op]), 0.0)  # an idle-corrected cost can dip below zero on a noisy machine
        op_cores = rate * ms / 1000 * replicas
        cores += op_cores
        entry = {"per_message": per_message, "peak_per_second": rate, "server_ms_per_op": ms, "replicas": replicas,
                 "cores": op_cores}
        if bounded:
            lo, hi = (cpu_ms_interval or {}).get(op, (None, None))
            if lo is None or hi is None:
                bounded = False
            else:
                low += rate * max(lo, 0.0) / 1000 * replicas
                high += rate * max(hi, 0.0) / 1000 * replicas
        if loadgen is not None:
            loadgen += rate * float((loadgen_ms_per_op or {}).get(op, 0.0)) / 1000
        req = float((requests_per_op or {}).get(op, 0.0))
        requests += rate * req * replicas
        entry["requests_per_op"] = req
        ops[op] = entry
    per_node = cores_per_node * target_cpu_utilization
    nodes_cpu = _nodes(cores, per_node, replication_factor)
    binding = "unknown" if nodes_disk is None else ("cpu" if nodes_cpu > nodes_disk else "disk")
    return CpuSizing(
        messages_per_day=messages_per_day, peak_factor=peak_factor, peak_messages_per_second=peak_messages,
        operations=ops, server_cores=cores, server_cores_low=low if bounded else None,
        server_cores_high=high if bounded else None, loadgen_cores=loadgen, cores_per_node=cores_per_node,
        target_cpu_utilization=target_cpu_utilization, nodes_cpu=nodes_cpu,
        nodes_cpu_low=_nodes(low, per_node, replication_factor) if bounded else None,
        nodes_cpu_high=_nodes(high, per_node, replication_factor) if bounded else None, nodes_disk=nodes_disk,
        binding=binding, nodes=max(nodes_cpu, nodes_disk or 0), peak_requests_per_second=requests,
        rule_of_thumb_cores=requests / SCYLLA_SIMPLE_OPS_PER_CORE_SECOND)


def costs_from_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of :func:`cpu_sizing` that a cpu_cost run's ``values.json`` gives;
    a field of a kind the lab never writes is a ValueError naming it (see parse_run_values)."""
    ops = values.get("operations") or []
    if not isinstance(ops, list) or not all(isinstance(op, str) for op in ops):
        raise ValueError("operations: not a list of operation names")
    get = lambda op, k: values.get(f"cpu_{op}_{k}")  # noqa: E731
    # the server's figures may be at or below zero (an idle reading above the loaded one, on a busy node):
    # such an operation's cost is below what the run resolves, so it is not priced (the capacity says so)
    server = lambda op, k: figure(get(op, k), f"cpu_{op}_{k}", low=-MAX_FIGURE, inclusive=True)  # noqa: E731
    opt = lambda op, k: None if get(op, k) is None else server(op, k)  # noqa: E731
    some = lambda op, k: figure(get(op, k) or 0.0, f"cpu_{op}_{k}", inclusive=True)  # noqa: E731
    present = [op for op in ops if get(op, "server_ms_per_op") is not None and server(op, "server_ms_per_op") > 0]
    rf = figure(values.get("measured_replication_factor") or 1, "measured_replication_factor", high=64)
    if rf != int(rf):
        raise ValueError(f"measured_replication_factor: {rf} is not a whole number")
    return {"cpu_ms_per_op": {op: figure(get(op, "server_ms_per_op"), f"cpu_{op}_server_ms_per_op") for op in present},
            "cpu_ms_interval": {op: (opt(op, "server_ms_per_op_ci_low"), opt(op, "server_ms_per_op_ci_high"))
                                for op in present},
            "requests_per_op": {op: some(op, "requests_per_op") for op in present},
            "loadgen_ms_per_op": {op: some(op, "loadgen_ms_per_op") for op in present},
            "measured_replication_factor": int(rf)}
