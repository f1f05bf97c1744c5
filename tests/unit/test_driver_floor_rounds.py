"""The store bench's driver floors in the report: the client CPU per call of a path over its
callback-chained floor per round (send_throughput.paired_rounds, history_cpu.paired_rounds), the
goal judged only on a figure the run vouches for, and the closing note's line for each."""
from __future__ import annotations

import pytest

from lab.bench.store_paths import history_cpu, send_throughput
from lab.bench.store_paths.paired_lines import (asyncio_floor_line, driver_floor_line, logged_floor_line, median_ms,
                                                paced_floor_lines, page_paced_floor_line)

SEND_METHODS = {m for pair in send_throughput.PAIRED.values() for m in pair}
PAGE_SIDES = {m for pair in history_cpu.PAIRED.values() for m in pair}


def _send(send_cpu: list[float], callback_cpu: list[float], blocking_cpu: list[float] | None = None) -> dict:
    n = len(send_cpu)
    cpu = {m: [1.0] * n for m in SEND_METHODS}
    cpu["send_async"], cpu["send_callback_floor"] = send_cpu, callback_cpu
    cpu["send"] = [2 * x for x in send_cpu]  # the blocking send: reported beside, not judged
    if blocking_cpu is not None:
        cpu["send_floor_with_head_read"] = blocking_cpu
    return send_throughput.paired_rounds({m: [100.0] * n for m in SEND_METHODS}, block_calls=80, cpu_ms_per_call=cpu)


def _line(pr: dict) -> str:
    return driver_floor_line(pr, path="Send", side="send_async", blocking="send_floor_with_head_read",
                             also=("send",), callback="send_callback_floor", what="chained")


def test_the_send_is_judged_on_its_cpu_over_the_callback_floor():
    pr = _send([1.9, 1.88, 1.9, 1.92, 1.9, 1.89, 1.91, 1.9], [1.6] * 8, blocking_cpu=[1.43] * 8)
    r = pr["cpu_ratios"]["send_async_over_callback_floor_cpu_per_call"]
    assert r["median"] == round(1.9 / 1.6, 3) and r["vouched"]
    assert pr["cpu_ratios"]["send_over_callback_floor_cpu_per_call"]["median"] == round(3.8 / 1.6, 3)
    assert pr["cpu_ratios"]["send_over_send_async_cpu_per_call"]["median"] == 2.0
    assert pr["callback_goal"] == {"ratio": "send_async_over_callback_floor_cpu_per_call", "at_most": 1.3,
                                   "vouched": True, "verdict": "met"}
    line = _line(pr)
    assert line.startswith("- Send client CPU / driver floor (send_callback_floor: chained) over 8 paired rounds "
                           "(80 calls per side and round): ")
    assert "goal <= 1.3: met (the whole interval is at or below it)" in line
    assert ("send_async 1.9 ms, send 3.8 ms, send_floor_with_head_read (blocking threads) 1.43 ms, "
            "send_callback_floor 1.6 ms") in line
    assert "blocking floor / driver floor median 0.894x" in line
    # the figures: 1.89 ms over 0.72 ms, far above the goal
    far = _send([1.89, 1.9, 1.88, 1.89, 1.9, 1.88, 1.89, 1.89], [0.72] * 8)
    assert far["callback_goal"]["verdict"] == "not met" and "goal <= 1.3: not met" in _line(far)


def _logged_line(pr: dict) -> str:
    return driver_floor_line(pr, path="Send", side="send_async", blocking="send_floor_with_head_read",
                             also=("send",), callback="send_logged_callback_floor", what="with the append",
                             goal_key="logged_callback_goal", floor_key="logged_callback_floor",
                             label="driver floor with the outbox append")


