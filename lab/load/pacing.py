"""Open-loop pacing: when each call of a fixed-rate load is due, independent of earlier calls.

More: docs/load-internals.md.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from collections.abc import Sequence

_NS = 1_000_000_000
SCHEDULE_FALSE_MISS = 1e-5  # chance a keeping-up store is called behind through the schedule's jitter alone


@dataclass(frozen=True, kw_only=True)
class Stage:
    """``rate`` total calls per second from ``start_s`` to ``end_s`` (seconds after T0)."""

    start_s: float
    end_s: float
    rate: float

    def __post_init__(self) -> None:
        if self.end_s <= self.start_s:
            raise ValueError(f"stage ends before it starts: {self.start_s}..{self.end_s}")
        if self.rate <= 0:
            raise ValueError(f"stage rate must be positive, got {self.rate}")


def stages_from_steps(steps: Sequence[tuple[float, float]]) -> tuple[Stage, ...]:
    """[(seconds, rate), ...] back to back from T0 -> stages."""
    out, t = [], 0.0
    for seconds, rate in steps:
        out.append(Stage(start_s=t, end_s=t + seconds, rate=rate))
        t += seconds
    return tuple(out)


@dataclass(frozen=True, kw_only=True)
class FixedRateSchedule:
    """Call ``k`` is due at ``start_ns + k * interval_ns``, whatever happened to earlier calls."""

    start_ns: int
    interval_ns: int

    def __post_init__(self) -> None:
        if self.interval_ns <= 0:
            raise ValueError(f"interval_ns must be positive, got {self.interval_ns}")

    @classmethod
    def for_rate(cls, rate_per_second: float, *, start_ns: int, phase: float = 0.0) -> FixedRateSchedule:
        if rate_per_second <= 0:
            raise ValueError(f"rate must be positive, got {rate_per_second}")
        interval = max(1, round(_NS / rate_per_second))
        return cls(start_ns=start_ns + int(phase * interval), interval_ns=interval)

    def due_ns(self, k: int) -> int:
        return self.start_ns + k * self.interval_ns

    def index_due_by(self, now_ns: int) -> int:
        """The first call index not yet due at ``now_ns``."""
        if now_ns < self.start_ns:
            return 0
        return (now_ns - self.start_ns) // self.interval_ns + 1


class UserPacer:
    """Due times of one user's calls through a stage table (the user's share of each rate).
    With ``rng``, each call is due at a point of its slot drawn from ``rng`` (the jittered
    schedule of the module docstring; ``phase`` is then unused); without, at ``phase`` of
    every slot."""

    def __init__(self, stages: Sequence[Stage], *, t0_ns: int, users: int, phase: float = 0.0,
                 rng: random.Random | None = None) -> None:
        if users < 1:
            raise ValueError("users must be >= 1")
        if not 0.0 <= phase < 1.0:
            raise ValueError("phase must be in [0, 1)")
        self.stages = tuple(stages)
        self.t0_ns = t0_ns
        self.users = users
        self.phase = 0.0 if rng is not None else phase
        self._rng = rng
        self._stage = 0
        self._k = 0
        self._started = False

    def _schedule(self, i: int) -> FixedRateSchedule:
        st = self.stages[i]
        return FixedRateSchedule.for_rate(st.rate / self.users, start_ns=self.t0_ns + int(st.start_s * _NS),
                                          phase=self.phase)

    def _end_ns(self, i: int) -> int:
        return self.t0_ns + int(self.stages[i].end_s * _NS)

    def next_due(self, now_ns: int) -> int | None:
        """The due time of the next call (may be in the past: the user is behind), or None
        when the stage table is over. A user that joins late starts at the first call due
        after it joined: it is not charged for time it did not exist."""
        while self._stage < len(self.stages):
            sched = self._schedule(self._stage)
            if not self._started:
                self._started = True
                self._k = max(self._k, sched.index_due_by(now_ns) if now_ns > sched.start_ns else 0)
            due = sched.due_ns(self._k)
            if self._rng is not None:
                due += int(self._rng.random() * sched.interval_ns)
            if due < self._end_ns(self._stage):
                self._k += 1
                return due
            self._stage += 1
            self._k = 0
        return None



def schedule_slack(users: int) -> float:
    """Calls a store that keeps up may still lack in a measured window through the schedule alone:
    each user's call is due at a random point of its slot, so the slot at each edge of the window
    lands inside or outside at random. Those are 2 x ``users`` independent 0/1 counts; by Hoeffding
    the sum falls ``t`` below its mean with chance at most exp(-t^2 / users), so ``t`` for a chance of
    ``SCHEDULE_FALSE_MISS``. Negligible for long steps (0.8% of 10,000 calls from 500 users)."""
    return math.sqrt(users * math.log(1 / SCHEDULE_FALSE_MISS)) if users > 0 else 0.0


def short_of(share: float, *, achieved_rate: float, requested_rate: float, users: int | None,
             seconds: float | None) -> bool:
    """Completed less than ``share`` of the requested rate, beyond :func:`schedule_slack`'s calls when
    the window's length and users are known (a window of unknown or unbounded length: no allowance)."""
    asked = share * requested_rate
    if not users or not seconds or not math.isfinite(seconds) or seconds <= 0:
        return achieved_rate < asked
    return achieved_rate * seconds < asked * seconds - schedule_slack(users)


STAIRCASE_FRACTIONS = (0.50, 0.75, 0.90, 1.05)


def staircase(max_rate: float, *, step_seconds: float, fractions: Sequence[float] = STAIRCASE_FRACTIONS,
              warmup_seconds: float = 0.0) -> tuple[Stage, ...]:
    """Steps at ``fractions`` of a measured maximum rate (SCT's 50/75/90/105%), each
    ``step_seconds`` long, after an optional warmup at the first step's rate."""
    steps = [(warmup_seconds, max_rate * fractions[0])] if warmup_seconds > 0 else []
    steps += [(step_seconds, max_rate * f) for f in fractions]
    return stages_from_steps(steps)
