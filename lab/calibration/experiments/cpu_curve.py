"""The node's CPU per send of the capacity model's whole mix, at several send rates: the curve the
capacity notebook prices each tier's peak on.

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from lab.calibration.capacity_model.curve_pricing import HELD_OUT_TARGET, CpuCurve, CurvePoint, held_out, machine_bound
from lab.calibration.capacity_model.cpu_sizing import DEFAULT_OPERATIONS_PER_MESSAGE
from lab.calibration.experiments.common import Testbed, TimedParams
from lab.calibration.experiments.mixed_load import IDLE, MixedLoad, run_mixed_steps
from lab.errors import ValidationError
from lab.load.verdict import Limits
from lab.measure import median_ci
from lab.measure.stats import TOO_FEW_ROUNDS

DEFAULT_SENDS_PER_SECOND = (10.0, 25.0, 50.0, 100.0, 200.0, 300.0)


@dataclass(frozen=True, kw_only=True)
class Params(TimedParams):
    sends_per_second: tuple[float, ...] = DEFAULT_SENDS_PER_SECOND   # the curve's rates (sends/s of the mix)
    operations_per_message: dict[str, float] | None = None           # None: the capacity model's default mix
    rounds: int = 6                            # an interval per rate needs 5 (lab.measure.stats); 1 to spare
    window_seconds: float = 8.0
    idle_seconds: float = 4.0
    workers: int | None = None                 # None: sized per rate after the warmup
    history_conversations: int = 10
    history_rows: int = 400
    group_backlog: int = 500

    def mix(self) -> dict[str, float]:
        return dict(self.operations_per_message or DEFAULT_OPERATIONS_PER_MESSAGE)


@dataclass(frozen=True, kw_only=True)
class Result:
    params: Params
    curve: CpuCurve
    windows: pd.DataFrame               # every window of every rate (lab.calibration.experiments.mixed_load)
    shared_machine: bool                # the node runs on this machine (its CPU and the loader's share the cores)
    machine_cores: int
    copies: int = 1
    workers: dict[str, int] = field(default_factory=dict)

    def points(self) -> pd.DataFrame:
        return pd.DataFrame([p.to_json() for p in self.curve.points])

    def values(self) -> dict[str, Any]:
        fit = self.curve.fit()
        usable = self.curve.usable()
        checks = held_out(self.curve)
        return {"cpu_curve": self.curve.to_json(), "operations_per_message": self.params.mix(),
                "sends_per_second": list(self.params.sends_per_second), "rounds": self.params.rounds,
                "window_seconds": self.params.window_seconds, "shared_machine": self.shared_machine,
                "machine_cores": self.machine_cores, "measured_replication_factor": self.copies,
                "usable_points": len(usable), "points": len(self.curve.points),
                "curve_exponent": None if fit is None else fit.exponent,
                "lightest_ms_per_send": usable[0].server_ms_per_send if usable else None,
                "heaviest_ms_per_send": usable[-1].server_ms_per_send if usable else None,
                "heaviest_usable_sends_per_second": usable[-1].achieved_sends_per_second if usable else None,
                "held_out": [h.to_json() for h in checks], "held_out_target": HELD_OUT_TARGET,
                "held_out_met": all(h.met for h in checks) if checks else None,
                "held_out_worst_error": max((abs(h.error) for h in checks), default=None)}


def _shared(testbed: Testbed) -> bool:
    """Does the node run on this machine (every contact point a loopback address)?"""
    def loopback(host: str) -> bool:
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return host == "localhost"
    return all(loopback(h) for h in testbed.config.contact_points)


def point(load: MixedLoad, sends_per_second: float, *, machine_cores: int, shared: bool) -> CurvePoint:
    """One rate's windows as a point: per round, the node's CPU net of its idle neighbours per send
    completed (median over rounds, bootstrap interval), its utilization, and the load's verdict."""
    rounds = load.rounds()
    mixed = load.windows.drop_duplicates("seq")
    mixed = mixed[mixed.kind != IDLE]
    bound = set(load.loader_bound_rounds())
    per_round = rounds.groupby("round").agg(net=("net_cpu_seconds", "sum"), gross=("cpu_seconds", "sum"),
                                            wall=("wall_seconds", "first"))
    sends = mixed.set_index("round").sends if "sends" in mixed else pd.Series(dtype=float)
    ms = [1000 * r.net / sends[i] for i, r in per_round.iterrows() if i not in bound and sends.get(i, 0) > 0]
    med, low, high = median_ci(np.asarray(ms, dtype=float)) if ms else (None, None, None)
    wall = float(per_round.wall.sum()) or 1.0
    node_cores = float(per_round.net.sum()) / wall
    gross = float(per_round.gross.sum()) / wall
    carried = load.load()
    loadgen = float(carried["loadgen_cores"] or 0.0)
    verdict = carried["verdict"]
    if machine_bound(node_cores=gross, loadgen_cores=loadgen, machine_cores=machine_cores, shared=shared):
        verdict = "machine-bound"
    total_wall = float(mixed.wall_seconds.sum()) or 1.0
    p99 = pd.to_numeric(mixed.corrected_p99_ms, errors="coerce").dropna() if "corrected_p99_ms" in mixed else []
    return CurvePoint(sends_per_second=sends_per_second,
                      achieved_sends_per_second=float(mixed.sends.sum()) / total_wall if "sends" in mixed else 0.0,
                      calls_per_second=float(mixed.ops.sum()) / total_wall, server_ms_per_send=med,
                      server_ms_per_send_ci_low=low, server_ms_per_send_ci_high=high, node_cores=node_cores,
                      node_cores_gross=gross, loadgen_cores=loadgen,
                      corrected_p99_ms=float(np.max(p99)) if len(p99) else None, rounds=len(ms), verdict=verdict)