def test_the_send_is_judged_against_the_floor_with_the_append_as_well():
    """A second goal line, against send_callback_floor plus the outbox append, the same limit; the
    first one unchanged; and the append's own cost in the driver floor, each per round."""
    n = 8
    send = [1.9, 1.88, 1.9, 1.92, 1.9, 1.89, 1.91, 1.9]
    cpu = {m: [1.0] * n for m in SEND_METHODS}
    cpu.update(send_async=send, send_callback_floor=[1.0] * n, send_logged_callback_floor=[1.6] * n,
               send_floor_with_head_read=[2.0] * n)
    pr = send_throughput.paired_rounds({m: [100.0] * n for m in SEND_METHODS}, block_calls=80, cpu_ms_per_call=cpu)
    assert pr["callback_goal"] == {"ratio": "send_async_over_callback_floor_cpu_per_call", "at_most": 1.3,
                                   "vouched": True, "verdict": "not met"}
    r = pr["cpu_ratios"]["send_async_over_logged_callback_floor_cpu_per_call"]
    assert r["median"] == round(1.9 / 1.6, 3) and r["rounds"] == n and r["ci_low"] <= r["median"] <= r["ci_high"]
    assert pr["logged_callback_goal"] == {"ratio": "send_async_over_logged_callback_floor_cpu_per_call",
                                          "at_most": 1.3, "vouched": True, "verdict": "met"}
    assert pr["cpu_ratios"]["logged_floor_over_callback_floor_cpu_per_call"]["median"] == 1.6
    assert pr["cpu_ratios"]["floor_with_head_read_over_logged_callback_floor_cpu_per_call"]["median"] == 1.25
    assert pr["ratios"]["send_async_over_logged_callback_floor_throughput"]["median"] == 1.0
    line = _logged_line(pr)
    assert line.startswith("- Send client CPU / driver floor with the outbox append (send_logged_callback_floor: "
                           "with the append) over 8 paired rounds (80 calls per side and round): ")
    assert "goal <= 1.3: met (the whole interval is at or below it)" in line
    assert "send_logged_callback_floor 1.6 ms" in line
    assert "blocking floor / driver floor with the outbox append median 1.25x" in line
    assert "goal <= 1.3: not met" in _line(pr)  # the first goal line, as it was
    cost = logged_floor_line(pr)
    assert cost.startswith("- Send driver floor, with the outbox append / without") and "over 8 paired rounds" in cost
    assert "client CPU per send 1.6 vs 1.0 ms, median 1.6x" in cost and "the median's 95% interval 1.6-1.6x" in cost
    del cpu["send_logged_callback_floor"]
    pr = send_throughput.paired_rounds({m: [100.0] * n for m in SEND_METHODS}, block_calls=80, cpu_ms_per_call=cpu)
    assert "logged_callback_goal" not in pr and _logged_line(pr) is None and logged_floor_line(pr) is None
    assert "callback_goal" in pr


def test_a_wide_spread_or_too_few_rounds_is_not_judged():
    wide = _send([1.0, 3.0, 1.2, 2.8, 1.5, 2.5, 1.1, 2.9], [1.0] * 8)
    assert wide["callback_goal"]["verdict"] == "not judged" and "NOT VOUCHED FOR" in _line(wide)
    few = _send([1.9, 1.9], [1.0, 1.0])
    assert few["callback_goal"]["verdict"] == "not judged" and "too few rounds for an interval" in _line(few)


def test_without_a_driver_floor_there_is_no_line():
    cpu = {m: [1.0] * 6 for m in SEND_METHODS - {"send_callback_floor"}}
    pr = send_throughput.paired_rounds({m: [100.0] * 6 for m in SEND_METHODS}, block_calls=8, cpu_ms_per_call=cpu)
    assert "callback_goal" not in pr and _line(pr) is None
    assert "send_async_over_callback_floor_cpu_per_call" not in pr["cpu_ratios"]


def test_the_asyncio_floor_is_priced_against_the_callback_floor():
    """The loop hand-off's price per send, median and interval over the rounds; no line without it."""
    n = 8
    cpu = {m: [1.0] * n for m in SEND_METHODS}
    cpu["send_callback_floor"], cpu["send_asyncio_floor"] = [0.8] * n, [1.0, 1.01, 0.99, 1.0, 1.0, 1.02, 0.98, 1.0]
    pr = send_throughput.paired_rounds({m: [100.0] * n for m in SEND_METHODS}, block_calls=80, cpu_ms_per_call=cpu)
    line = asyncio_floor_line(pr)
    assert line.startswith("- Send driver floor, asyncio / callbacks") and "over 8 paired rounds" in line
    assert "client CPU per send 1.0 vs 0.8 ms, median 1.25x" in line and "NOT VOUCHED" not in line
    assert "the median's 95% interval 1.2" in line
    del cpu["send_asyncio_floor"]
    pr = send_throughput.paired_rounds({m: [100.0] * n for m in SEND_METHODS}, block_calls=80, cpu_ms_per_call=cpu)
    assert asyncio_floor_line(pr) is None


