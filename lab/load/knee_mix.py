"""The knee of a mix the search did not measure: predicted from the measured knee and each
operation's CPU per call (node and load generator, the cpu_cost notebook's), then checked
against a search of that mix.

More: docs/load-internals.md (knee_mix).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lab.errors import ValidationError
from lab.load.knee_search import FOUND, Knee, KneeStep

KNEE_TOLERANCE = 0.20   # the unseen mix's knee predicted within this share of the measured
# the user kind behind each operation a Locust step counts (lab.load.locust.users)
KIND_OF = {"send": "sender", "send_retry": "sender", "history_latest": "history_reader",
           "history_older": "history_reader", "react": "reactor", "unreact": "reactor", "self_reaction": "reactor"}
# operations cpu_cost does not measure, priced as the one they resemble (a few % of a mix's calls)
PRICED_AS = {"send_retry": "send", "unreact": "react", "self_reaction": "react"}


@dataclass(frozen=True, kw_only=True)
class OpCost:
    """One operation's CPU per call: the node's (net of idle) and the load generator's, in ms."""

    server_ms: float
    loadgen_ms: float

    @property
    def machine_ms(self) -> float:
        return self.server_ms + self.loadgen_ms


def op_costs(values: Any) -> dict[str, OpCost]:
    """The operations a cpu_cost values.json prices with finite, non-negative figures (a file that
    is not a table, or a figure that is not a number, prices nothing)."""
    if not isinstance(values, Mapping):
        return {}
    out = {}
    for op in set(KIND_OF) - set(PRICED_AS):
        server, loadgen = values.get(f"cpu_{op}_server_ms_per_op"), values.get(f"cpu_{op}_loadgen_ms_per_op")
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
               for v in (server, loadgen)):
            out[op] = OpCost(server_ms=float(server), loadgen_ms=float(loadgen))
    return out


def kind_split(counts: Mapping[str, int]) -> dict[str, dict[str, float]]:
    """Per user kind, each of its operations' share of the kind's calls, as a measured step counted
    them (a reader's latest and older pages, a reactor's react / unreact / detail view)."""
    by_kind: dict[str, dict[str, float]] = {}
    for op, n in counts.items():
        if op in KIND_OF and n > 0:
            by_kind.setdefault(KIND_OF[op], {})[op] = float(n)
    return {kind: {op: n / sum(ops.values()) for op, n in ops.items()} for kind, ops in by_kind.items()}


