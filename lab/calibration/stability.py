"""Whether a value chosen from a measured curve is stable: the share of bootstrap resamples that
choose it, and sampling that goes on until they do (or the budget ends: then it is inconclusive).

More: docs/calibration-internals.md, docs/calibration.md ("A choice is stable before it is proposed").
"""
from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from lab.calibration.precision import Precision, sample_until
from lab.measure import bootstrap_rounds
from lab.measure.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, MIN_INTERVAL_ROUNDS

# A value is proposed only when at least this share of the resamples choose it.
STABLE_SHARE = 0.90
# Resamples per check while sampling: enough to tell 90% from the 60-70% of a flat curve; the
# final verdict is taken over the lab's BOOTSTRAP_RESAMPLES.
CHECK_RESAMPLES = 400
# Every look at the data while sampling is one more chance for a flat curve to look stable by
# luck (docs/calibration.md): a stop before the budget needs this share, at least
# MIN_STOP_UNITS units, and the looks are spaced by CHECK_GROWTH (steps 30, 45, 68, ...).
EARLY_STOP_SHARE = 0.95
MIN_STOP_UNITS = 10
CHECK_GROWTH = 1.5


@dataclass(frozen=True, kw_only=True)
class Stability:
    """How often resamples of the units (rounds, holes) choose the full sample's ``choice``."""

    choice: Any                        # the full sample's choice (None: nothing qualified)
    share: float | None                # of the resamples choosing it; None: too few units to resample
    required: float = STABLE_SHARE
    units: int = 0                     # rounds (or holes) resampled
    unit: str = "round"
    resamples: int = 0
    tolerance: float = 0.0             # a continuous choice (a density): a resample within this chooses it
    runner_up: Any = None              # the most frequent other choice among the resamples
    runner_up_share: float | None = None

    @property
    def too_few(self) -> bool:
        return self.share is None

    @property
    def stable(self) -> bool:
        return self.choice is not None and self.share is not None and self.share >= self.required

    def describe(self) -> str:
        """'stable: 96% of resamples choose 150 (needs 90%)', or 'inconclusive: ...' and why."""
        needs = f"needs {100 * self.required:.0f}%"
        if self.choice is None:
            return "nothing chosen: no candidate qualified"
        if self.share is None:
            return (f"inconclusive: {self.units} {self.unit}{'' if self.units == 1 else 's'}, too few to resample "
                    f"(at least {MIN_INTERVAL_ROUNDS}; {needs} of resamples choosing {_fmt(self.choice)})")
        within = f" (within {self.tolerance:g})" if self.tolerance else ""
        text = (f"{'stable' if self.stable else 'inconclusive'}: {100 * self.share:.0f}% of resamples choose "
                f"{_fmt(self.choice)}{within} ({needs}")
        if not self.stable and self.runner_up is not None and self.runner_up_share:
            text += f"; next {_fmt(self.runner_up)} at {100 * self.runner_up_share:.0f}%"
        return text + ")"

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "stable": self.stable, "text": self.describe()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Stability | None:
        if not data:
            return None
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def _fmt(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _same(a: Any, b: Any, tolerance: float) -> bool:
    if a is None or b is None:
        return False
    if a == b:
        return True
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))
    return numbers and abs(float(a) - float(b)) <= tolerance + 1e-12


_FULL = object()


def stops_early(stability: Stability) -> bool:
    """Whether sampling may stop before its budget on this look: at least MIN_STOP_UNITS units
    and EARLY_STOP_SHARE of the resamples choosing the same value."""
    return (stability.choice is not None and stability.share is not None and stability.units >= MIN_STOP_UNITS
            and stability.share >= max(EARLY_STOP_SHARE, stability.required))


def choice_stability(units: int, choose: Callable[[np.ndarray], Any], *, choice: Any = _FULL,
                     required: float = STABLE_SHARE, tolerance: float = 0.0, resamples: int = BOOTSTRAP_RESAMPLES,
                     seed: int = BOOTSTRAP_SEED, unit: str = "round") -> Stability:
    """``choose(indices)`` over ``resamples`` bootstrap resamples of the units ``0..units-1``
    (whole rounds: lab.measure.bootstrap_rounds), against ``choice`` (default: ``choose`` over
    all units). A resample choosing None (nothing qualified) chooses something else. Fewer than
    MIN_INTERVAL_ROUNDS units: share None (too few, never stable). Seeded: the same data give
    the same verdict."""
    if not 0 < required <= 1:
        raise ValueError(f"required share must be in (0, 1], got {required}")
    if choice is _FULL:
        choice = choose(np.arange(units)) if units > 0 else None
    boot = bootstrap_rounds(units, choose, resamples=resamples, seed=seed)
    if not boot or choice is None:
        return Stability(choice=choice, share=None if not boot else 0.0, required=required, units=units, unit=unit,
                         resamples=len(boot), tolerance=tolerance)
    same = sum(1 for b in boot if _same(b, choice, tolerance))
    others = Counter(b for b in boot if not _same(b, choice, tolerance))
    runner, count = others.most_common(1)[0] if others else (None, 0)
    return Stability(choice=choice, share=same / len(boot), required=required, units=units, unit=unit,
                     resamples=len(boot), tolerance=tolerance, runner_up=runner,
                     runner_up_share=count / len(boot) if runner is not None else None)


def sample_until_stable(step: Callable[[int], None], stability: Callable[[int], Stability], *,
                        budget_seconds: float, min_steps: int, max_steps: int,
                        achieved: Callable[[], float | None] | None = None, quantity: str = "", target: float = 0.0,
                        accept: Callable[[], bool] | None = None, **record: Any) -> tuple[Precision | None, Stability]:
    """The stopping rule of a value chosen from a curve: call ``step(i)`` for i = 0, 1, ...
    (:func:`lab.calibration.precision.sample_until`: ``min_steps`` always, then until its stop
    conditions hold, the time budget or ``max_steps``), where the conditions are the precision of
    ``achieved`` at ``target`` (when given), ``accept`` (when given) and, always, a stable
    choice (``stability(CHECK_RESAMPLES)``). A choice that never gets stable samples to
    the budget. Returns the precision record (None without ``achieved``) and the verdict over
    ``BOOTSTRAP_RESAMPLES`` (``stability(resamples)`` over the units sampled by then).
    The looks are spaced (CHECK_GROWTH) and an early stop is stricter than the verdict
    (:func:`stops_early`). ``record``: the Precision's ``step_unit`` etc."""

    taken, look = [0], [min_steps]

    def counted(i: int) -> None:
        step(i)
        taken[0] = i + 1

    def ready() -> bool:
        if taken[0] < look[0]:
            return False
        look[0] = max(taken[0] + 1, math.ceil(taken[0] * CHECK_GROWTH))
        if accept is not None and not accept():
            return False
        return stops_early(stability(CHECK_RESAMPLES))

    precision = sample_until(counted, achieved or (lambda: 0.0), quantity=quantity, target=target,
                             budget_seconds=budget_seconds, min_steps=min_steps, max_steps=max_steps, accept=ready,
                             **record)
    return (precision if achieved is not None else None), stability(BOOTSTRAP_RESAMPLES)
