"""``lab bench decode``: a whole page decoded by the compiled path with its slots written at their
offsets (raw), the compiled path with its slots set through PyO3's safe calls, and the Python path,
interleaved per round; the per-round ratios with their intervals. Pure: a local key store, no node.

More: docs/bench-internals.md (decode_bench).
"""
from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lab.errors import BenchError
from lab.measure import now_ns, percentile
from lab.measure.stats import median_ci
from lab.results.environment import machine
from lab.results.jsonio import write_json
from lab.store import DECODE_PATHS, decode_page

DECODE_FILE = "decode.json"


@dataclass(frozen=True, kw_only=True)
class DecodeParams:
    page_sizes: tuple[int, ...] = (50, 500)
    rounds: int = 200
    calls_per_round: int = 20       # pages per path and round (a round's time is their sum)
    body_bytes: int = 200


@dataclass(frozen=True, kw_only=True)
class PathRatio:
    """A path's time per page over the raw path's, per round: median and its 95% interval."""

    page_size: int
    path: str
    median: float
    low: float | None
    high: float | None
    us_per_page: float               # the path's median µs per page
    raw_us_per_page: float

    def describe(self) -> str:
        ci = "no interval" if self.low is None else f"95% interval {self.low:.3f}-{self.high:.3f}"
        return (f"{self.page_size}-row page, {self.path} / raw: {self.median:.3f}x ({ci}); "
                f"{self.us_per_page:,.0f} vs {self.raw_us_per_page:,.0f} µs per page")


def _check_same(decoders: dict[str, Callable[[list[Any]], Any]], rows: list[Any]) -> None:
    pages = {name: decode(rows) for name, decode in decoders.items()}
    if any(p is None for p in pages.values()) or not (pages["raw"] == pages["safe"] == pages["python"]):
        raise BenchError("the decode paths disagree on a common page", field="decode")


def run_decode_bench(params: DecodeParams, run_dir: Path,
                     progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Every round times ``calls_per_round`` pages of each path in a rotated order; writes
    ``bench/decode.json`` under ``run_dir`` and returns what it wrote."""
    rng = np.random.default_rng(0)
    out: dict[str, Any] = {"params": dataclasses.asdict(params), "machine": machine(), "ratios": []}
    with tempfile.TemporaryDirectory(prefix="lab-decode-") as tmp:
        for size in params.page_sizes:
            page = decode_page(size, body_bytes=params.body_bytes, key_dir=Path(tmp) / str(size))
            decoders, rows = page.decoders, page.rows
            _check_same(decoders, rows)
            times: dict[str, list[float]] = {p: [] for p in DECODE_PATHS}
            for _ in range(params.rounds):
                for name in rng.permutation(DECODE_PATHS):
                    decode = decoders[str(name)]
                    start = now_ns()
                    for _ in range(params.calls_per_round):
                        decode(rows)
                    times[str(name)].append((now_ns() - start) / 1000 / params.calls_per_round)
            progress(f"{size}-row pages: {params.rounds} rounds")
            raw = np.asarray(times["raw"])
            for path in ("safe", "python"):
                median, low, high = median_ci(np.asarray(times[path]) / raw)
                ratio = PathRatio(page_size=size, path=path, median=float(median), low=low, high=high,
                                  us_per_page=float(percentile(times[path], 50)),
                                  raw_us_per_page=float(percentile(times["raw"], 50)))
                out["ratios"].append(dataclasses.asdict(ratio) | {"text": ratio.describe()})
    (run_dir / "bench").mkdir(parents=True, exist_ok=True)
    write_json(run_dir / "bench" / DECODE_FILE, out)
    return out


def closing_lines(result: dict[str, Any]) -> Sequence[str]:
    return [r["text"] for r in result["ratios"]]
