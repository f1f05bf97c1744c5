"""The node's knee at a latency target: the highest sends/s of the capacity model's mix (Locust's
``capacity`` profile) whose corrected p99 meets the target, by ``lab load --slo``'s search.

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from lab.calibration.experiments.common import Testbed, TimedParams, scratch_name
from lab.errors import ValidationError
from lab.load.knee_check import HELD_OUT_SHARE, HeldOutRate
from lab.load.knee_mix import MixCheck, MixPrediction, found_step, op_costs, predict
from lab.load.knee_search import MEETS, Knee, SearchPlan, Slo
from lab.load.knee_spread import KneeSpread
from lab.load.knee_run import KneeOptions, KneeResult, run_knee
from lab.load.load_folders import STATE_DIR
from lab.load.plan import load_profile
from lab.load.runner import LoadOptions
from lab.load.verdict import Limits
from lab.results import scratch
from lab.results.run_files import read_run_json


@dataclass(frozen=True, kw_only=True)
class Params(TimedParams):
    slo_percentile: str = "p99"            # the target: this percentile of the corrected latency ...
    slo_limit_ms: float = 50.0             # ... at most this
    profile: str = "capacity"              # the capacity model's mix (lab/load/profiles.toml)
    start_sends_per_second: float = 10.0   # the first step, in sends/s of the mix
    max_steps: int = 8
    min_calls: int = 1000                  # calls a step needs before its percentile counts
    step_seconds: float = 20.0             # the shortest measured window of a step
    warmup_seconds: float = 5.0
    seed_size: str = "standard"            # deep enough that readers page back (older pages)
    processes: int | None = None           # Locust processes (None: sized from the loader's learned cost)
    max_machine_cpu_percent: float = 85.0  # a shared machine busy at this % of its cores: machine-bound (100: off)
    held_out_share: float = HELD_OUT_SHARE  # one more step at this share of the knee checks the curve (0: none)
    idle_wait_seconds: float = 30.0        # before each search: wait up to this for the node to idle
    searches: int = 1                      # independent searches of the same plan: the knee's spread (5: an interval)
    unseen_profile: str = ""               # then this profile's knee, predicted from the knee and cpu_values, searched
    unseen_max_steps: int = 6              # ... in at most this many steps, from half the predicted rate ("": none)
    cpu_values: str | None = None          # the cpu_cost notebook's values.json: each operation's CPU per call

    def calls_per_send(self) -> float:
        weights = load_profile(self.profile).weights
        if weights.get("sender", 0) <= 0:
            raise ValidationError(f"profile {self.profile!r} does not send: the knee is in sends/s", field="profile")
        return sum(w for w in weights.values() if w > 0) / weights["sender"]


@dataclass(frozen=True, kw_only=True)
class Result:
    params: Params
    knee: Knee
    shared_machine: bool
    machine_cores: int
    path: Path
    audit_ok: bool | None
    rtt_us: int = 0                  # the round trip added to every request (lab.cluster.rtt_proxy)
    held_out: HeldOutRate | None = None  # the curve predicted at a rate it did not measure, then measured
    unseen: MixCheck | None = None       # the knee of a mix the search did not see, predicted then searched
    unseen_note: str = ""                # why there is no such check, when one was asked for
    spread: KneeSpread | None = None     # every search's knee (the first is ``knee``); None: ``knee`` alone

    @property
    def searches(self) -> KneeSpread:
        return self.spread if self.spread is not None else KneeSpread(knees=(self.knee,))

    def steps(self) -> pd.DataFrame:
        return pd.DataFrame([{"search": i + 1} | s.to_json(k.slo, k.plan.min_calls)
                             for i, k in enumerate(self.searches.knees) for s in k.steps])

    def statement(self) -> str:
        """The knee in one line: one search's own statement, or the median of several."""
        spread = self.searches
        if len(spread.knees) == 1:
            return self.knee.statement()
        rep, mid = spread.representative(), spread.estimate()[0]
        busy = [i + 1 for i, k in enumerate(spread.knees) if k.busy_before]
        busy_text = (f"; **the node was busy before search {', '.join(map(str, busy))}** (another client or its "
                     "compaction shared its steps)" if busy else "")
        if mid is None:
            return f"{rep.capacity_line()} (in each of {len(spread.knees)} searches){busy_text}"
        lower = "" if spread.status == "found" else "; a lower bound: a search did not reach its knee"
        lower += busy_text
        return (f"capacity: {mid:,.1f} sends/s per node at {rep.slo.text}, the median of {len(spread.knees)} "
                f"searches ({spread.range_text()}){lower}")

    def values(self) -> dict[str, Any]:
        spread = self.searches
        k = spread.representative()
        best = k.step
        loader = best.loadgen_cores if best is not None else None
        node_could = (self.machine_cores - loader) if self.shared_machine and loader is not None else None
        return {"slo": k.slo.text, "slo_percentile": k.slo.percentile, "slo_limit_ms": k.slo.limit_ms,
                "profile": self.params.profile, "calls_per_send": self.params.calls_per_send(),
                "min_calls": k.plan.min_calls, "steps": sum(len(x.steps) for x in spread.knees),
                "knee_status": spread.status, "searches": len(spread.knees), "knee_spread": spread.to_json(),
                "knee_sends_per_second_per_node": spread.estimate()[0],
                "knee_calls_per_second_per_node": None if best is None else best.achieved_rate / k.nodes,
                "knee_latency_ms": None if best is None else best.latency_ms,
                "knee_node_cores": None if best is None else best.node_cores,
                "knee_loadgen_cores": loader, "knee_node_available_cores": node_could,
                "nodes": k.nodes, "shared_machine": self.shared_machine, "machine_cores": self.machine_cores,
                "statement": self.statement(), "knee_file": str(self.path), "audit_ok": self.audit_ok,
                "rtt_us": self.rtt_us,
                "held_out_rate": None if self.held_out is None else self.held_out.to_json(),
                "held_out_cpu_error": None if self.held_out is None else self.held_out.cpu_error,
                "held_out_cpu_ok": None if self.held_out is None else self.held_out.cpu_ok,
                "unseen_mix": None if self.unseen is None else self.unseen.to_json(),
                "unseen_mix_error": None if self.unseen is None else self.unseen.error,
                "unseen_mix_ok": None if self.unseen is None else self.unseen.ok, "unseen_mix_note": self.unseen_note,
                "knee": self.knee.to_json()}


