"""CPU-bound nodes per tier from the node's knee at a latency target (the knee notebook), beside
the CPU curve's projection: the peak over what a node carries within the target, with headroom.

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lab.calibration.capacity_model.curve_pricing import NODES_DISAGREE
from lab.load.knee_spread import KNEE_AGREEMENT
from lab.errors import ValidationError
from lab.results.html import md_text
from lab.results.run_files import figure, is_figure


@dataclass(frozen=True, kw_only=True)
class KneeCapacity:
    """What one measured node carried within the target: sends/s of the mix on the cores it had."""

    sends_per_second: float
    node_cores: float          # the cores the node could use (a shared machine's less the loader's)
    status: str                # found | not reached (a lower bound) | bound (a lower bound)
    slo: str
    min_calls: int
    searches: int = 1
    spread: float | None = None            # half the searches' range over their median (None: one search)
    lowest: float | None = None            # the lowest search's sends/s (None: one search)

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> KneeCapacity | None:
        """From a knee notebook's values.json; None when it found no knee."""
        rate = values.get("knee_sends_per_second_per_node")
        if not is_figure(rate):
            return None
        cores = figure(values.get("knee_node_available_cores") or values.get("machine_cores") or 1,
                       "knee_node_available_cores", high=4096)
        calls = figure(values.get("min_calls") or 0, "min_calls", inclusive=True)
        spread = values.get("knee_spread") if isinstance(values.get("knee_spread"), Mapping) else {}
        searches = spread.get("searches")
        width, span = spread.get("spread"), spread.get("range")
        lowest = span[0] if isinstance(span, list) and len(span) == 2 and is_figure(span[0]) else None
        return cls(sends_per_second=float(rate), node_cores=max(cores, 0.1),
                   status=str(values.get("knee_status") or ""), slo=str(values.get("slo") or ""),
                   min_calls=int(calls), searches=searches if isinstance(searches, int) and 0 < searches < 1000 else 1,
                   spread=float(width) if is_figure(width, inclusive=True) else None, lowest=lowest)

    @property
    def lower_bound(self) -> bool:
        return self.status != "found"


def knee_nodes(knee: KneeCapacity, *, peak_sends_per_second: float, replica_factor: float, cores_per_node: int,
               headroom: float, replication_factor: int) -> tuple[int, float]:
    """(nodes, sends/s a production node carries at the knee): the knee per core of the measured
    node scaled to ``cores_per_node``, in the measured keyspace's copies (``replica_factor``: the
    mix's copies per send against them), run at ``headroom`` of it."""
    if peak_sends_per_second <= 0 or cores_per_node < 1 or not 0 < headroom <= 1 or replica_factor <= 0:
        raise ValidationError("peak sends/s, cores per node, headroom and replica factor must be positive",
                              peak=peak_sends_per_second, cores=cores_per_node, headroom=headroom)
    per_node = knee.sends_per_second * cores_per_node / knee.node_cores / replica_factor
    return max(replication_factor, math.ceil(peak_sends_per_second / (per_node * headroom))), per_node


def knee_sizing(knee: KneeCapacity, *, tiers: Sequence[float], sends_per_message: float, peak_factor: float,
                replica_factor: float, cores_per_node: int, headroom: float, replication_factor: int,
                curve_nodes: Mapping[float, int] | None = None) -> list[dict[str, Any]]:
    """Per tier (messages/day): nodes from the knee, and whether they are over NODES_DISAGREE apart
    from the curve's (``curve_nodes``)."""
    rows = []
    for tier in tiers:
        peak = tier / 86_400 * peak_factor * sends_per_message
        nodes, per_node = knee_nodes(knee, peak_sends_per_second=peak, replica_factor=replica_factor,
                                     cores_per_node=cores_per_node, headroom=headroom,
                                     replication_factor=replication_factor)
        curve = (curve_nodes or {}).get(tier)
        rows.append({"messages_per_day": tier, "peak_sends_per_second": peak, "nodes_knee": nodes,
                     "knee_sends_per_second_per_node": per_node, "nodes_cpu_curve": curve,
                     "nodes_knee_disagree": bool(curve is not None and abs(nodes / curve - 1) > NODES_DISAGREE)})
    return rows


def knee_lines(knee: KneeCapacity | None, rows: Sequence[Mapping[str, Any]], *, where: str, headroom: float,
               cores_per_node: int) -> str:
    """The report's paragraph: nodes per tier from the knee, beside the curve's, and what they are
    (``where``: markdown, the caller escapes what it quotes)."""
    if knee is None or not rows:
        return (f"\n\n**Knee**: {where}; run the knee notebook for the nodes a latency target allows "
                "(`lab load --slo` finds the same knee on any cluster).")
    bound = (" A lower bound: the search did not reach the knee (every step met the target, or a loader- or "
             "machine-bound step ended it), so these counts are an upper estimate." if knee.lower_bound else "")
    quick = (f" Its steps had {knee.min_calls:,} calls, fewer than a p99 needs (1,000): a smoke figure."
             if 0 < knee.min_calls < 1000 else "")
    if knee.searches > 1 and knee.spread is not None:
        quick += (f" The knee is the median of {knee.searches} searches, ±{knee.spread:.0%} between them"
                  + (f": **wider than ±{KNEE_AGREEMENT:.0%}, so size from the lowest, {knee.lowest:,.1f} sends/s, or "
                     "run more searches**" if knee.spread > KNEE_AGREEMENT and knee.lowest is not None else "")
                  + ".")
    elif knee.searches == 1:
        quick += " One search: the knee has no spread or interval (the knee notebook's `searches`)."
    out = [f"\n\n**CPU side from the knee** ({where}): the node carried {knee.sends_per_second:,.1f} sends/s "
           f"of the capacity mix at {md_text(knee.slo)} on the {knee.node_cores:.2f} cores it had; scaled per core to "
           f"{cores_per_node} cores and run at {headroom:.0%} of the knee (headroom for compaction, repair and a node "
           f"down).{bound}{quick}", ""]
    for r in rows:
        curve = r.get("nodes_cpu_curve")
        beside = "" if curve is None else f" vs **{curve}** on the CPU curve" + (
            f" (**more than {NODES_DISAGREE:.0%} apart**)" if r["nodes_knee_disagree"] else "")
        out.append(f"- {r['messages_per_day']:,.0f} messages/day: peak {r['peak_sends_per_second']:,.0f} sends/s -> "
                   f"**{r['nodes_knee']} nodes within the target**{beside}; a node carries "
                   f"{r['knee_sends_per_second_per_node']:,.0f} sends/s at the knee.")
    out.append("\nThe two answer different questions: the curve prices the CPU a tier burns at the rate each node "
               "runs at; the knee says how many sends/s a node takes before its p99 leaves the target. Where they "
               "disagree, size from the larger.")
    return "\n".join(out)
