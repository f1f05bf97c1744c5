"""A running load's live numbers in Prometheus' text format, for Grafana beside ScyllaDB Monitoring.

More: docs/load-internals.md.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from lab.errors import ConfigError
from lab.load.live_counts import LiveCounts
from lab.measure import summarize_histogram

DEFAULT_METRICS_HOST = "127.0.0.1"
DEFAULT_METRICS_PORT = 9470
QUANTILES = (("0.5", "p50"), ("0.9", "p90"), ("0.99", "p99"), ("0.999", "p999"))  # lab.measure's percentiles
_US = 1e-6


@dataclass(frozen=True, kw_only=True)
class LiveState:
    """What a scrape shows: the latest counts and the run's context."""

    counts: LiveCounts = field(default_factory=LiveCounts)
    run_id: str = ""
    profile: str = ""
    mode: str = ""
    requested_rate: float | None = None
    loader_bound: bool | None = None


class LoadCollector:
    """A ``prometheus_client`` collector over the latest :class:`LiveState`."""

    def __init__(self, state: Callable[[], LiveState]) -> None:
        self._state = state

    def describe(self) -> list[Any]:
        return []  # unchecked collector: families depend on the run's operations

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

        s = self._state()
        c = s.counts
        info = GaugeMetricFamily("lab_load_info", "The load run this endpoint reports", labels=["run_id", "profile",
                                                                                               "mode"])
        info.add_metric([s.run_id, s.profile, s.mode], 1.0)
        yield info
        ops = c.operations
        calls = CounterMetricFamily("lab_load_calls", "Calls finished inside the measured window, by result",
                                    labels=["operation", "result"])
        failures = CounterMetricFamily("lab_load_failures", "Failed calls by exception type",
                                       labels=["operation", "error"])
        outcomes = CounterMetricFamily("lab_load_outcomes", "Answers the design defines, not failures "
                                       "(lab.load.outcomes)", labels=["operation", "outcome"])
        latency = Metric("lab_load_latency_seconds", "Latency of the measured calls: corrected from the due time "
                         "(coordinated omission), service from the actual start", "summary")
        for op, st in sorted(ops.items()):
            calls.add_metric([op, "ok"], st.ok)
            calls.add_metric([op, "outcome"], sum(st.outcomes.values()))
            calls.add_metric([op, "error"], sum(st.errors.values()))
            for err, n in sorted(st.errors.items()):
                failures.add_metric([op, err], n)
            for kind, n in sorted(st.outcomes.items()):
                outcomes.add_metric([op, kind], n)
            for kind in ("corrected", "service"):
                hist = getattr(st, kind)
                n = hist.get_total_count()
                if n == 0:
                    continue
                summary = summarize_histogram(hist)  # the one percentile definition, as in summary.json
                for label, key in QUANTILES:
                    latency.add_sample("lab_load_latency_seconds", {"operation": op, "latency": kind,
                                                                    "quantile": label}, getattr(summary, key) * _US)
                latency.add_sample("lab_load_latency_seconds_count", {"operation": op, "latency": kind}, n)
                latency.add_sample("lab_load_latency_seconds_sum", {"operation": op, "latency": kind},
                                   summary.mean * n * _US)
        yield calls
        yield failures
        yield outcomes
        yield latency
        late = CounterMetricFamily("lab_load_late_calls", "Calls in flight at the measured window's end, finished "
                                   "after it: reported apart, never achieved", labels=["operation"])
        for op, st in sorted(c.late.items()):
            late.add_metric([op], st.count)
        yield late
        yield CounterMetricFamily("lab_load_warmup_calls", "Calls finished in the warmup (not measured)",
                                  value=c.warmup_calls)
        yield GaugeMetricFamily("lab_load_in_flight_calls", "Calls started and not finished", value=c.in_flight)
        if s.requested_rate is not None:
            yield GaugeMetricFamily("lab_load_requested_rate_calls_per_second", "The plan's rate now",
                                    value=s.requested_rate)
        achieved = c.achieved_rate()
        if achieved is not None:
            yield GaugeMetricFamily("lab_load_achieved_rate_calls_per_second",
                                    "Calls finished in the measured window per second of it", value=achieved)
        yield GaugeMetricFamily("lab_load_measured_seconds", "Seconds of the measured window so far",
                                value=c.measured_seconds)
        ratio = GaugeMetricFamily("lab_load_loader_cpu_ratio", "CPU of a load process over its last interval, in "
                                  "cores (the verdict's limit is 0.7)", labels=["process"])
        seconds = CounterMetricFamily("lab_load_loader_cpu_seconds", "CPU time of a load process",
                                      labels=["process"])
        for p in c.processes:
            last = p.last_cpu_percent()
            if last is not None:
                ratio.add_metric([p.worker], last / 100.0)
            if p.timeline:
                seconds.add_metric([p.worker], p.timeline[-1].cpu_seconds)
        yield ratio
        yield seconds
        if s.loader_bound is not None:
            yield GaugeMetricFamily("lab_load_loader_bound", "1 when the run so far fails a loader check "
                                    "(lab.load.verdict)", value=1.0 if s.loader_bound else 0.0)


class MetricsServer:
    """The endpoint: started on ``host:port``, fed with :meth:`update`, closed at the run's end."""

    def __init__(self, host: str = DEFAULT_METRICS_HOST, port: int = DEFAULT_METRICS_PORT) -> None:
        self.host, self.port = host, port
        self._lock = threading.Lock()
        self._state = LiveState()
        self._server: Any = None

    def _current(self) -> LiveState:
        with self._lock:
            return self._state

    def update(self, state: LiveState) -> None:
        with self._lock:
            self._state = state

    def start(self) -> MetricsServer:
        from prometheus_client import CollectorRegistry, start_http_server


        registry = CollectorRegistry(auto_describe=False)
        registry.register(LoadCollector(self._current))
        try:
            self._server, _thread = start_http_server(self.port, addr=self.host, registry=registry)
        except OSError as exc:
            raise ConfigError(f"metrics endpoint: cannot listen on {self.host}:{self.port} ({exc.strerror}); "
                              "choose another --metrics-port", host=self.host, port=self.port) from None
        self.port = self._server.server_port
        return self

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> MetricsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