def run(testbed: Testbed, params: Params, *, out_dir: Path | str) -> Result:
    """The search on a scratch keyspace, its steps under ``out_dir``, then the unseen mix's when
    asked; the keyspace and the load state dropped afterwards unless ``keep_keyspace``."""
    slo = Slo(percentile=params.slo_percentile, limit_ms=float(params.slo_limit_ms))
    plan = SearchPlan(start_rate=params.start_sends_per_second * params.calls_per_send(), max_steps=params.max_steps,
                      min_calls=params.min_calls)
    keyspace = scratch_name("knee")
    config = testbed.config.replace(keyspace=keyspace)
    run_ids: list[str] = []

    def search(profile: str, search_plan: SearchPlan, held_out_share: float) -> KneeResult:
        run_ids.append(f"search-{uuid.uuid4().hex[:8]}")
        base = LoadOptions(profile=profile, processes=params.processes, seed_size=params.seed_size,
                           results=Path(out_dir), run_id=run_ids[-1],
                           limits=Limits(max_loader_cpu_percent_of_core=params.max_loader_cpu_percent_of_core,
                                         max_machine_cpu_percent=params.max_machine_cpu_percent))
        return run_knee(config, base, KneeOptions(slo=slo, search=search_plan, step_seconds=params.step_seconds,
                                                  warmup_seconds=params.warmup_seconds,
                                                  held_out_share=held_out_share,
                                                  idle_wait_seconds=params.idle_wait_seconds),
                        progress=None, services=testbed.services)

    if not isinstance(params.searches, int) or isinstance(params.searches, bool) or params.searches < 1:
        raise ValidationError(f"searches must be a whole number >= 1, got {params.searches!r}", field="searches")
    unseen, note = None, ""
    try:
        done = search(params.profile, plan, params.held_out_share)
        spread = KneeSpread(knees=(done.knee, *(search(params.profile, plan, 0.0).knee
                                                for _ in range(params.searches - 1))))
        if params.unseen_profile:
            try:
                predicted = predict_unseen(params, spread.representative())
            except ValidationError as exc:
                note = exc.message
            else:
                other = search(params.unseen_profile, SearchPlan(
                    start_rate=predicted.calls_per_second / 2, max_steps=params.unseen_max_steps,
                    min_calls=params.min_calls), 0.0)
                unseen = MixCheck(predicted=predicted, knee=other.knee)
    finally:
        if not params.keep_keyspace:
            scratch.drop_keyspace(testbed.connection, keyspace)
            for run_id in run_ids:
                shutil.rmtree(Path(testbed.config.lab_home) / STATE_DIR / run_id, ignore_errors=True)
    return Result(params=params, knee=done.knee, shared_machine=done.shared_machine, machine_cores=os.cpu_count() or 1,
                  path=done.path, audit_ok=None if done.audit is None else bool(done.audit.ok), rtt_us=done.rtt_us,
                  held_out=done.held_out, unseen=unseen, unseen_note=note,
                  spread=spread if params.searches > 1 else None)


