"""The Prometheus text of a load (lab.load.metrics_endpoint): names, labels, values from the one source."""
from __future__ import annotations

import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from lab.load.live_counts import LiveCounts, ProcessSnapshot, TimelinePoint
from lab.load.metrics_endpoint import LiveState, MetricsServer
from lab.measure.hdr import OpStats


def _counts() -> LiveCounts:
    send, edit = OpStats(), OpStats()
    for us in (1000, 2000, 3000, 40000):
        send.record(us, us + 500)
    send.record(5000, 5000, error="RequestTimeout", timeout=True)
    edit.record(3000, 3000, outcome="recalled")
    edit.record(3000, 3000)
    late = OpStats()
    late.record(90000, 95000)
    tl = (TimelinePoint(t=1.0, cpu_seconds=0.5, calls=1, service_us=1, corrected_us=1),
          TimelinePoint(t=2.0, cpu_seconds=0.9, calls=7, service_us=1, corrected_us=1))
    return LiveCounts(processes=(ProcessSnapshot(worker="worker-0", pid=1, written_at=0.0, t0=0.0, final=False,
                                                 measured_seconds=2.0, operations={"send": send, "edit": edit},
                                                 late={"send": late}, warmup_calls=3, in_flight=2, timeline=tl),))


def _families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_the_endpoint_serves_the_latest_state_over_http():
    with MetricsServer(port=0) as server:
        server.update(LiveState(counts=_counts(), run_id="r1", profile="chat", mode="fixed-rate", requested_rate=5.0,
                                loader_bound=False))
        # a generous socket timeout: 5 s failed in a make unit at load average 20
        with urllib.request.urlopen(server.url, timeout=60) as r:
            fams = _families(r.read().decode())
    calls = {(s.labels["operation"], s.labels["result"]): s.value for s in fams["lab_load_calls"].samples}
    assert calls[("send", "ok")] == 4 and calls[("send", "error")] == 1 and calls[("edit", "outcome")] == 1
    assert [(s.labels, s.value) for s in fams["lab_load_failures"].samples] == [
        ({"operation": "send", "error": "RequestTimeout"}, 1.0)]
    assert [(s.labels, s.value) for s in fams["lab_load_outcomes"].samples] == [
        ({"operation": "edit", "outcome": "recalled"}, 1.0)]
    assert fams["lab_load_late_calls"].samples[0].value == 1
    assert fams["lab_load_in_flight_calls"].samples[0].value == 2
    assert fams["lab_load_requested_rate_calls_per_second"].samples[0].value == 5.0
    assert fams["lab_load_achieved_rate_calls_per_second"].samples[0].value == pytest.approx(7 / 2)
    assert fams["lab_load_loader_cpu_ratio"].samples[0].value == pytest.approx(0.4)
    assert fams["lab_load_loader_bound"].samples[0].value == 0
    lat = {(s.labels.get("operation"), s.labels.get("latency"), s.labels.get("quantile"), s.name): s.value
           for s in fams["lab_load_latency_seconds"].samples}
    assert lat[("send", "service", "0.5", "lab_load_latency_seconds")] == pytest.approx(0.003, rel=0.01)
    assert lat[("send", "corrected", "0.99", "lab_load_latency_seconds")] == pytest.approx(0.0405, rel=0.01)
    assert lat[("send", "service", None, "lab_load_latency_seconds_count")] == 5


def test_a_port_in_use_is_a_clear_error():
    from lab.errors import ConfigError

    with MetricsServer(port=0) as first:
        with pytest.raises(ConfigError, match="--metrics-port"):
            MetricsServer(port=first.port).start()
