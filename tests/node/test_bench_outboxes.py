"""`lab bench store --outboxes` with tiny parameters on the embedded node, broker and Redis: every
method and primitive present, counts adding up, the hot window's scaling stated beside its goal.
Shape and consistency only; no speed is asserted."""
from __future__ import annotations

import gc
import json

import pytest

from lab.bench.store_paths.outboxes import OutboxBenchParams, run_outbox_bench

pytestmark = pytest.mark.node

TINY = OutboxBenchParams(ops=8, block=4, warmup=2, concurrency=2, conversations=2, body_bytes=32, primitive_ops=8,
                         serial_ops=4)


def test_outbox_bench_reports_each_outbox_and_the_hot_windows_scaling(cluster_config, kafka_services, redis_services,
                                                                        tmp_path):
    thresholds, frozen = gc.get_threshold(), gc.get_freeze_count()
    result = run_outbox_bench(cluster_config, redis_services.replace(outbox="local"), TINY, run_dir=tmp_path)
    # it froze this process's collector while it measured (client_gc "freeze"), and gave it back
    assert gc.get_threshold() == thresholds and (frozen or gc.get_freeze_count() == 0)
    data = json.loads(result.json_path.read_text())
    assert set(data["methods"]) == {"local", "kafka", "kafka_archiver", "kafka_hot"}
    for name, m in data["methods"].items():
        assert m["count"] == m["ok"] == TINY.ops and m["errors"] == {}, name
        assert m["serial_ack_latency_us"]["count"] == TINY.serial_ops
    assert set(data["primitives"]) == {"local_append", "kafka_append", "hot_window_put", "hot_window_put_concurrent",
                                      "redis_ping", "redis_ping_concurrent"}
    assert all(p["count"] == TINY.primitive_ops for p in data["primitives"].values())
    scaling = data["hot_window_scaling"]
    assert set(scaling) == {"per_send_p50", "per_send_mean", "in_send_mean", "put_p50", "rest_of_send_mean",
                            "archiver_send_mean", "ping_p50"} and scaling["put_p50"] > 0 and scaling["ping_p50"] > 0
    inside = data["hot_window_in_send_us"]  # the kafka_hot sends' own time in HotWindow.put, measured
    assert set(inside) == {"callers", "one_caller", "puts_per_round", "rounds_in_flight_max"}
    assert inside["callers"] > 0 and inside["one_caller"] > 0
    assert scaling["in_send_mean"] == round(inside["callers"] / inside["one_caller"], 3)
    # every put of the callers' blocks rode some round: at least one put per round, rounds overlapped at most
    # as many as the callers
    assert inside["puts_per_round"] >= 1 and 1 <= inside["rounds_in_flight_max"] <= TINY.concurrency
    # the rest of the kafka_hot send: its mean ack latency less its mean time in the put, same ratio
    hot = data["methods"]["kafka_hot"]
    rest = (hot["ack_latency_us"]["mean"] - inside["callers"], hot["serial_ack_latency_us"]["mean"] - inside["one_caller"])
    assert scaling["rest_of_send_mean"] == (round(rest[0] / rest[1], 3) if min(rest) > 0 else None)
    note = result.closing_note
    assert "hot window per send" in note and "goal <= 2.0" in note and "concurrent callers" in note
    assert "time in HotWindow.put per send" in note
    p = data["primitives"]  # the control: a bare round trip to the same Redis, beside the put
    assert scaling["ping_p50"] == round(p["redis_ping_concurrent"]["latency_us"]["p50"]
                                        / p["redis_ping"]["latency_us"]["p50"], 3)
    assert "control, a bare round trip to the same Redis (PING)" in note
    assert "the rest of the kafka_hot send" in note and "kafka_archiver's send" in note
    # the cost beside the latency: Redis's commandstats and CPU diffed around each Redis phase, and this process's CPU
    cost = data["hot_window_cost"]
    assert set(cost["phases"]) == {"put_one_caller", "put_callers", "ping_one_caller", "ping_callers"}
    for name, phase in cost["phases"].items():
        # every call the phase issued reached the server (others' calls may add to the shared server's counts)
        assert phase["ops"] == TINY.primitive_ops and phase["calls"] >= phase["ops"], name
        assert phase["command_usec"] >= 0 and phase["client_cpu_seconds"] > 0 and phase["server_cpu_seconds"] >= 0, name
        assert 1 <= phase["rounds"] <= phase["ops"] and phase["other_calls"] >= 0, name
        assert phase["quiet"] == (phase["other_calls"] == 0), name
    assert cost["phases"]["put_one_caller"]["command_usec"] > 0  # a put's script runs for microseconds (a PING may not)
    assert cost["phases"]["put_one_caller"]["command"] == "evalsha" and cost["phases"]["ping_one_caller"]["command"] == "ping"
    # one caller: one put per round; the callers' puts grouped into at most as many rounds as puts
    assert cost["phases"]["put_one_caller"]["rounds"] == TINY.primitive_ops
    assert cost["phases"]["ping_callers"]["rounds"] == TINY.primitive_ops
    for kind, figures in cost["ratios"].items():
        assert all(r is None or r > 0 for r in figures.values()), kind
    assert cost["ratios"]["put"]["client_cpu_us_per_op"] == round(
        cost["phases"]["put_callers"]["client_cpu_us_per_op"] / cost["phases"]["put_one_caller"]["client_cpu_us_per_op"], 3)
    goal = cost["goal"]
    assert goal["limit"] == 2.0 and goal["latency"]["put_p50"] == scaling["put_p50"]
    assert goal["latency"]["ping_p50"] == scaling["ping_p50"]
    assert goal["latency"]["verdict"] in {"met", "NOT met", "not meetable on this machine"}
    assert goal["cost"]["verdict"] in {"met", "NOT met", "not judged"}
    assert ("server_cpu_us_per_op" in goal["cost"]["judged"]) == goal["cost"]["server_cpu_judged"]
    assert "hot window cost per put, one caller -> 2 callers" in note and "goal (2 callers within" in note
