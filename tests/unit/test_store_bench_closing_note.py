"""The store bench's closing note, pinned to a golden text for a representative report, so a
change to how it is built cannot change what it says."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from lab.bench.store_paths import history_cpu
from lab.bench.store_paths.bench_report import Comparison, HistoryRatios, SendRatios, StoreBenchReport
from lab.bench.store_paths.params import BenchParams
from lab.bench.store_paths.recording import MethodResult
from lab.bench.store_paths.send_throughput import PAIRED, paired_rounds
from lab.errors import BenchError
from lab.measure.percentiles import LatencySummary

GOLDEN = Path(__file__).parent / "golden" / "store_bench_closing_note.txt"
# the same report with every driver floor's client CPU rounds, the send's and the page's
GOLDEN_DRIVER_FLOORS = Path(__file__).parent / "golden" / "store_bench_closing_note_driver_floors.txt"


def _method(name: str, count: int, tput: float, p50: float, p99: float, **extra) -> MethodResult:
    return MethodResult(name=name, count=count, ok=count, errors_by_type={}, warmup_discarded=10,
                        elapsed_seconds=2.5, throughput_ops_per_s=tput,
                        latency_us=LatencySummary(count=count, p50=p50, p90=p99 * 0.8, p99=p99, p999=p99 * 1.5,
                                                  max=p99 * 2, mean=p50 * 1.1),
                        requests={}, requests_total=count * 4, requests_per_op=4.3, histogram="H", **extra)


def _send_rounds() -> dict:
    methods = {m for pair in PAIRED.values() for m in pair}
    by_round = {m: [100.0] * 8 for m in methods}
    by_round["send"] = [95, 96, 94, 95, 96, 95, 94, 95]
    return paired_rounds(by_round, block_calls=80)


def report() -> StoreBenchReport:
    send = Comparison(
        description="send", concurrency="8", order="alternating",
        methods={"send": _method("send", 16000, 1234.5, 4100.0, 15000.0, ack_only_throughput_ops_per_s=1500.2),
                 "bare_lwt_insert": _method("bare_lwt_insert", 16000, 3000.0, 1900.0, 7000.0),
                 "send_floor": _method("send_floor", 16000, 1400.0, 3800.0, 14000.0),
                 "send_floor_with_head_read": _method("send_floor_with_head_read", 16000, 1300.0, 4000.0, 14500.0),
                 "send_floor_without_outbox": _method("send_floor_without_outbox", 16000, 1800.0, 3000.0, 12000.0)},
        ratio={"send_over_bare_throughput": 0.412, "bare_over_send_throughput": 2.43,
               "send_over_floor_with_head_read_throughput": 0.95,
               "send_over_floor_with_head_read_p50_latency": 1.025, "send_over_floor_throughput": 0.882,
               "floor_with_head_read_over_floor_throughput": 0.929, "send_over_floor_p50_latency": 1.079,
               "send_over_floor_p99_latency": 1.071, "send_over_floor_without_outbox_throughput": 0.686,
               "floor_over_floor_without_outbox_throughput": 0.778},
        paired_rounds=_send_rounds())
    history = Comparison(
        description="history", concurrency="1", order="alternating",
        methods={"history": _method("history", 1000, 800.0, 950.0, 2100.0, rows_per_op=50),
                 "bare_select": _method("bare_select", 1000, 900.0, 700.0, 1800.0),
                 "history_floor": _method("history_floor", 1000, 850.0, 850.0, 1900.0)},
        ratio={"history_over_bare_p50": 1.357, "history_over_bare_p99": 1.167, "history_over_floor_p50": 1.118,
               "history_over_floor_p99": 1.105})
    grouped = Comparison(
        description="grouped", concurrency="1", order="alternating", shape="group", entries=500, groups=3,
        methods={"grouped": _method("grouped", 30, 20.0, 45000.0, 60000.0, message_record_requests_per_op=3.0),
                 "naive_point_reads": _method("naive_point_reads", 30, 2.0, 450000.0, 600000.0,
                                              message_record_requests_per_op=500.0),
                 "raw_fetch": _method("raw_fetch", 30, 30.0, 35000.0, 50000.0)},
        ratio={"naive_over_grouped_message_record_requests": 166.7, "naive_over_grouped_p50": 10.0,
               "naive_over_grouped_p99": 10.0, "grouped_over_raw_fetch_p50": 1.286,
               "grouped_over_raw_fetch_p99": 1.2})
    return StoreBenchReport(
        run_id="r1", started_at="s", finished_at="f", wall_seconds=1.0, keyspace="k", keyspace_dropped=True,
        environment={"server": "cassandra", "server_version": "5.0", "nodes": 1,
                     "machine": {"cpus": 2, "row_decode": "native"}, "loadavg_at_start": 1.0,
                     "loadavg_at_end": 1.5, "git_commit": "fa00e6b1234567890", "git_dirty": True},
        params=BenchParams.preset(quick=True), flushed_before_reads=True, timings_seconds={},
        store_alerts={}, comparisons={"send_throughput": send, "history_latest_page": history,
                                      "grouped_vs_naive_group": grouped})


def test_the_closing_note_says_what_it_said_for_a_representative_report():
    assert report().closing_note == GOLDEN.read_text()


def _cpu_rounds(sides, base: float) -> dict:
    """Client CPU ms per call, 8 rounds per side, each side a little dearer than the one before."""
    return {m: [round(base + 0.05 * i + 0.01 * (r % 3), 3) for r in range(8)] for i, m in enumerate(sorted(sides))}


def report_with_driver_floors() -> StoreBenchReport:
    base = report()
    methods = {m for pair in PAIRED.values() for m in pair}
    send = base.comparisons["send_throughput"]
    send = dataclasses.replace(send, paired_rounds=paired_rounds({m: [100.0] * 8 for m in methods}, block_calls=80,
                                                                 cpu_ms_per_call=_cpu_rounds(methods, 1.0)))
    sides = {m for pair in history_cpu.PAIRED.values() for m in pair}
    page = Comparison(description="page cpu", concurrency="8", order="alternating", methods={}, ratio={},
                      paired_rounds=history_cpu.paired_rounds({m: [500.0] * 8 for m in sides},
                                                              _cpu_rounds(sides, 1.2), block_calls=40))
    return dataclasses.replace(base, comparisons={**base.comparisons, "send_throughput": send,
                                                  "history_latest_page_cpu": page})


def test_the_driver_floor_lines_say_what_they_said():
    note = report_with_driver_floors().closing_note
    assert note.count("client CPU / driver floor") == 6  # the send's four goals, the page's two
    assert note == GOLDEN_DRIVER_FLOORS.read_text()


def test_a_missing_ratio_is_one_clear_bench_error():
    send = report().comparisons["send_throughput"]
    ratio = {k: v for k, v in send.ratio.items() if k != "send_over_floor_p99_latency"}
    with pytest.raises(BenchError, match="'send_throughput' has no ratio 'send_over_floor_p99_latency'") as err:
        SendRatios.parse(dataclasses.replace(send, ratio=ratio))
    assert err.value.field == "send_over_floor_p99_latency"
    history = report().comparisons["history_latest_page"]
    bad = dataclasses.replace(history, ratio={**history.ratio, "history_over_bare_p50": "1.3"})
    with pytest.raises(BenchError, match="'history_over_bare_p50' is '1.3', not a number"):
        HistoryRatios.parse(bad)


def test_a_floor_that_did_not_run_leaves_its_ratios_unasked():
    send = report().comparisons["send_throughput"]
    bare = dataclasses.replace(send, methods={k: send.methods[k] for k in ("send", "bare_lwt_insert")},
                               ratio={"send_over_bare_throughput": 0.4, "bare_over_send_throughput": None})
    assert SendRatios.parse(bare) == SendRatios(over_bare_throughput=0.4, bare_over_send_throughput=None)