def predict_unseen(params: Params, knee: Knee) -> MixPrediction:
    """The unseen profile's knee from the measured one (:mod:`lab.load.knee_mix`): the knee step's
    operation counts (its summary.json) and cpu_cost's prices; a ValidationError says why not."""
    if not params.cpu_values or not Path(params.cpu_values).is_file():
        raise ValidationError(f"no cpu_cost values to price the {params.unseen_profile} mix by (cpu_values "
                              f"{params.cpu_values!r}): run the cpu_cost notebook in the same run", field="cpu_values")
    costs = op_costs(read_run_json(params.cpu_values))  # BadRunFile: one line naming the file
    summary = read_run_json(Path(found_step(knee, params.profile).load_dir) / "summary.json")
    operations = summary.get("operations")
    counts = {op: int(o["count"]) for op, o in (operations or {}).items()
              if isinstance(o, dict) and isinstance(o.get("count"), int)}
    return predict(knee, base_profile=params.profile, base_counts=counts, profile=params.unseen_profile,
                   weights=load_profile(params.unseen_profile).weights, costs=costs)


def conclusion(result: Result) -> str:
    k, best = result.knee, result.searches.representative().step
    out = [f"**{result.statement()}**", ""]
    met = sum(o == MEETS for o in k.outcomes())
    out.append(f"{len(k.steps)} steps of the `{result.params.profile}` mix ({result.params.calls_per_send():.2f} calls "
               f"per send) in the first search, each with at least {k.plan.min_calls:,} calls; {met} met {k.slo.text}.")
    out.append(f"**The knee across searches**: {result.searches.describe()}.")
    if k.plan.min_calls < 1000:
        out.append(f"A step needed only {k.plan.min_calls:,} calls (a quick preset): its p99 stands on fewer calls "
                   "than a p99 needs (1,000); a smoke figure, not one to size from.")
    if result.shared_machine:
        extra = (f" At the knee the load generator took {best.loadgen_cores:.2f} of the machine's "
                 f"{result.machine_cores} cores and the node {best.node_cores:.2f}." if best is not None
                 and best.loadgen_cores is not None and best.node_cores is not None else "")
        out.append("The node shares this machine's cores with the load generator: a step where the machine's busy "
                   "CPU reached 85% of its cores is machine-bound and never the answer; the capacity notebook "
                   f"scales the knee per core by the cores the node had (the machine's less the loader's).{extra}")
    if result.held_out is not None:
        out.append(f"**The curve at a rate it did not measure**: {result.held_out.describe(k.slo.percentile)}.")
    elif result.params.held_out_share and best is not None:
        out.append("No held-out step: the search left fewer than two valid steps to predict it from.")
    if result.unseen is not None:
        out.append(f"**The knee of a mix it did not see**: {result.unseen.describe()}.")
    elif result.params.unseen_profile:
        out.append(f"**The knee of a mix it did not see** (`{result.params.unseen_profile}`): not predicted: "
                   f"{result.unseen_note}")
    if result.audit_ok is False:
        out.append("**The audit of the steps' acknowledged sends failed**: see knee.json.")
    return "\n".join(out)