def test_the_floor_at_the_sends_rate_is_a_third_goal_and_prices_the_rate():
    """The statements-only floor started at send_async's rate: a goal line of its own, what pacing does
    to the floor, the append at equal rates, and pacing's two parts against the floor started on the
    driver's loop (where a chain starts, the rate alone), figures with intervals; no line without a side."""
    n = 8
    cpu = {m: [1.0] * n for m in SEND_METHODS}
    cpu["send_async"], cpu["send_callback_floor"] = [1.5] * n, [0.9] * n
    cpu["send_callback_floor_at_send_rate"] = [1.2, 1.21, 1.19, 1.2, 1.2, 1.22, 1.18, 1.2]
    cpu["send_logged_callback_floor"] = [1.3] * n
    pr = send_throughput.paired_rounds({m: [100.0] * n for m in SEND_METHODS}, block_calls=80, cpu_ms_per_call=cpu)
    goal = pr["paced_callback_goal"]
    assert (goal["ratio"], goal["verdict"]) == ("send_async_over_paced_callback_floor_cpu_per_call", "met")
    line = driver_floor_line(pr, path="Send", side="send_async", blocking="send_floor_with_head_read",
                             callback="send_callback_floor_at_send_rate", what="paced", goal_key="paced_callback_goal",
                             floor_key="paced_callback_floor", label="driver floor at the send's rate")
    assert line.startswith("- Send client CPU / driver floor at the send's rate (send_callback_floor_at_send_rate")
    rate, append, start, rate_alone = paced_floor_lines(pr)
    assert rate.startswith("- Send driver floor at send_async's rate / as fast as it ends")
    assert "client CPU per send 1.2 vs 0.9 ms, median 1.333x" in rate
    assert append.startswith("- Send driver floor with the outbox append / without it at send_async's rate")
    assert "client CPU per send 1.3 vs 1.2 ms" in append
    # the first ratio in its parts (SEND_METHODS' 1.0 ms for the floor started on the driver's loop)
    assert start.startswith("- Send driver floor at send_async's rate, started from the calling thread / on the "
                            "driver's loop") and "client CPU per send 1.2 vs 1.0 ms, median 1.2x" in start
    assert rate_alone.startswith("- Send driver floor at send_async's rate started on the driver's loop / as fast as")
    assert "client CPU per send 1.0 vs 0.9 ms, median 1.111x" in rate_alone
    assert "the median's 95% interval" in start and "goal" not in start + rate_alone  # figures, not judged
    loop_goal = pr["loop_paced_callback_goal"]  # send_async at equal rates, each chain started on the loop
    assert (loop_goal["ratio"], loop_goal["verdict"]) == ("send_async_over_loop_paced_callback_floor_cpu_per_call",
                                                          "not met")  # 1.5 / 1.0
    del cpu["send_callback_floor_at_send_rate"]
    pr = send_throughput.paired_rounds({m: [100.0] * n for m in SEND_METHODS}, block_calls=80, cpu_ms_per_call=cpu)
    assert "paced_callback_goal" not in pr
    assert paced_floor_lines(pr) == [rate_alone]  # the rate alone needs no thread-paced side
    del cpu["send_callback_floor_at_send_rate_on_loop"]
    pr = send_throughput.paired_rounds({m: [100.0] * n for m in SEND_METHODS}, block_calls=80, cpu_ms_per_call=cpu)
    assert paced_floor_lines(pr) == [] and "loop_paced_callback_goal" not in pr