def mix_shares(weights: Mapping[str, float], split: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Each operation's share of a profile's calls: at a fixed rate every user gets the same share,
    so the kinds' weights are their shares of the calls, each split as ``split`` measured it."""
    total = sum(w for w in weights.values() if w > 0)
    missing = sorted(k for k, w in weights.items() if w > 0 and k not in split)
    if not total or missing:
        raise ValidationError(f"the measured mix has no calls of {', '.join(missing) or 'any kind'}: their "
                              "operations' shares are unknown", kinds=missing)
    shares: dict[str, float] = {}
    for kind, w in weights.items():
        for op, share in (split[kind].items() if w > 0 else ()):
            shares[op] = shares.get(op, 0.0) + w / total * share
    return shares


def ms_per_call(shares: Mapping[str, float], costs: Mapping[str, OpCost]) -> float:
    """The machine's CPU per call of a mix (node and load generator)."""
    unpriced = sorted(op for op, s in shares.items() if s > 0 and PRICED_AS.get(op, op) not in costs)
    if unpriced:
        raise ValidationError(f"cpu_cost prices no {', '.join(unpriced)}: the mix's CPU per call is unknown",
                              operations=unpriced)
    return sum(s * costs[PRICED_AS.get(op, op)].machine_ms for op, s in shares.items())


@dataclass(frozen=True, kw_only=True)
class MixPrediction:
    """The unseen mix's knee: the measured knee's calls/s scaled by the two mixes' CPU per call
    (the knee taken as the load at which the machine burns what it burnt at the measured knee)."""

    profile: str
    base_profile: str
    base_calls_per_second: float
    base_ms_per_call: float
    ms_per_call: float
    calls_per_second: float
    sends_per_second: float


def found_step(knee: Knee, base_profile: str) -> KneeStep:
    """The knee step a prediction scales from: only a found knee (a lower bound scales to one)."""
    if knee.status != FOUND or knee.step is None:
        raise ValidationError(f"the {base_profile} mix's search found no knee ({knee.status}): nothing to scale",
                              status=knee.status)
    return knee.step


def predict(knee: Knee, *, base_profile: str, base_counts: Mapping[str, int], profile: str,
            weights: Mapping[str, float], costs: Mapping[str, OpCost]) -> MixPrediction:
    """``profile``'s knee from ``knee`` (the base profile's search, found) and its knee step's
    operation counts; a ValidationError says why not."""
    step = found_step(knee, base_profile)
    split = kind_split(base_counts)
    base_total = sum(n for op, n in base_counts.items() if op in KIND_OF and n > 0)
    base_shares = {op: n / base_total for op, n in base_counts.items() if op in KIND_OF and n > 0}
    shares = mix_shares(weights, split)
    base, mine = ms_per_call(base_shares, costs), ms_per_call(shares, costs)
    if base <= 0 or mine <= 0:
        raise ValidationError("cpu_cost priced the mixes at no CPU per call: nothing to scale by", base=base, mix=mine)
    calls = step.achieved_rate / knee.nodes * base / mine
    return MixPrediction(profile=profile, base_profile=base_profile, base_calls_per_second=step.achieved_rate
                         / knee.nodes, base_ms_per_call=base, ms_per_call=mine, calls_per_second=calls,
                         sends_per_second=calls * shares.get("send", 0.0))


@dataclass(frozen=True, kw_only=True)
class MixCheck:
    """The prediction against the unseen mix's own search."""

    predicted: MixPrediction
    knee: Knee
    tolerance: float = KNEE_TOLERANCE

    @property
    def measured_calls_per_second(self) -> float | None:
        step = self.knee.step
        return None if self.knee.status != FOUND or step is None else step.achieved_rate / self.knee.nodes

    @property
    def error(self) -> float | None:
        measured = self.measured_calls_per_second
        return None if not measured else self.predicted.calls_per_second / measured - 1

    @property
    def ok(self) -> bool | None:
        return None if self.error is None else abs(self.error) <= self.tolerance

    def describe(self) -> str:
        p = self.predicted
        head = (f"the `{p.profile}` mix's knee predicted from the `{p.base_profile}` knee "
                f"({p.base_calls_per_second:,.1f} calls/s at {p.base_ms_per_call:.2f} ms of machine CPU per call; "
                f"this mix {p.ms_per_call:.2f} ms): {p.calls_per_second:,.1f} calls/s ({p.sends_per_second:,.1f} sends/s)")
        if self.error is None:
            return f"{head}; its own search: {self.knee.statement()}, so the prediction is not checked"
        step = self.knee.step
        return (f"{head}; measured {step.achieved_rate / self.knee.nodes:,.1f} calls/s ({step.sends_per_second:,.1f} "
                f"sends/s) in {len(self.knee.steps)} steps: {100 * self.error:+.1f}% (target "
                f"±{100 * self.tolerance:g}%: {'met' if self.ok else 'MISSED'})")

    def to_json(self) -> dict[str, Any]:
        p = self.predicted
        return {"profile": p.profile, "base_profile": p.base_profile, "base_calls_per_second": p.base_calls_per_second,
                "base_ms_per_call": p.base_ms_per_call, "ms_per_call": p.ms_per_call,
                "predicted_calls_per_second": p.calls_per_second, "predicted_sends_per_second": p.sends_per_second,
                "measured_calls_per_second": self.measured_calls_per_second, "status": self.knee.status,
                "error": self.error, "ok": self.ok, "tolerance": self.tolerance, "statement": self.knee.statement()}
