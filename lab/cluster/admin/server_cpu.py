"""Server CPU time per node (and per shard on ScyllaDB): what an operation costs the server.

More: docs/cluster-internals.md.
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from lab.errors import AdminError
from lab.measure.timing import MS_PER_SECOND

REACTOR_BUSY_MS = "scylla_reactor_cpu_busy_ms"
REACTOR_UTILIZATION = "scylla_reactor_utilization"
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True, kw_only=True)
class CpuReading:
    """Cumulative CPU seconds of one server process (``shard`` None) or one Scylla shard."""

    node: str
    cpu_seconds: float
    source: str                 # proc | jmx | prometheus
    shard: int | None = None
    utilization_percent: float | None = None  # Scylla's reactor gauge at the moment of reading

    @property
    def key(self) -> tuple[str, int | None]:
        return self.node, self.shard


def parse_proc_stat(text: str) -> tuple[int, int]:
    """(utime, stime) in clock ticks from the text of ``/proc/<pid>/stat``. The command name
    (field 2) is in parentheses and may hold spaces or parentheses: fields are counted after
    the last ``)``."""
    close = text.rfind(")")
    if close < 0:
        raise AdminError(f"not a /proc/<pid>/stat line: {text[:80]!r}")
    fields = text[close + 2:].split()
    # after the name: state (3), ppid (4), ... utime is field 14, stime field 15 (proc(5))
    try:
        return int(fields[11]), int(fields[12])
    except (IndexError, ValueError) as exc:
        raise AdminError(f"unexpected /proc/<pid>/stat layout: {text[:120]!r}") from exc


def proc_cpu_seconds(pid: int, *, proc: str = "/proc") -> float:
    """utime + stime of process ``pid`` in seconds (every thread of it)."""
    try:
        with open(f"{proc}/{pid}/stat") as f:
            utime, stime = parse_proc_stat(f.read())
    except OSError as exc:
        raise AdminError(f"cannot read the CPU time of process {pid}: {exc}", pid=pid) from exc
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


def _labels(key: str) -> tuple[str, dict[str, str]]:
    name, _, rest = key.partition("{")
    return name, dict(_LABEL.findall(rest))


def reactor_readings(node: str, metrics: Mapping[str, float]) -> list[CpuReading]:
    """Per-shard readings from one node's Prometheus metrics (``{'name{labels}': value}``,
    :func:`lab.cluster.admin.scylla.parse_prometheus`)."""
    busy: dict[int, float] = {}
    util: dict[int, float] = {}
    for key, value in metrics.items():
        name, labels = _labels(key)
        if name not in (REACTOR_BUSY_MS, REACTOR_UTILIZATION) or "shard" not in labels:
            continue
        shard = int(labels["shard"])
        (busy if name == REACTOR_BUSY_MS else util)[shard] = float(value)
    if not busy:
        raise AdminError(f"node {node}: no {REACTOR_BUSY_MS} in its Prometheus metrics (a ScyllaDB node exports "
                         "it per shard; is prometheus_prefix changed, or is this not Scylla?)", node=node)
    return [CpuReading(node=node, shard=s, cpu_seconds=busy[s] / MS_PER_SECOND, source="prometheus",
                       utilization_percent=util.get(s)) for s in sorted(busy)]


def cpu_seconds_between(before: Iterable[CpuReading], after: Iterable[CpuReading]) -> dict[tuple[str, int | None], float]:
    """CPU seconds spent between two sets of readings, per (node, shard); a process that
    restarted in between (its counter went back) is refused rather than counted negative."""
    start = {r.key: r for r in before}
    out: dict[tuple[str, int | None], float] = {}
    for r in after:
        if r.key not in start:
            continue
        delta = r.cpu_seconds - start[r.key].cpu_seconds
        if delta < 0:
            raise AdminError(f"CPU counter of {r.node} shard {r.shard} went back ({start[r.key].cpu_seconds} -> "
                             f"{r.cpu_seconds}): the server restarted during the measurement", node=r.node)
        out[r.key] = delta
    return out
