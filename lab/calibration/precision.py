"""Precision stated in advance: each measured constant has a target, and a run says whether it got there.

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from lab.measure import Stopwatch
from lab.measure.stats import MIN_INTERVAL_ROUNDS, TOO_FEW_ROUNDS

STATUSES = ("reached", "budget", "limit")


@dataclass(frozen=True, kw_only=True)
class Target:
    """Relative 95 % half-width to reach, per mode."""

    full: float
    quick: float

    def for_mode(self, quick: bool) -> float:
        return self.quick if quick else self.full


TARGETS: Mapping[str, Target] = {
    "b_row_bytes": Target(full=0.02, quick=0.10),
    "batch_read_in_list_limit": Target(full=0.10, quick=0.30),       # per-row cost at the recommended size
    "history_max_empty_bucket_scan": Target(full=0.10, quick=0.30),  # the cost of one empty bucket
    "lsm_space_amp": Target(full=0.05, quick=0.25),                   # steady state over replicates
}


@dataclass(frozen=True, kw_only=True)
class Precision:
    """How precisely one quantity was measured, against the target stated before the run."""

    quantity: str                    # what the interval is of (e.g. "b_row_bytes", "per_row_us at IN 50")
    target_rel_half_width: float
    achieved_rel_half_width: float | None
    status: str                      # reached | budget | limit
    steps: int                       # repeats or rounds measured
    seconds: float
    budget_seconds: float
    step_unit: str = "round"         # what one step is: round, repeat, batch (of samples_per_step samples)
    samples_per_step: int = 1        # samples the interval is over, per step (a batch of replicates: many)
    sample_unit: str | None = None   # what a sample is (None: the step itself)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"precision status must be one of {STATUSES}, got {self.status!r}")

    @property
    def reached(self) -> bool:
        return self.status == "reached"

    @property
    def too_few_rounds(self) -> bool:
        """Fewer samples than an interval needs (lab.measure.stats.MIN_INTERVAL_ROUNDS): no precision at all."""
        return self.achieved_rel_half_width is None and self.steps * self.samples_per_step < MIN_INTERVAL_ROUNDS

    def describe(self) -> str:
        """The precision in words, each step called what it is (``step_unit``: a round, a repeat,
        a batch of ``samples_per_step`` replicates)."""
        steps = _count(self.steps, self.step_unit)
        if self.too_few_rounds:
            sample = self.sample_unit or self.step_unit
            few = TOO_FEW_ROUNDS if sample == "round" else f"too few {sample}s for an interval"
            of = f" of {_count(self.samples_per_step, sample)}" if self.sample_unit else ""
            return (f"{few} ({steps}{of}, at least {MIN_INTERVAL_ROUNDS} {sample}s needed; target "
                    f"±{100 * self.target_rel_half_width:g}%): confidence low")
        got = "n/a" if self.achieved_rel_half_width is None else f"±{100 * self.achieved_rel_half_width:.1f}%"
        why = {"reached": "target reached", "budget": f"time budget of {self.budget_seconds:.0f} s ran out",
               "limit": "step limit reached"}[self.status]
        return f"{got} (target ±{100 * self.target_rel_half_width:g}%; {why} after {steps}, {self.seconds:.0f} s)"

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "reached": self.reached, "too_few_rounds": self.too_few_rounds,
                "text": self.describe()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Precision | None:
        if not data:
            return None
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def _count(n: int, unit: str) -> str:
    return f"{n} {unit}{'' if n == 1 else 'es' if unit.endswith(('ch', 'sh', 's', 'x')) else 's'}"


def sample_until(step: Callable[[int], None], achieved: Callable[[], float | None], *, quantity: str,
                 target: float, budget_seconds: float, min_steps: int, max_steps: int,
                 accept: Callable[[], bool] | None = None, step_unit: str = "round", samples_per_step: int = 1,
                 sample_unit: str | None = None) -> Precision:
    """Call ``step(i)`` for i = 0, 1, ... until ``achieved()`` (relative half-width after the
    steps so far) is at most ``target`` and ``accept()`` holds (e.g. the halves agree; checked
    from ``min_steps`` on), the next step would overrun ``budget_seconds`` (judged by the mean
    step time so far), or ``max_steps``.

    ``min_steps`` always run, whatever the budget: an interval needs them. ``step_unit``,
    ``samples_per_step``, ``sample_unit``: what a step is, in the record's words (a round; a
    repeat; a batch of 5 replicates)."""
    if min_steps < 1 or max_steps < min_steps:
        raise ValueError(f"need 1 <= min_steps <= max_steps, got {min_steps}, {max_steps}")
    watch = Stopwatch()
    steps, status, rel = 0, "limit", None
    while steps < max_steps:
        step(steps)
        steps += 1
        if steps < min_steps:
            continue
        rel = achieved()
        if rel is not None and rel <= target and (accept is None or accept()):
            status = "reached"
            break
        elapsed = watch.seconds()
        if steps < max_steps and elapsed + elapsed / steps > budget_seconds:
            status = "budget"
            break
    if rel is None and steps >= min_steps:
        rel = achieved()
    return Precision(quantity=quantity, target_rel_half_width=target, achieved_rel_half_width=rel, status=status,
                     steps=steps, seconds=round(watch.seconds(), 1), budget_seconds=budget_seconds,
                     step_unit=step_unit, samples_per_step=samples_per_step, sample_unit=sample_unit)


@dataclass(frozen=True, kw_only=True)
class Halves:
    """A recommendation from the first and the second half of the rounds, and whether they agree."""

    first: Any
    second: Any
    tolerance: float = 0.0  # a continuous recommendation (a density) agrees within this much

    @property
    def agree(self) -> bool:
        if self.first == self.second:
            return True
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (self.first, self.second))
        return numbers and abs(self.first - self.second) <= self.tolerance

    def to_json(self) -> dict[str, Any]:
        return {"first": self.first, "second": self.second, "tolerance": self.tolerance, "agree": self.agree}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Halves | None:
        if not data:
            return None
        return cls(first=data.get("first"), second=data.get("second"), tolerance=float(data.get("tolerance") or 0.0))


def halves(rounds: int, recommend: Callable[[list[int]], Any], *, tolerance: float = 0.0) -> Halves | None:
    """``recommend`` over rounds ``[0, n/2)`` and ``[n/2, n)`` (None for fewer than 2 rounds)."""
    if rounds < 2:
        return None
    mid = rounds // 2
    return Halves(first=recommend(list(range(mid))), second=recommend(list(range(mid, rounds))), tolerance=tolerance)
