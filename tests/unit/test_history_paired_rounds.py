"""The store bench's latest page vs its statements raw per round (history_page.paired_rounds) and the
closing note's line for it: rounds of consecutive calls per side, each round's p50 over the other's,
and a figure the run cannot pin said not to be a result."""
from __future__ import annotations

from lab.bench.store_paths.paired_lines import history_paired_line
from lab.bench.store_paths.history_page import paired_rounds


def _samples(page_p50s: list[float], floor_p50s: list[float], calls: int = 5) -> dict[str, list[float]]:
    """Each round's ``calls`` latencies spread around the given p50 (the middle one by nearest rank)."""
    def side(p50s: list[float]) -> list[float]:
        return [x + d for x in p50s for d in (-40, -20, 0, 20, 400)[:calls]]
    return {"history": side(page_p50s), "history_floor": side(floor_p50s), "bare_select": side(floor_p50s)}


def test_each_round_is_its_calls_p50_over_the_floors_and_a_steady_run_is_judged():
    page = [1100, 1120, 1080, 1100, 1110, 1100, 1090, 1100]
    pr = paired_rounds(_samples(page, [1000] * 8), round_calls=5)
    assert pr["rounds"] == 8 and pr["round_calls"] == 5
    assert pr["p50_us_by_round"]["history"] == page and pr["p50_us_by_round"]["history_floor"] == [1000] * 8
    r = pr["ratios"]["history_over_floor_p50"]
    assert r["ratios"] == [x / 1000 for x in page] and r["median"] == 1.1 and r["vouched"]
    assert pr["goal"] == {"ratio": "history_over_floor_p50", "at_most": 1.15, "vouched": True, "verdict": "met"}
    line = history_paired_line(pr)
    assert "over 8 paired rounds (5 calls per side and round" in line and "median 1.1x" in line
    assert "goal <= 1.15: met (the whole interval is at or below it)" in line and "NOT VOUCHED" not in line
    assert "page / bare SELECT median 1.1x" in line


def test_a_last_shorter_round_is_left_out():
    samples = _samples([1100] * 6, [1000] * 6)
    pr = paired_rounds({k: v + [1.0, 1.0] for k, v in samples.items()}, round_calls=5)
    assert pr["rounds"] == 6 and len(pr["ratios"]["history_over_floor_p50"]["ratios"]) == 6


def test_above_the_goal_a_wide_spread_or_too_few_rounds():
    above = paired_rounds(_samples([1200, 1210, 1190, 1200, 1205, 1195, 1200, 1200], [1000] * 8), round_calls=5)
    assert above["goal"]["verdict"] == "not met"
    assert "goal <= 1.15: not met (the whole interval is above it)" in history_paired_line(above)
    wide = paired_rounds(_samples([600, 1400, 700, 1300, 900, 1100, 800, 1200], [1000] * 8), round_calls=5)
    assert wide["goal"] == {**wide["goal"], "vouched": False, "verdict": "not judged"}
    assert "NOT VOUCHED FOR, not a result" in history_paired_line(wide)
    assert "goal <= 1.15 is not judged" in history_paired_line(wide)
    few = paired_rounds(_samples([1100, 1100], [1000, 1000]), round_calls=5)
    assert few["goal"]["verdict"] == "not judged" and "too few rounds for an interval" in history_paired_line(few)
    none = paired_rounds({"history": [], "history_floor": [], "bare_select": []}, round_calls=5)
    assert none["rounds"] == 0 and "not measured" in history_paired_line(none)
