"""The range-density threshold at other round trips, from the round trips each read waits for:
a group's IN lists go out concurrently (the batch reader's concurrency), a range is one request.

More: docs/calibration-internals.md (range_density_rtt).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from lab.store import DEFAULT_BATCH_CONCURRENCY

SHOWN_RTTS_US = (0, 1000, 2000)   # the round trips the conclusion always prices


def waits(requests: int, concurrency: int = DEFAULT_BATCH_CONCURRENCY) -> int:
    """Sequential round trips of ``requests`` issued with ``concurrency`` in flight."""
    return max(1, math.ceil(requests / concurrency))


@dataclass(frozen=True, kw_only=True)
class RangeDensityRtt:
    """The IN lists' extra round trips over a range, and the threshold at each round trip."""

    in_requests: int
    in_round_trips: int
    range_round_trips: int
    measured_rtt_us: int
    target_rtt_us: int | None
    by_rtt: dict[int, float]

    @property
    def extra_round_trips(self) -> int:
        return self.in_round_trips - self.range_round_trips

    @property
    def at_target(self) -> float | None:
        return None if self.target_rtt_us is None else self.by_rtt[self.target_rtt_us]

    def to_json(self) -> dict[str, Any]:
        return {"in_requests": self.in_requests, "in_round_trips": self.in_round_trips,
                "range_round_trips": self.range_round_trips, "measured_rtt_us": self.measured_rtt_us,
                "target_rtt_us": self.target_rtt_us, "by_rtt": {str(k): v for k, v in self.by_rtt.items()}}

    def describe(self) -> str:
        by = ", ".join(f"{v:g} at {r / 1000:g} ms" for r, v in self.by_rtt.items())
        moves = ("the threshold does not move with the round trip" if self.extra_round_trips == 0 else
                 f"the IN lists wait {self.extra_round_trips} more, each priced at the round trip")
        return (f"**Round trip**: a group's {self.in_requests} IN lists go out concurrently "
                f"({DEFAULT_BATCH_CONCURRENCY} in flight) and wait {self.in_round_trips} round trip(s), a range "
                f"{self.range_round_trips}: {moves}. By round trip: {by}."
                + ("" if self.target_rtt_us is None else
                   f" For the deployment's round trip of {self.target_rtt_us / 1000:g} ms: **{self.at_target:g}**."))


def range_density_by_rtt(density: pd.DataFrame, recommend: Callable[[pd.DataFrame], float], *, measured_rtt_us: int,
                         target_rtt_us: int | None, rtts_us: Iterable[int] = SHOWN_RTTS_US) -> RangeDensityRtt | None:
    """``recommend`` on the density sweep with the IN lists' extra round trips added to their time at
    each round trip (None without a sweep)."""
    if density.empty or "in_requests" not in density:
        return None
    in_requests = int(density.in_requests.max())
    range_requests = int(density.range_requests.max()) if "range_requests" in density else 1
    extra = waits(in_requests) - waits(range_requests)
    rtts = sorted({measured_rtt_us, *rtts_us, *([target_rtt_us] if target_rtt_us is not None else [])})
    by = {r: float(recommend(density.assign(in_server_us=density.in_server_us + extra * (r - measured_rtt_us))))
          for r in rtts}
    return RangeDensityRtt(in_requests=in_requests, in_round_trips=waits(in_requests),
                           range_round_trips=waits(range_requests), measured_rtt_us=measured_rtt_us,
                           target_rtt_us=target_rtt_us, by_rtt=by)


def rtt_values(rtt: RangeDensityRtt | None, measured: float) -> dict[str, Any]:
    """The keys of values.json; with a target, the threshold proposed is the target's."""
    out: dict[str, Any] = {"recommended_range_min_density_at_measured_rtt": measured,
                           "range_density_rtt": rtt.to_json() if rtt else None,
                           "range_density_rtt_text": rtt.describe() if rtt else None,
                           "recommended_range_min_density_at_target_rtt": rtt.at_target if rtt else None}
    if rtt is not None and rtt.at_target is not None:
        out["recommended_range_min_density"] = rtt.at_target
    return out
