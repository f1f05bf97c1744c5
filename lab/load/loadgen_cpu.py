"""The load generator's own CPU: is it the store or the client that limits a measurement?

:class:`CpuMonitor` samples the CPU time of the Locust processes once a second into
``cpu.csv`` (seconds after t0, % of one core in total and per process); :meth:`CpuMonitor.window`
summarises any stretch of the run (the measured window, a staircase step). The latency proxies
those processes start (``--rtt``) are sampled apart: :meth:`CpuMonitor.proxy_window`.
"""
from __future__ import annotations

import csv
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.measure.timing import wall_seconds

CPU_SAMPLE_SECONDS = 1.0
PROXY_NAME_PREFIX = "toxiproxy"  # lab.cluster.rtt_proxy's server binary
STOP_JOIN_SECONDS = 5.0


@dataclass(frozen=True, kw_only=True)
class CpuWindow:
    """CPU of the load processes over one stretch of the run (None where nothing was sampled)."""

    samples: int
    mean_percent_of_one_core: float | None = None
    max_percent_of_one_core: float | None = None
    mean_percent_of_machine: float | None = None
    cores: int | None = None

    def to_json(self) -> dict[str, Any]:
        if not self.samples:
            return {"samples": 0}
        return {"samples": self.samples, "mean_percent_of_one_core": self.mean_percent_of_one_core,
                "max_percent_of_one_core": self.max_percent_of_one_core,
                "mean_percent_of_machine": self.mean_percent_of_machine, "cores": self.cores}


class CpuMonitor(threading.Thread):
    """Samples the CPU of the Locust processes (and their children) once a second. Times are
    wall-clock seconds after ``t0``, the start the Locust processes share."""

    def __init__(self, pids: list[int], out: Path, t0: float) -> None:
        super().__init__(daemon=True)
        import psutil

        self._psutil = psutil
        self.procs = [psutil.Process(p) for p in pids]
        self.out = out
        self.t0 = t0
        self.samples: list[tuple[float, float, dict[int, float]]] = []  # (t - t0, % of one core, per pid)
        self.proxy_samples: list[tuple[float, float]] = []  # (t - t0, % of one core of every latency proxy)
        self._halt = threading.Event()

    def _times(self) -> dict[int, float]:
        out = {}
        for p in self.procs:
            try:
                t = p.cpu_times()
                out[p.pid] = t.user + t.system
            except self._psutil.Error:
                pass
        return out

    def _proxy_times(self) -> dict[int, float]:
        out = {}
        for p in self.procs:
            try:
                children = p.children(recursive=True)
            except self._psutil.Error:
                continue
            for child in children:
                try:
                    if child.name().startswith(PROXY_NAME_PREFIX):
                        t = child.cpu_times()
                        out[child.pid] = t.user + t.system
                except self._psutil.Error:
                    pass
        return out

    def run(self) -> None:
        last, last_t = self._times(), wall_seconds()
        last_proxy = self._proxy_times()
        with open(self.out, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["seconds_after_t0", "cpu_percent_of_one_core", "per_process"])
            while not self._halt.wait(CPU_SAMPLE_SECONDS):
                now, now_t = self._times(), wall_seconds()
                dt = now_t - last_t
                per = {pid: round(100 * (now[pid] - last.get(pid, now[pid])) / dt, 1) for pid in now}
                total = round(sum(per.values()), 1)
                self.samples.append((now_t - self.t0, total, per))
                w.writerow([round(now_t - self.t0, 2), total, json.dumps(per)])
                f.flush()
                last, last_t = now, now_t
                proxy = self._proxy_times()
                if proxy or last_proxy:
                    used = sum(v - last_proxy.get(pid, v) for pid, v in proxy.items())
                    self.proxy_samples.append((now_t - self.t0, round(100 * used / dt, 1)))
                last_proxy = proxy

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=STOP_JOIN_SECONDS)

    def window(self, start_s: float, end_s: float) -> CpuWindow:
        return _window([v for t, v, _ in self.samples if start_s < t <= end_s])

    def proxy_window(self, start_s: float, end_s: float) -> CpuWindow | None:
        """The latency proxies' CPU over a stretch; None when the processes started none."""
        if not self.proxy_samples:
            return None
        return _window([v for t, v in self.proxy_samples if start_s < t <= end_s])


def _window(vals: list[float]) -> CpuWindow:
    if not vals:
        return CpuWindow(samples=0)
    cores = os.cpu_count() or 1
    mean = sum(vals) / len(vals)
    return CpuWindow(samples=len(vals), mean_percent_of_one_core=round(mean, 1),
                     max_percent_of_one_core=round(max(vals), 1), mean_percent_of_machine=round(mean / cores, 1),
                     cores=cores)