def run(testbed: Testbed, params: Params, *, constants: Any) -> Result:
    rates = sorted(set(float(r) for r in params.sends_per_second))
    if not rates or any(r <= 0 for r in rates):
        raise ValidationError(f"sends_per_second must be positive rates, got {params.sends_per_second!r}",
                              field="sends_per_second")
    mix = params.mix()
    if not mix.get("send"):
        raise ValidationError("the mix must send (operations_per_message['send'] > 0): the curve is per send",
                              field="operations_per_message")
    steps = {f"{r:g}": {op: r * n / mix["send"] for op, n in mix.items() if n > 0} for r in rates}
    loads = run_mixed_steps(testbed, constants=constants, steps=steps, rounds=params.rounds,
                            window_seconds=params.window_seconds, idle_seconds=params.idle_seconds,
                            workers=params.workers, seed=params.seed, keep=params.keep_keyspace,
                            show_progress=params.show_progress,
                            dataset={"history_conversations": params.history_conversations,
                                     "history_rows": params.history_rows, "group_backlog": params.group_backlog},
                            limits=Limits(max_loader_cpu_percent_of_core=params.max_loader_cpu_percent_of_core))
    shared, cores = _shared(testbed), os.cpu_count() or 1
    points = tuple(point(load, r, machine_cores=cores, shared=shared) for load, r in zip(loads, rates))
    node_cores = _node_cores(testbed)
    windows = pd.concat([load.windows for load in loads], ignore_index=True).drop_duplicates(["seq", "node"])
    return Result(params=params, curve=CpuCurve(points=points, node_cores=node_cores), windows=windows,
                  shared_machine=shared, machine_cores=cores, copies=loads[0].copies if loads else 1,
                  workers={label: load.workers for label, load in zip(steps, loads)})


def _node_cores(testbed: Testbed) -> int:
    """Cores of the measured node: this machine's for a node on it, else its shards (ScyllaDB: one per core)."""
    if _shared(testbed):
        return os.cpu_count() or 1
    shards = testbed.admin.shards_per_node()  # one shard per core on ScyllaDB; Cassandra reports 1
    return max(shards.values(), default=1)


def _interval(p: CurvePoint) -> str:
    if p.server_ms_per_send_ci_low is None or p.server_ms_per_send_ci_high is None \
            or p.server_ms_per_send_ci_low == p.server_ms_per_send_ci_high:
        return TOO_FEW_ROUNDS
    return f"95% CI {p.server_ms_per_send_ci_low:.2f}-{p.server_ms_per_send_ci_high:.2f}"


def conclusion(result: Result, mix: Mapping[str, float] | None = None) -> str:
    mix = mix or result.params.mix()
    mix_text = ", ".join(f"{op} {n:g}" for op, n in mix.items())
    lines = [f"**Node CPU per send of the capacity model's mix** (per send: {mix_text}), "
             f"{result.params.rounds} rounds of {result.params.window_seconds:g}-second windows per rate in shuffled "
             "order, each between idle windows whose rate is taken out; the node "
             f"{'shares this machine with the load generator' if result.shared_machine else 'runs on another machine'} "
             f"({result.machine_cores} cores here).", ""]
    for p in result.curve.points:
        cost = ("no estimate" if p.server_ms_per_send is None
                else f"{p.server_ms_per_send:.2f} ms per send ({_interval(p)})")
        lines.append(f"- {p.sends_per_second:g} sends/s asked, {p.achieved_sends_per_second:.1f} achieved "
                     f"({p.calls_per_second:.0f} calls/s): {cost}; node {p.node_cores:.2f} cores net of idle, load "
                     f"generator {p.loadgen_cores:.2f}; corrected p99 "
                     f"{'n/a' if p.corrected_p99_ms is None else f'{p.corrected_p99_ms:,.1f} ms'}; **{p.verdict}**"
                     + ("" if p.usable else " (not used)") + ".")
    usable, fit = result.curve.usable(), result.curve.fit()
    if len(usable) >= 2:
        lo, hi = usable[0], usable[-1]
        lines += ["", f"From {lo.achieved_sends_per_second:.0f} to {hi.achieved_sends_per_second:.0f} sends/s the "
                      f"node's CPU per send goes from {lo.server_ms_per_send:.2f} to {hi.server_ms_per_send:.2f} ms "
                      f"({lo.server_ms_per_send / hi.server_ms_per_send:.1f}x)"
                      + (f"; a power law fits ms per send ~ rate^{fit.exponent:.2f}" if fit else "")
                      + ". The capacity notebook prices each tier at the cost for the per-node rate it solves for, "
                        "not at the lightest rate."]
    elif not usable:
        lines += ["", "**No usable point**: every rate was loader-bound, machine-bound, had errors or no sends; "
                      "the capacity notebook keeps the per-operation costs."]
    checks = held_out(result.curve)
    if checks:
        lines += ["", f"**The curve at rates it did not see** (each interior usable rate left out and predicted "
                      f"from its neighbours, target ±{HELD_OUT_TARGET:.0%}):"]
        lines += [f"- {h.sends_per_second:.1f} sends/s: predicted {h.predicted_ms_per_send:.2f} ms per send, measured "
                  f"{h.measured_ms_per_send:.2f}: {h.error:+.1%}, **{'met' if h.met else 'MISSED'}**" for h in checks]
    else:
        lines += ["", "No held-out check: it needs three usable rates (one left out between two others)."]
    machine = [p for p in result.curve.points if p.verdict == "machine-bound"]
    if machine:
        lines += ["", f"{len(machine)} rate(s) machine-bound: the node and the load generator together near this "
                      "machine's cores, so the machine, not the store, set the limit there."]
    return "\n".join(lines)
