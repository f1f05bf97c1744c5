"""Load shapes as Locust ``LoadTestShape`` stage tables.

More: docs/load-internals.md.
"""
from __future__ import annotations

import os
import time

import gevent
from locust import LoadTestShape

from lab.load.plan import LoadPlan

STOP_GRACE_SECONDS = 1.0  # after the last call is issued; in-flight calls finish under --stop-timeout
TICK_SECONDS = 1.0  # Locust's shape worker calls tick() once a second


class StageTableShape(LoadTestShape):
    """Hold ``plan.users`` from start-up through the last stage (or the closed-loop duration)."""

    def __init__(self) -> None:
        super().__init__()
        self.plan = LoadPlan.from_env(os.environ)
        edges = [s.end_s for s in self.plan.stages] or [self.plan.end_seconds]
        self.stages = [{"end_s": e, "users": self.plan.users, "spawn_rate": self.plan.users} for e in edges]

    def tick(self):
        t0 = self.plan.t0 or self.plan.published_t0()
        if t0 is None:  # lab load has not opened the start gate yet: spawn and wait
            return self.stages[0]["users"], self.stages[0]["spawn_rate"]
        elapsed = time.time() - t0  # seconds after t0; negative just before the start
        stop = self.stages[-1]["end_s"] + STOP_GRACE_SECONDS
        if 0 < stop - elapsed < TICK_SECONDS:
            # the next tick would stop the run up to a second late (0.95 s seen): stop on time
            gevent.sleep(stop - elapsed)
            elapsed = stop
        for stage in self.stages:
            if elapsed < stage["end_s"] + (STOP_GRACE_SECONDS if stage is self.stages[-1] else 0):
                return stage["users"], stage["spawn_rate"]
        return None
