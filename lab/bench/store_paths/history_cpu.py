"""``history_latest_page_cpu``: the latest page's client CPU per call with the send's callers in
flight: ``store.history`` and ``history_floor`` from the thread pool, ``store.history_async`` and
``history_callback_floor`` (the same two statements chained through the driver's callbacks) as
many in flight from one thread, and that floor again at the rate the last ``history_async`` block
made its pages, started on the driver's loop (client CPU per call falls as the rate rises), in
interleaved blocks.

More: docs/bench-internals.md.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from lab.bench.store_paths.bench_report import (CALLBACK_PAGE_GOAL, RATIO_DIGITS, Comparison, driver_goals,
                                                paired_ratios_json)
from lab.bench.store_paths.callback_floors import block_start_rate, page_chain, run_chains, run_loop_paced_chains
from lab.bench.store_paths.floors import history_floor, history_floor_items
from lab.bench.store_paths.recording import BenchRun, Method
from lab.measure import a_over_b, now_ns, paired_ratio, timed
from lab.measure.paired import DEFAULT_VOUCH_REL_HALF_WIDTH
from lab.measure.process_cpu import CpuMeter
from lab.measure.timing import MS_PER_SECOND
from lab.store import SendAck, seq_bucket

CALLBACK_FLOOR = "history_callback_floor"
ASYNC = "history_async"
# history_callback_floor started at the rate history_async's last block made its pages, each chain by the
# driver's loop on its timer (where history_async's next page starts: a page's end): the floor alone runs
# faster than the page, and client CPU per call falls as the rate rises
PACED_FLOOR = "history_callback_floor_at_page_rate"
# the per-round ratios reported, each of one side's blocks over another's of the same round
PAIRED = {"history_async_over_callback_floor": (ASYNC, CALLBACK_FLOOR),
          "history_over_callback_floor": ("history", CALLBACK_FLOOR),
          "history_floor_over_callback_floor": ("history_floor", CALLBACK_FLOOR),
          "history_over_floor": ("history", "history_floor"),
          "history_over_history_async": ("history", ASYNC),
          "history_async_over_paced_callback_floor": (ASYNC, PACED_FLOOR),
          "paced_floor_over_callback_floor": (PACED_FLOOR, CALLBACK_FLOOR)}
GOAL_RATIO = "history_async_over_callback_floor_cpu_per_call"  # the goal: <= CALLBACK_PAGE_GOAL
PACED_GOAL_RATIO = "history_async_over_paced_callback_floor_cpu_per_call"  # the same goal, at equal rates


def bench_history_cpu(run: BenchRun, tenant: uuid.UUID, conversation: uuid.UUID, acks: list[SendAck]) -> Comparison:
    p, store = run.params, run.store
    width = store.constants.message_seq_bucket_width
    bucket = seq_bucket(max(a.conversation_seq for a in acks), width)
    expected = min(p.history_limit, sum(1 for a in acks if seq_bucket(a.conversation_seq, width) == bucket))
    items = history_floor_items(run, tenant, conversation, bucket, p.history_limit)
    floor = history_floor(run, tenant, conversation, bucket, p.history_limit)

    def page() -> None:
        if len(store.history(tenant, conversation, limit=p.history_limit).messages) != p.history_limit:
            raise RuntimeError("IncompleteResult")

    def floor_page() -> None:
        if floor() != expected:
            raise RuntimeError("IncompleteResult")

    def async_chain(done: Callable[[BaseException | None], None]) -> None:
        def ended(future: Any) -> None:
            error = future.exception()
            if error is None and len(future.result().messages) != p.history_limit:
                error = RuntimeError("IncompleteResult")
            done(error)
        store.history_async(tenant, conversation, limit=p.history_limit).add_done_callback(ended)

    sides: dict[str, Callable[[], None] | None] = {"history": page, "history_floor": floor_page, ASYNC: None,
                                                   CALLBACK_FLOOR: None, PACED_FLOOR: None}
    methods = {name: Method(name) for name in sides}
    by_round: dict[str, list[float | None]] = {name: [] for name in sides}
    cpu_by_round: dict[str, list[float | None]] = {name: [] for name in sides}
    cpu_total = {name: 0.0 for name in sides}
    page_rate: list[float] = []  # the rate history_async's pages started at, each block's

    def block(name: str, n: int, measured: bool) -> None:
        method, fn = methods[name], sides[name]
        chains = (None if fn is not None else [async_chain] * n if name == ASYNC
                  else [page_chain(run.conn, items, expected) for _ in range(n)])
        before = run.snapshot()
        cpu = CpuMeter()
        t0 = now_ns()
        if chains is None:
            timings = list(run.pool.map(lambda _: timed(fn, errors=True)[1], range(n)))
        elif name == PACED_FLOOR:
            timings = run_loop_paced_chains(chains, in_flight=p.send_concurrency, rate=page_rate[-1],
                                            create_timer=run.create_timer)
        else:
            timings = run_chains(chains, in_flight=p.send_concurrency)
        t1 = now_ns()
        used = cpu.stop()
        if name == ASYNC:  # the rate its pages started at (the block's throughput is lower by the last one's latency)
            page_rate.append(block_start_rate(timings, calls=n, elapsed_ns=t1 - t0))
        if not measured:
            method.warmup += n
            return
        throughput, cpu_ms = method.add_block(timings, before=before, after=run.snapshot(), elapsed_ns=t1 - t0,
                                              cpu_seconds=used.cpu_seconds)
        by_round[name].append(throughput)
        cpu_by_round[name].append(cpu_ms)
        cpu_total[name] += used.cpu_seconds * MS_PER_SECOND

    names = list(sides)
    for name in names:
        block(name, p.history_cpu_block, measured=False)
    rounds = p.history_cpu_ops // p.history_cpu_block
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            block(name, p.history_cpu_block, measured=True)
        if (r + 1) % max(1, rounds // 4) == 0:
            run.log(f"  history CPU rounds {r + 1}/{rounds}")
    results = {name: m.result(rows_per_op=p.history_limit if name in ("history", ASYNC) else expected)
               for name, m in methods.items()}
    per_call = {name: a_over_b(cpu_total[name], results[name].count, digits=RATIO_DIGITS) for name in sides}
    return Comparison(
        paired_rounds=paired_rounds(by_round, cpu_by_round, block_calls=p.history_cpu_block),
        description=f"latest history page (limit {p.history_limit}), client CPU per call: store.history and "
                    "history_floor (its two statements issued raw together) from the thread pool; "
                    "store.history_async (the same walk on the driver's event loop, a future per page) and "
                    "history_callback_floor (the same two statements chained through the driver's callbacks, rows "
                    "counted, not decoded) from one thread; history_callback_floor_at_page_rate: that floor started "
                    "at the rate the last history_async block made its pages, each chain by the driver's loop's timer",
        concurrency=f"thread pool of {p.send_concurrency} closed-loop callers (synchronous calls); "
                    f"history_async and the callback floors: {p.send_concurrency} in flight from one thread",
        order=f"warm-up block of {p.history_cpu_block} per side discarded, then {rounds} interleaved blocks of "
              f"{p.history_cpu_block} per side, the order reversed every round",
        methods=results,
        ratio={**{f"{key}_cpu_per_call": a_over_b(per_call[a], per_call[b], digits=RATIO_DIGITS)
                  for key, (a, b) in PAIRED.items()},
               **{f"{key}_throughput": a_over_b(results[a].throughput_ops_per_s, results[b].throughput_ops_per_s,
                                                digits=RATIO_DIGITS) for key, (a, b) in PAIRED.items()}})


def paired_rounds(by_round: dict[str, list[float | None]], cpu_ms_per_call: dict[str, list[float | None]], *,
                  block_calls: int) -> dict[str, Any]:
    """store.json's ``paired_rounds`` of the page's CPU comparison: per side each round's throughput
    and client CPU ms per call, per pair the ratio of the two blocks of each round
    (lab.measure.paired_ratio), the goal judged on the CPU ratio only when the run vouches for it.
    ``by_round`` holds every side; a pair is reported when ``cpu_ms_per_call`` holds both its sides."""
    pairs = {key: (a, b) for key, (a, b) in PAIRED.items() if a in cpu_ms_per_call and b in cpu_ms_per_call}
    cpu = {f"{key}_cpu_per_call": paired_ratio(cpu_ms_per_call[a], cpu_ms_per_call[b]) for key, (a, b) in pairs.items()}
    return {"block_calls": block_calls, "rounds": len(by_round["history"]),
            "vouch_rel_half_width": DEFAULT_VOUCH_REL_HALF_WIDTH,
            **driver_goals(cpu, {"callback_goal": GOAL_RATIO, "paced_callback_goal": PACED_GOAL_RATIO},
                           limit=CALLBACK_PAGE_GOAL),
            "throughput_by_round": {name: [None if x is None else round(x, 2) for x in xs]
                                    for name, xs in by_round.items()},
            "cpu_ms_per_call_by_round": {name: [None if x is None else round(x, 3) for x in xs]
                                         for name, xs in cpu_ms_per_call.items()},
            "ratios": paired_ratios_json({f"{key}_throughput": paired_ratio(by_round[a], by_round[b])
                                          for key, (a, b) in pairs.items()}),
            "cpu_ratios": paired_ratios_json(cpu)}
