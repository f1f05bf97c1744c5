"""The store bench's send vs its like-for-like floor per round (send_throughput.paired_rounds) and
the closing note's line for it: a figure the run cannot pin is said not to be a result."""
from __future__ import annotations

from lab.bench.store_paths.paired_lines import paired_line
from lab.bench.store_paths.send_throughput import PAIRED, paired_rounds

METHODS = {m for pair in PAIRED.values() for m in pair}


def _rounds(send: list[float], like: list[float]) -> dict:
    by_round = {m: [100.0] * len(send) for m in METHODS}
    by_round["send"], by_round["send_floor_with_head_read"] = send, like
    return paired_rounds(by_round, block_calls=80)


def test_each_round_gives_one_ratio_and_a_steady_run_is_judged_against_the_goal():
    pr = _rounds([95, 96, 94, 95, 96, 95, 94, 95], [100.0] * 8)
    like = pr["ratios"]["send_over_floor_with_head_read_throughput"]
    assert like["ratios"] == [0.95, 0.96, 0.94, 0.95, 0.96, 0.95, 0.94, 0.95] and like["median"] == 0.95
    assert pr["rounds"] == 8 and pr["throughput_by_round"]["send"][0] == 95
    assert pr["goal"] == {"ratio": "send_over_floor_with_head_read_throughput", "at_least": 0.9, "vouched": True,
                          "verdict": "met"}
    line = paired_line(pr)
    assert "8 paired rounds (80 calls per side" in line and "median 0.95x (range 0.94-0.96x)" in line
    assert "goal >= 0.9: met" in line and "NOT VOUCHED" not in line


def test_a_wide_spread_or_too_few_rounds_is_not_a_result():
    wide = _rounds([60, 140, 70, 130, 90, 110, 80, 120], [100.0] * 8)
    assert wide["goal"] == {**wide["goal"], "vouched": False, "verdict": "not judged"}
    assert "NOT VOUCHED FOR, not a result" in paired_line(wide) and "goal >= 0.9 is not judged" in paired_line(wide)
    # imprecise, even when all of a coarse interval lies on one side of the goal: not judged
    high = _rounds([130, 95, 160, 100, 140, 98, 120, 150, 110, 96], [100.0] * 10)
    assert high["goal"]["verdict"] == "not judged" and "goal >= 0.9: met" not in paired_line(high)
    straddle = _rounds([90, 91, 89, 90, 91, 89, 90, 91, 89, 90], [100.0] * 10)
    assert straddle["goal"] == {**straddle["goal"], "vouched": True, "verdict": "undecided"}
    assert "goal >= 0.9: undecided (the interval straddles it)" in paired_line(straddle)
    few = _rounds([95, 95], [100.0, 100.0])
    assert few["goal"] == {**few["goal"], "vouched": False, "verdict": "not judged"}
    assert "too few rounds for an interval" in paired_line(few) and "NOT VOUCHED FOR, not a result" in paired_line(few)
    assert "not measured" in paired_line(_rounds([], []))


def test_the_cpu_ratios_say_whether_the_run_vouches_for_them_as_the_throughput_ratios_do():
    by_round = {m: [100.0] * 8 for m in METHODS}
    steady = {m: [2.0] * 8 for m in METHODS}
    steady["send"] = [2.3, 2.31, 2.29, 2.3, 2.3, 2.31, 2.29, 2.3]
    pr = paired_rounds(by_round, block_calls=80, cpu_ms_per_call=steady)
    cpu = pr["cpu_ratios"]["send_over_floor_with_head_read_cpu_per_call"]
    assert cpu["median"] == 1.15 and cpu["vouched"] is True
    assert all("vouched" in r for r in pr["cpu_ratios"].values())
    assert "send / like-for-like floor median 1.15x" in paired_line(pr) and "CPU per call" in paired_line(pr)
    assert "NOT VOUCHED FOR (its interval" not in paired_line(pr)
    wide = {**steady, "send": [1.2, 3.4, 1.3, 3.3, 1.9, 2.9, 1.5, 3.1]}
    pr = paired_rounds(by_round, block_calls=80, cpu_ms_per_call=wide)
    assert pr["cpu_ratios"]["send_over_floor_with_head_read_cpu_per_call"]["vouched"] is False
    assert "floor median" in paired_line(pr) and "NOT VOUCHED FOR (its interval is wider than ±5%)" in paired_line(pr)
