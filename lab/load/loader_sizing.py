"""How many load processes (and machines) a requested rate needs, from the loader's measured CPU per call.

More: docs/load-internals.md.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.load.verdict import MAX_LOADER_CPU_PERCENT_OF_CORE
from lab.results.jsonio import write_json

SIZING_FILE = "load-sizing.json"
MIN_CALLS_TO_LEARN = 20  # fewer calls than this say nothing about the CPU per call
STEADY_IN_FLIGHT_SHARE = 0.10  # a window that started this much more (or less) than it finished is not steady


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True, kw_only=True)
class LoaderCost:
    """Measured loader CPU per call of one profile (all its operations, as mixed)."""

    profile: str
    driver: str
    cpu_ms_per_call: float
    calls: int
    run_id: str | None = None
    source: str = "measured window"      # measured window | warmup

    def capacity_per_process(self, max_cpu_percent_of_core: float = MAX_LOADER_CPU_PERCENT_OF_CORE) -> float:
        """Calls/s one process sustains at the CPU limit."""
        return (max_cpu_percent_of_core / 100.0) / (self.cpu_ms_per_call / 1000.0)

    def calls_per_core_second(self) -> float:
        return 1000.0 / self.cpu_ms_per_call

    def to_json(self) -> dict[str, Any]:
        return {"profile": self.profile, "driver": self.driver, "cpu_ms_per_call": round(self.cpu_ms_per_call, 4),
                "calls": self.calls, "run_id": self.run_id, "source": self.source,
                "calls_per_core_second": round(self.calls_per_core_second(), 1)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LoaderCost:
        return cls(profile=data["profile"], driver=data["driver"], cpu_ms_per_call=float(data["cpu_ms_per_call"]),
                   calls=int(data["calls"]), run_id=data.get("run_id"), source=data.get("source", "measured window"))


def measured_cost(*, profile: str, driver: str, cpu_seconds: float | None, calls: int, run_id: str | None = None,
                  source: str = "measured window") -> LoaderCost | None:
    """The cost of a stretch of a run, or None when it measured too little to say."""
    if cpu_seconds is None or cpu_seconds <= 0 or calls < MIN_CALLS_TO_LEARN:
        return None
    return LoaderCost(profile=profile, driver=driver, cpu_ms_per_call=1000.0 * cpu_seconds / calls, calls=calls,
                      run_id=run_id, source=source)


def steady_window(*, finished: int, started: int | None) -> bool:
    """About as many calls started as finished in the window: its CPU per finished call is the
    loader's cost. When the store does not keep up, calls pile up in flight: the CPU of the
    calls started (sent, waiting) falls on the few that finished (``lab load --rate 2000`` on
    2 cores: 14.3 ms per finished call, 2.3 x the steady 6.3 ms). ``started`` None (a worker
    of an older run): taken as steady."""
    if finished <= 0:
        return False
    if started is None:
        return True
    return abs(started - finished) <= STEADY_IN_FLIGHT_SHARE * max(started, finished)


def window_cost(*, profile: str, driver: str, cpu_seconds: float | None, finished: int, started: int | None,
                run_id: str | None = None) -> LoaderCost | None:
    """The measured window's cost per call, or None when it measured too little or was not
    steady (:func:`steady_window`)."""
    if not steady_window(finished=finished, started=started):
        return None
    return measured_cost(profile=profile, driver=driver, cpu_seconds=cpu_seconds, calls=finished, run_id=run_id)


def warmup_cost(*, profile: str, driver: str, cpu_seconds: float | None, finished: int, started: int | None,
                run_id: str | None = None) -> LoaderCost | None:
    """The warmup's cost per call: it starts with no call in flight, so its CPU is spent on the
    calls it *started* (the ones still in flight at its end sent, not yet answered: a slight
    underestimate); per finished call (an older worker) when the timeline does not count them."""
    calls = started if started is not None else finished
    return measured_cost(profile=profile, driver=driver, cpu_seconds=cpu_seconds, calls=calls, run_id=run_id,
                         source="warmup")


@dataclass(frozen=True, kw_only=True)
class Sizing:
    """What a rate needs of the loader, and what this machine gives."""

    rate: float
    cost: LoaderCost
    max_cpu_percent_of_core: float
    processes_needed: int
    usable_cores: int
    processes: int                      # what the run uses

    @property
    def machines_needed(self) -> int:
        return math.ceil(self.processes_needed / self.usable_cores)

    @property
    def enough(self) -> bool:
        return self.processes >= self.processes_needed

    def advice(self) -> str:
        cap = self.cost.capacity_per_process(self.max_cpu_percent_of_core)
        head = (f"loader sizing ({self.cost.source}, {self.cost.calls:,} calls of profile {self.cost.profile}): "
                f"{self.cost.cpu_ms_per_call:.2f} ms of loader CPU per call -> one process sustains {cap:,.0f} calls/s "
                f"at {self.max_cpu_percent_of_core:g}% of its core; {self.rate:,.0f} calls/s needs "
                f"{self.processes_needed} process{'es' if self.processes_needed != 1 else ''}")
        if self.enough:
            return f"{head}; running {self.processes}"
        if self.processes_needed <= self.usable_cores:
            return f"{head}, this run has {self.processes}: run with --processes {self.processes_needed}"
        return (f"{head}, more than this machine's {self.usable_cores} usable core(s): spread it over "
                f"{self.machines_needed} machines like this one: lab load --master --expect-workers "
                f"{self.processes_needed} ... here, and lab load --worker --master-host <this machine> on each "
                f"({self.usable_cores} per machine)")


def changed_note(before: int, before_what: str, after: Sizing) -> str:
    """Why a figure for the processes needed differs from the one before it (empty when the same):
    each names the cost per call it came from."""
    if before == after.processes_needed:
        return ""
    return (f" (changed from {before} {before_what}: this figure comes from {after.cost.source} "
            f"{after.cost.cpu_ms_per_call:.2f} ms of loader CPU per call over {after.cost.calls:,} calls"
            + (f" of run {after.cost.run_id}" if after.cost.run_id else "") + ")")


def size(rate: float, cost: LoaderCost, *, processes: int, cores: int | None = None,
         max_cpu_percent_of_core: float = MAX_LOADER_CPU_PERCENT_OF_CORE) -> Sizing:
    needed = max(1, math.ceil(rate / cost.capacity_per_process(max_cpu_percent_of_core)))
    return Sizing(rate=rate, cost=cost, max_cpu_percent_of_core=max_cpu_percent_of_core, processes_needed=needed,
                  usable_cores=cores or usable_cores(), processes=processes)


def auto_processes(rate: float | None, cost: LoaderCost | None, *, cores: int | None = None,
                   max_cpu_percent_of_core: float = MAX_LOADER_CPU_PERCENT_OF_CORE) -> int:
    """``--processes auto``: enough processes for ``rate`` by the learned cost, at most the
    usable cores; every usable core when nothing is learned yet; 1 without a rate (closed
    loop, web UI: the verdict's CPU check says when one is not enough)."""
    cores = cores or usable_cores()
    if rate is None:
        return 1
    if cost is None:
        return cores
    return min(cores, size(rate, cost, processes=1, cores=cores,
                           max_cpu_percent_of_core=max_cpu_percent_of_core).processes_needed)


class SizingBook:
    """``<home>/load-sizing.json``: the latest measured loader cost per (profile, driver)."""

    def __init__(self, home: Path | str) -> None:
        self.path = Path(home) / SIZING_FILE

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, profile: str, driver: str) -> LoaderCost | None:
        entry = self._read().get(f"{profile}/{driver}")
        try:
            return LoaderCost.from_json(entry) if entry else None
        except (KeyError, TypeError, ValueError):
            return None

    def put(self, cost: LoaderCost) -> None:
        data = self._read()
        data[f"{cost.profile}/{cost.driver}"] = cost.to_json()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_json(self.path, data)


