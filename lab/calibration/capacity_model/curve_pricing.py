"""The node's CPU per send as a curve over the send rate (the capacity model's mix as a whole), the
cost it gives at a rate, and the CPU-bound node count priced at the per-node rate it solves for.

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lab.errors import ValidationError
from lab.results.run_files import MAX_FIGURE, figure
from lab.load.verdict import machine_bound as busy

USABLE = "carried"          # the only verdict a point is priced from
MAX_ITERATIONS = 50
NODES_DISAGREE = 0.20      # CPU-bound nodes by two methods further apart than this: flagged


@dataclass(frozen=True, kw_only=True)
class CurvePoint:
    """One rate of the mix: what the node burnt per send there, and whether the load was carried."""

    sends_per_second: float            # requested
    achieved_sends_per_second: float
    calls_per_second: float            # every store call of the mix
    server_ms_per_send: float | None   # node CPU net of idle, per send (its reads, reactions, ... included)
    server_ms_per_send_ci_low: float | None
    server_ms_per_send_ci_high: float | None
    node_cores: float                  # net of idle: the node's utilization in cores
    node_cores_gross: float
    loadgen_cores: float
    corrected_p99_ms: float | None
    rounds: int
    verdict: str                       # carried | loader-bound | machine-bound | errors | below the requested rate

    @property
    def usable(self) -> bool:
        return self.verdict == USABLE and self.server_ms_per_send is not None and self.server_ms_per_send > 0

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CurvePoint:
        """A point as the lab writes it; a field of another kind is a ValueError naming it."""
        if not isinstance(data, Mapping):
            raise ValueError("cpu_curve.points: a point is not a JSON object")
        got = {k: data.get(k) for k in cls.__dataclass_fields__}
        for k in _OPTIONAL_FIGURES:
            if got[k] is not None:  # the server's figures may be below zero: an idle reading above the loaded one
                low = -MAX_FIGURE if k.startswith("server_") else 0.0
                got[k] = figure(got[k], f"cpu_curve.points.{k}", low=low, inclusive=True)
        for k in _FIGURES:
            got[k] = figure(got[k] or 0.0, f"cpu_curve.points.{k}", inclusive=True)
        got["rounds"] = int(figure(got["rounds"] or 0, "cpu_curve.points.rounds", inclusive=True))
        if not isinstance(got["verdict"], str):
            raise ValueError("cpu_curve.points.verdict: not a string")
        return cls(**got)


_OPTIONAL_FIGURES = ("server_ms_per_send", "server_ms_per_send_ci_low", "server_ms_per_send_ci_high",
                     "corrected_p99_ms")
_FIGURES = ("sends_per_second", "achieved_sends_per_second", "calls_per_second", "node_cores", "node_cores_gross",
            "loadgen_cores")


@dataclass(frozen=True, kw_only=True)
class Cost:
    ms_per_send: float
    rate: float              # the per-node rate asked about, in the measured node's sends/s
    where: str               # measured | interpolated | above the measured range | below the measured range


@dataclass(frozen=True, kw_only=True)
class CpuCurve:
    points: tuple[CurvePoint, ...]
    node_cores: int           # cores of the node the curve was measured on

    def usable(self) -> list[CurvePoint]:
        return sorted((p for p in self.points if p.usable), key=lambda p: p.achieved_sends_per_second)

    def cost_at(self, rate: float) -> Cost:
        """Server ms per send at ``rate`` sends/s on the measured node: log-log interpolation between
        the two usable points around it; outside the measured range, the nearest point's cost (above
        it an upper estimate, since the cost per send falls as the rate rises)."""
        pts = self.usable()
        if not pts:
            raise ValidationError("the CPU curve has no usable point (every rate loader- or machine-bound, or "
                                  "unresolved): nothing to price from", points=len(self.points))
        xs = [p.achieved_sends_per_second for p in pts]
        ys = [float(p.server_ms_per_send) for p in pts]
        if rate <= xs[0]:
            where = "measured" if math.isclose(rate, xs[0], rel_tol=1e-9) else "below the measured range"
            return Cost(ms_per_send=ys[0], rate=rate, where=where)
        if rate >= xs[-1]:
            where = "measured" if math.isclose(rate, xs[-1], rel_tol=1e-9) else "above the measured range"
            return Cost(ms_per_send=ys[-1], rate=rate, where=where)
        for x, y in zip(xs, ys):
            if math.isclose(rate, x, rel_tol=1e-9):
                return Cost(ms_per_send=y, rate=rate, where="measured")
        i = int(np.searchsorted(xs, rate))
        x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
        t = (math.log(rate) - math.log(x0)) / (math.log(x1) - math.log(x0))
        return Cost(ms_per_send=math.exp(math.log(y0) + t * (math.log(y1) - math.log(y0))), rate=rate,
                    where="interpolated")

    def fit(self) -> PowerLaw | None:
        return power_law([p.achieved_sends_per_second for p in self.usable()],
                         [float(p.server_ms_per_send) for p in self.usable()])

    def to_json(self) -> dict[str, Any]:
        fit = self.fit()
        return {"points": [p.to_json() for p in self.points], "node_cores": self.node_cores,
                "fit": None if fit is None else fit.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CpuCurve:
        """The curve as the lab writes it; a field of another kind is a ValueError naming it."""
        if not isinstance(data, Mapping):
            raise ValueError("cpu_curve: not a JSON object")
        points = data.get("points") or []
        if not isinstance(points, list):
            raise ValueError("cpu_curve.points: not a list")
        cores = figure(data.get("node_cores") or 1, "cpu_curve.node_cores", high=4096)
        return cls(points=tuple(CurvePoint.from_json(p) for p in points), node_cores=max(1, int(cores)))


HELD_OUT_TARGET = 0.15     # a rate left out of the curve, predicted from its neighbours, within this of its measure


@dataclass(frozen=True, kw_only=True)
class HeldOut:
    """One usable rate left out of the curve and predicted from the others (log-log between its
    neighbours): the model checked at a rate it did not see."""

    sends_per_second: float
    predicted_ms_per_send: float
    measured_ms_per_send: float

    @property
    def error(self) -> float:
        return self.predicted_ms_per_send / self.measured_ms_per_send - 1

    @property
    def met(self) -> bool:
        return abs(self.error) <= HELD_OUT_TARGET

    def to_json(self) -> dict[str, Any]:
        return {"sends_per_second": self.sends_per_second, "predicted_ms_per_send": self.predicted_ms_per_send,
                "measured_ms_per_send": self.measured_ms_per_send, "error": self.error, "met": self.met,
                "target": HELD_OUT_TARGET}


def held_out(curve: CpuCurve) -> list[HeldOut]:
    """Each interior usable point predicted by the curve without it (the ends have no neighbour on
    one side: an extrapolation, not a check of the curve's shape)."""
    pts = curve.usable()
    out = []
    for i in range(1, len(pts) - 1):
        rest = CpuCurve(points=tuple(p for j, p in enumerate(pts) if j != i), node_cores=curve.node_cores)
        p = pts[i]
        out.append(HeldOut(sends_per_second=p.achieved_sends_per_second,
                           predicted_ms_per_send=rest.cost_at(p.achieved_sends_per_second).ms_per_send,
                           measured_ms_per_send=float(p.server_ms_per_send)))
    return out


@dataclass(frozen=True, kw_only=True)
class PowerLaw:
    """ms per send = scale x rate ** exponent (exponent 0: a constant cost per send; -1: a fixed
    CPU rate whatever the load), fitted in log-log space."""

    scale: float
    exponent: float
    points: int

    def __call__(self, rate: float) -> float:
        return self.scale * rate ** self.exponent

    def to_json(self) -> dict[str, Any]:
        return {"scale": self.scale, "exponent": self.exponent, "points": self.points}


def power_law(rates: Sequence[float], ms: Sequence[float]) -> PowerLaw | None:
    """Least squares of log(ms) on log(rate); None under two distinct positive rates."""
    pairs = [(r, m) for r, m in zip(rates, ms) if r > 0 and m > 0]
    if len({r for r, _ in pairs}) < 2:
        return None
    x = np.log([r for r, _ in pairs])
    y = np.log([m for _, m in pairs])
    slope, intercept = np.polyfit(x, y, 1)
    return PowerLaw(scale=float(math.exp(intercept)), exponent=float(slope), points=len(pairs))


def machine_bound(*, node_cores: float, loadgen_cores: float, machine_cores: int, shared: bool) -> bool:
    """The node and the load generator on one machine together near its cores: the machine, not the
    store, set the limit (never a capacity figure)."""
    return busy(busy_cores=node_cores + loadgen_cores, machine_cores=machine_cores, shared=shared)


@dataclass(frozen=True, kw_only=True)
class CurveNodes:
    nodes: int
    per_node_rate: float      # sends/s per node, in the production node's own sends/s
    measured_rate: float      # the same load per core, as sends/s of the measured node
    cost: Cost
    server_cores: float
    iterations: int


def nodes_from_curve(curve: CpuCurve, *, peak_sends_per_second: float, replica_factor: float, cores_per_node: int,
                     target_cpu_utilization: float, replication_factor: int, start_nodes: int) -> CurveNodes:
    """The CPU-bound node count at the cost the curve gives for the per-node rate it implies: from
    ``start_nodes``, each node's share of the peak (``replica_factor``: the mix's copies per send
    against the measured keyspace's) is scaled per core to the measured node, priced on the curve,
    and the nodes recomputed until they stop changing (the largest of a cycle)."""
    if peak_sends_per_second <= 0 or cores_per_node < 1 or not 0 < target_cpu_utilization <= 1:
        raise ValidationError("peak sends/s, cores per node and utilization must be positive",
                              peak=peak_sends_per_second, cores=cores_per_node)
    nodes, seen = max(replication_factor, start_nodes), set()
    for i in range(1, MAX_ITERATIONS + 1):
        found = _at(curve, nodes, peak_sends_per_second, replica_factor, cores_per_node, i)
        nxt = max(replication_factor, math.ceil(found.server_cores / (cores_per_node * target_cpu_utilization)))
        if nxt == nodes:
            return found
        if nxt in seen:  # a cycle (the ceiling's steps): the largest of it
            return _at(curve, max(seen | {nodes, nxt}), peak_sends_per_second, replica_factor, cores_per_node, i)
        seen.add(nodes)
        nodes = nxt
    return _at(curve, max(seen | {nodes}), peak_sends_per_second, replica_factor, cores_per_node, MAX_ITERATIONS)


def _at(curve: CpuCurve, nodes: int, peak: float, replica_factor: float, cores_per_node: int, i: int) -> CurveNodes:
    per_node = peak * replica_factor / nodes
    measured = per_node * curve.node_cores / cores_per_node
    cost = curve.cost_at(measured)
    return CurveNodes(nodes=nodes, per_node_rate=per_node, measured_rate=measured, cost=cost,
                      server_cores=peak * replica_factor * cost.ms_per_send / 1000, iterations=i)


def replica_factor(mix: Mapping[str, float], *, replication_factor: int, measured_replication_factor: int,
                   cost_shares: Mapping[str, float] | None = None, write_operations: frozenset[str]) -> float:
    """Copies of the mix's work per send in production against the measured keyspace's: writes on
    every replica, reads on a quorum, weighted by each operation's share of the CPU (``cost_shares``,
    e.g. from the per-operation costs; else by calls)."""
    weights = ({op: float(cost_shares.get(op, 0.0)) for op, n in mix.items() if n > 0} if cost_shares
               else {op: float(n) for op, n in mix.items() if n > 0})
    total = sum(weights.values())
    if total <= 0:
        raise ValidationError("the mix has no operation with a positive share", mix=dict(mix))
    quorum, measured_quorum = replication_factor // 2 + 1, measured_replication_factor // 2 + 1
    return sum(w * (replication_factor / measured_replication_factor if op in write_operations
                    else quorum / measured_quorum) for op, w in weights.items()) / total


def curve_sizing(curve: CpuCurve, *, tiers: Sequence[float], sends_per_message: float, peak_factor: float,
                 factor: float, cores_per_node: int, target_cpu_utilization: float, replication_factor: int,
                 start_nodes: Mapping[float, int] | None = None) -> list[dict[str, Any]]:
    """Per tier (messages/day): the CPU-bound nodes priced on the curve at the per-node rate they imply."""
    rows = []
    for tier in tiers:
        peak = tier / 86_400 * peak_factor * sends_per_message
        got = nodes_from_curve(curve, peak_sends_per_second=peak, replica_factor=factor, cores_per_node=cores_per_node,
                               target_cpu_utilization=target_cpu_utilization, replication_factor=replication_factor,
                               start_nodes=(start_nodes or {}).get(tier, replication_factor))
        rows.append({"messages_per_day": tier, "peak_sends_per_second": peak, "nodes_cpu_curve": got.nodes,
                     "curve_sends_per_second_per_node": got.per_node_rate, "curve_measured_rate": got.measured_rate,
                     "curve_ms_per_send": got.cost.ms_per_send, "curve_where": got.cost.where,
                     "curve_server_cores": got.server_cores})
    return rows
