"""`lab bench decode` on a tiny configuration: the three paths agree before they are timed, and the
result names each path's ratio to the raw one with its interval. Pure (no node); structure only."""
from __future__ import annotations

import json

import pytest

from lab.bench.decode_bench import DECODE_FILE, DecodeParams, closing_lines, run_decode_bench


@pytest.mark.spawns  # the result names its machine (git, the CPU model): subprocesses
def test_the_bench_writes_each_paths_ratio_to_the_raw_one(tmp_path):
    result = run_decode_bench(DecodeParams(page_sizes=(3,), rounds=12, calls_per_round=1), tmp_path)
    written = json.loads((tmp_path / "bench" / DECODE_FILE).read_text())
    assert written["ratios"] == result["ratios"]
    assert [(r["page_size"], r["path"]) for r in result["ratios"]] == [(3, "safe"), (3, "python")]
    for r in result["ratios"]:
        assert r["median"] > 0 and r["low"] is not None and r["low"] <= r["median"] <= r["high"]
        assert r["us_per_page"] > 0 and r["raw_us_per_page"] > 0
    assert all("/ raw:" in line for line in closing_lines(result))