def driver_name(options: Any) -> str:
    """How the load processes run store calls (``lab load --driver``): each learns its own cost."""
    if not options.native_threads:
        return "gevent"
    return "futures" if options.store_futures else "threads"


def resolve_processes(options: Any, home: Path, progress: Any = None) -> Any:
    """``LoadOptions`` with ``processes=None`` (``--processes auto``) resolved: what the rate needs
    by the loader cost learned for the profile, at most the usable cores; every usable core when
    nothing is learned yet."""
    if options.processes is not None:
        return options
    phase = progress.phase if progress is not None else (lambda _text: None)
    cost = SizingBook(home).get(options.profile, driver_name(options))
    top = max((s.rate for s in options.stages()), default=None)
    limit = options.limits.max_loader_cpu_percent_of_core
    n = auto_processes(top, cost, max_cpu_percent_of_core=limit)
    if top is None:
        phase("--processes auto: 1 process (closed loop: the verdict's CPU check says when one is not enough)")
    elif cost is None:
        phase(f"--processes auto: {n} (every usable core): no loader cost learned yet for profile "
              f"{options.profile}; measured during this run's warmup")
    else:
        phase(f"--processes auto, learned from run {cost.run_id}: "
              + size(top, cost, processes=n, max_cpu_percent_of_core=limit).advice())
    return dataclasses.replace(options, processes=n)