def test_the_page_is_judged_on_its_cpu_over_the_callback_floor():
    n = 8
    by_round = {m: [500.0] * n for m in PAGE_SIDES}
    cpu = {"history": [1.6] * n, "history_async": [1.3, 1.31, 1.29, 1.3, 1.3, 1.31, 1.29, 1.3],
           "history_floor": [1.2] * n, "history_callback_floor": [1.0] * n}
    pr = history_cpu.paired_rounds(by_round, cpu, block_calls=40)
    assert pr["rounds"] == n and pr["cpu_ms_per_call_by_round"]["history_async"][0] == 1.3
    # the store's event-driven page is the one judged against the driver floor
    assert pr["callback_goal"] == {"ratio": "history_async_over_callback_floor_cpu_per_call", "at_most": 1.2,
                                   "vouched": True, "verdict": "not met"}
    assert pr["cpu_ratios"]["history_floor_over_callback_floor_cpu_per_call"]["median"] == 1.2
    assert pr["cpu_ratios"]["history_over_history_async_cpu_per_call"]["median"] == pytest.approx(1.6 / 1.3, rel=1e-2)
    assert pr["ratios"]["history_over_callback_floor_throughput"]["median"] == 1.0
    line = driver_floor_line(pr, path="Latest page", side="history_async", blocking="history_floor",
                             callback="history_callback_floor", what="chained", also=("history",))
    assert "Latest page client CPU / driver floor (history_callback_floor: chained) over 8 paired rounds" in line
    assert "goal <= 1.2: not met" in line
    assert "history_async 1.3 ms, history 1.6 ms, history_floor (blocking threads) 1.2 ms" in line
    assert "blocking floor / driver floor median 1.2x" in line


def test_the_page_is_judged_at_its_own_rate_too_and_the_rate_is_priced():
    """The page's driver floor started at history_async's rate: a second goal line, and what the
    rate alone does to the floor; without that side, neither (an older run's rounds)."""
    n = 8
    by_round = {m: [500.0] * n for m in PAGE_SIDES}
    cpu = {"history": [1.6] * n, "history_async": [1.3] * n, "history_floor": [1.2] * n,
           "history_callback_floor": [0.9] * n,
           "history_callback_floor_at_page_rate": [1.1, 1.11, 1.09, 1.1, 1.1, 1.12, 1.08, 1.1]}
    pr = history_cpu.paired_rounds(by_round, cpu, block_calls=40)
    assert pr["callback_goal"]["verdict"] == "not met"  # 1.3 / 0.9
    goal = pr["paced_callback_goal"]
    assert (goal["ratio"], goal["at_most"], goal["verdict"]) == (
        "history_async_over_paced_callback_floor_cpu_per_call", 1.2, "met")  # 1.3 / 1.1
    line = driver_floor_line(pr, path="Latest page", side="history_async", blocking="history_floor",
                             callback="history_callback_floor_at_page_rate", what="paced", also=("history",),
                             goal_key="paced_callback_goal", floor_key="paced_callback_floor",
                             label="driver floor at the page's rate")
    assert line.startswith("- Latest page client CPU / driver floor at the page's rate "
                           "(history_callback_floor_at_page_rate: paced) over 8 paired rounds")
    assert "goal <= 1.2: met" in line
    rate = page_paced_floor_line(pr)
    assert rate.startswith("- Latest page driver floor at history_async's rate / as fast as it ends")
    assert "client CPU per page 1.1 vs 0.9 ms, median 1.222x" in rate
    del cpu["history_callback_floor_at_page_rate"]
    pr = history_cpu.paired_rounds(by_round, cpu, block_calls=40)
    assert "paced_callback_goal" not in pr and page_paced_floor_line(pr) is None
    assert "history_async_over_paced_callback_floor_throughput" not in pr["ratios"]


def test_median_ms_leaves_out_rounds_without_a_figure():
    assert median_ms([1.0, None, 3.0, 2.0]) == 2.0
    assert median_ms([]) is None and median_ms(None) is None


def test_the_driver_loops_line_names_each_variant_and_what_was_not_measured():
    from lab.bench.store_paths.driver_loops import BASELINE, driver_loops_line

    ratio = {"rounds": 3, "median": 1.5, "ci_low": 1.4, "ci_high": 1.6}
    probe = {"in_flight": 8, "rounds": 3, "requests_per_round": 2000, "baseline": BASELINE,
             "missing_reactors": {"asyncio": "driver reactor 'asyncio' is not available here"},
             "variants": {BASELINE: {"us_per_request_median": 92.0, "over_baseline": ratio | {"median": 1.0}},
                          "libev coroutines": {"us_per_request_median": 142.0, "over_baseline": ratio}}}
    line = driver_loops_line(probe)
    assert line.startswith("- Driver loops, client CPU per request (8 in flight from one thread, 3 interleaved "
                           "rounds of 2,000): libev callbacks 92.0 µs, libev coroutines 142.0 µs, 1.5x (1.4-1.6x)")
    assert "asyncio: not measured (driver reactor 'asyncio' is not available here)" in line
    assert driver_loops_line(None) is None and driver_loops_line({"variants": {}}) is None
