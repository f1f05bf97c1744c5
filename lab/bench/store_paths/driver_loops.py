"""The driver's I/O loops priced per request: one prepared read issued with ``in_flight`` in flight from
one thread, through callbacks or coroutines, on the libev reactor and on the driver's asyncio reactor
(coroutines then on the driver's own loop, no hand-off), in interleaved rounds. Which loop and which
style an event-driven store core should stand on.

More: docs/bench-internals.md.
"""
from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Mapping
from typing import Any

from lab.bench.store_paths.asyncio_floors import awaited
from lab.cluster.config import ClusterConfig
from lab.cluster.connection import connect
from lab.cluster.reactors import reactor_class
from lab.errors import BenchError, ConfigError
from lab.measure import paired_ratio, percentile
from lab.measure.process_cpu import CpuMeter

__all__ = ["BASELINE", "VARIANTS", "probe_driver_loops"]

QUERY = "SELECT release_version FROM system.local WHERE key = 'local'"
# (reactor, style): callbacks chain each request from the last one's callback; coroutines await each
# answer on an asyncio loop: the caller's own (libev: each answer handed to it) or the driver's
VARIANTS: tuple[tuple[str, str], ...] = (("libev", "callbacks"), ("libev", "coroutines"),
                                         ("asyncio", "callbacks"), ("asyncio", "coroutines on the driver's loop"))
BASELINE = "libev callbacks"


def _callbacks(session: Any, prepared: Any, n: int, in_flight: int) -> None:
    done, lock = threading.Event(), threading.Lock()
    state = {"started": 0, "left": n, "error": None}

    def fire() -> None:
        with lock:
            if state["started"] >= n:
                return
            state["started"] += 1
        session.execute_async(prepared).add_callbacks(answered, failed)

    def answered(_rows: Any) -> None:
        with lock:
            state["left"] -= 1
            last = state["left"] == 0
        done.set() if last else fire()

    def failed(error: BaseException) -> None:
        state["error"] = error
        done.set()

    for _ in range(min(in_flight, n)):
        fire()
    done.wait()
    if state["error"] is not None:
        raise BenchError(f"driver loop probe: a request failed: {state['error']}")


def _coroutines(session: Any, prepared: Any, n: int, in_flight: int, loop: asyncio.AbstractEventLoop | None) -> None:
    async def main() -> None:
        queue = list(range(n))

        async def worker() -> None:
            while queue:
                queue.pop()
                await awaited(session.execute_async(prepared))
        await asyncio.gather(*(worker() for _ in range(min(in_flight, n))))

    if loop is None:
        asyncio.run(main())
    else:
        asyncio.run_coroutine_threadsafe(main(), loop).result()


def probe_driver_loops(config: ClusterConfig, *, requests: int, rounds: int, in_flight: int) -> dict[str, Any]:
    """Client CPU per request (this process, every thread) of each variant, ``requests`` per variant
    and round, the variants' order reversed every round; each variant's median over the rounds and its
    paired ratio to :data:`BASELINE`. A reactor this driver build lacks is named, not measured."""
    missing: dict[str, str] = {}
    with contextlib.ExitStack() as stack:
        sessions: dict[str, tuple[Any, Any, asyncio.AbstractEventLoop | None]] = {}
        for reactor in dict.fromkeys(r for r, _ in VARIANTS):
            try:
                cls = reactor_class(reactor)
            except ConfigError as exc:
                missing[reactor] = str(exc)
                continue
            conn = stack.enter_context(connect(config, reactor=reactor))
            loop = getattr(cls, "_loop", None) if reactor == "asyncio" else None
            if reactor == "asyncio" and loop is None:
                missing[reactor] = "the driver's asyncio reactor exposes no loop to run coroutines on"
                continue
            sessions[reactor] = (conn.session, conn.session.prepare(QUERY), loop)
        names = [f"{r} {s}" for r, s in VARIANTS if r in sessions]

        def once(name: str, n: int) -> float:
            reactor, style = name.split(" ", 1)
            session, prepared, driver_loop = sessions[reactor]
            with CpuMeter() as meter:
                if style == "callbacks":
                    _callbacks(session, prepared, n, in_flight)
                else:
                    _coroutines(session, prepared, n, in_flight, driver_loop)
            return meter.reading.cpu_seconds * 1e6 / n

        for name in names:
            once(name, max(1, requests // 4))  # warm-up: connections, prepared ids, the loops' first wake-ups
        us: dict[str, list[float]] = {name: [] for name in names}
        for r in range(rounds):
            for name in (names if r % 2 == 0 else names[::-1]):
                us[name].append(once(name, requests))
    out: dict[str, Any] = {"query": QUERY, "requests_per_round": requests, "rounds": rounds, "in_flight": in_flight,
                           "baseline": BASELINE, "missing_reactors": missing, "variants": {}}
    for name, xs in us.items():
        ratio = paired_ratio(xs, us[BASELINE]) if BASELINE in us else None
        out["variants"][name] = {"us_per_request_by_round": [round(x, 1) for x in xs],
                                 "us_per_request_median": round(percentile(xs, 50), 1) if xs else None,
                                 "over_baseline": None if ratio is None else ratio.to_json(3)}
    return out


def driver_loops_line(probe: Mapping[str, Any] | None) -> str | None:
    """The closing note's line: each variant's client CPU per request and its ratio to the baseline."""
    if not probe or not probe.get("variants"):
        return None
    parts = []
    for name, v in probe["variants"].items():
        r = v["over_baseline"]
        ratio = "" if name == probe["baseline"] or r is None or r["median"] is None else (
            f", {r['median']}x" + ("" if r["ci_low"] is None else f" ({r['ci_low']}-{r['ci_high']}x)"))
        parts.append(f"{name} {v['us_per_request_median']} µs{ratio}")
    lost = "".join(f"; {k}: not measured ({why})" for k, why in probe.get("missing_reactors", {}).items())
    return (f"- Driver loops, client CPU per request ({probe['in_flight']} in flight from one thread, "
            f"{probe['rounds']} interleaved rounds of {probe['requests_per_round']:,}): " + ", ".join(parts)
            + f"; ratios to {probe['baseline']}, the median's 95% interval in brackets{lost}.")
