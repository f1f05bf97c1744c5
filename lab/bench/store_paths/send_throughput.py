"""``send_throughput``: the full write path (``store.send`` from the thread pool, ``store.send_async``
from one thread) against its own steps issued raw (the floors of lab.bench.store_paths.floors), the
driver's floors (with and without the outbox append) and the bare dedup LWT alone.

More: docs/bench-internals.md.
"""
from __future__ import annotations

import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lab.bench.store_paths.asyncio_floors import run_coroutines, send_coroutine
from lab.bench.store_paths.callback_floors import (block_start_rate, run_chains, run_loop_paced_chains,
                                                   run_paced_chains, send_chain)
from lab.bench.store_paths.floors import FloorKeys, send_floor_calls, send_floor_plans
from lab.bench.store_paths.recording import BenchRun, Method, body
from lab.bench.store_paths.bench_report import (CALLBACK_SEND_GOAL, RATIO_DIGITS, SEND_FLOOR_GOAL, Comparison,
                                                driver_goals, paired_goal, paired_ratios_json)
from lab.measure import a_over_b, now_ns, paired_ratio, timed
from lab.measure.paired import DEFAULT_VOUCH_REL_HALF_WIDTH
from lab.measure.process_cpu import CpuMeter
from lab.measure.timing import NS_PER_SECOND
from lab.store import DedupState, Outbox, open_outbox, u128_to_blob, wall_clock_ms

CALLBACK_FLOOR = "send_callback_floor"
# send_callback_floor plus the durable outbox append, on a log of its own: the store's default
# outbox (the bench's store runs on it), opened as the store opens it, in a directory the bench removes
LOGGED_FLOOR = "send_logged_callback_floor"
LOGGED_FLOOR_OUTBOX = "local"
LOGGED_FLOOR_LOG_FILE = "outbox.sqlite"
ASYNCIO_FLOOR = "send_asyncio_floor"
# send_callback_floor started at the rate send_async's last block issued its sends: client CPU per call
# falls as the rate rises, and the floor without the append runs faster than the send can
PACED_FLOOR = "send_callback_floor_at_send_rate"
# the same chains at the same rate, each started by the driver's own event loop on its timer, not by a
# sleeping calling thread: thread-paced over it prices where a chain starts, it over the free-running
# floor the rate alone
LOOP_PACED_FLOOR = "send_callback_floor_at_send_rate_on_loop"
ASYNC = "send_async"


def bench_send(run: BenchRun) -> Comparison:
    """Every side of ``send_throughput`` in interleaved rounds (lab.bench.store_paths.floors for the
    floors); ``send_logged_callback_floor``'s log lives in a temporary directory, removed after."""
    with tempfile.TemporaryDirectory(prefix="lab-bench-floor-log-") as log_dir, \
            open_outbox(LOGGED_FLOOR_OUTBOX, path=Path(log_dir) / LOGGED_FLOOR_LOG_FILE) as log:
        return _bench_send(run, log)


def _bench_send(run: BenchRun, log: Outbox) -> Comparison:
    p, store = run.params, run.store
    tenant = uuid.uuid4()
    conversations = [uuid.uuid4() for _ in range(p.send_conversations)]
    senders = [uuid.uuid4() for _ in range(p.send_conversations)]
    lwt = store.prepare_raw(
        "INSERT INTO {ks}.client_dedup (tenant_id, sender_id, client_message_id, message_id, conversation_seq, "
        "state, created_at) VALUES (?, ?, ?, ?, ?, ?, ?) IF NOT EXISTS")

    def full(i: int) -> None:
        k = i % p.send_conversations
        store.send(run.text_request(tenant, conversations[k], senders[k], body(p.body_bytes, i), prefix="send"))

    def async_chain(i: int) -> Callable[[Callable[[BaseException | None], None]], None]:
        def chain(done: Callable[[BaseException | None], None]) -> None:
            k = i % p.send_conversations
            request = run.text_request(tenant, conversations[k], senders[k], body(p.body_bytes, i), prefix="async")
            store.send_async(request).add_done_callback(lambda future: done(future.exception()))
        return chain

    def bare(i: int) -> None:
        row = run.conn.execute(lwt, (tenant, senders[i % p.send_conversations], run.client_id("lwt"),
                                     u128_to_blob(uuid.uuid4().int), i + 1, int(DedupState.RESERVED),
                                     wall_clock_ms())).one()
        if not row[0]:
            raise RuntimeError("bare LWT not applied")

    # the floors' calls are built a block at a time, before each round's clock (a long run holds one
    # block of them, not every call), continuing each floor's own conversations (FloorKeys)
    floor_options: dict[str, dict[str, bool]] = {"send_floor_with_head_read": {"head_read": True}, "send_floor": {},
                                                 "send_floor_without_outbox": {"outbox": False}}
    floor_keys = {name: FloorKeys.new(p.send_conversations) for name in floor_options}
    ready: dict[str, tuple[int, list[Callable[[], None]]]] = {name: (0, []) for name in floor_options}

    def build_floors(n: int) -> None:
        for name, options in floor_options.items():
            start = ready[name][0] + len(ready[name][1])
            ready[name] = (start, send_floor_calls(run, n, conversations=p.send_conversations, keys=floor_keys[name],
                                                   start=start, **options))

    # the driver's floors: the like-for-like floor's statements without the blocking outbox append,
    # send_concurrency in flight from this thread: chained through callbacks, the same with the append
    # through the log's future (LOGGED_FLOOR), and as coroutines on an asyncio loop (each answer handed
    # to the loop), each on its own conversations
    chained: dict[str, dict[str, Any]] = {name: {"start": 0, "plans": [], "keys": FloorKeys.new(p.send_conversations)}
                                          for name in (CALLBACK_FLOOR, LOGGED_FLOOR, ASYNCIO_FLOOR, PACED_FLOOR,
                                                       LOOP_PACED_FLOOR)}
    send_rate: list[float] = []  # the rate send_async's sends started at, each block's

    def build_chained(n: int) -> None:
        for name, c in chained.items():
            start = c["start"] + len(c["plans"])
            c.update(start=start, plans=send_floor_plans(run, n, conversations=p.send_conversations, keys=c["keys"],
                                                         start=start, head_read=True, outbox=False,
                                                         log_record=name == LOGGED_FLOOR))

    def run_driver_floor(name: str, calls: list[int]) -> list[Any]:
        c = chained[name]
        plans = [c["plans"][i - c["start"]] for i in calls]
        if name == ASYNCIO_FLOOR:
            return run_coroutines([send_coroutine(run.conn, plan) for plan in plans], in_flight=p.send_concurrency)
        if name == PACED_FLOOR:
            return run_paced_chains([send_chain(run.conn, plan, None) for plan in plans], in_flight=p.send_concurrency,
                                    rate=send_rate[-1])
        if name == LOOP_PACED_FLOOR:  # the timer of the reactor this connection runs on
            return run_loop_paced_chains([send_chain(run.conn, plan, None) for plan in plans],
                                         in_flight=p.send_concurrency, rate=send_rate[-1],
                                         create_timer=run.create_timer)
        return run_chains([send_chain(run.conn, plan, log if name == LOGGED_FLOOR else None) for plan in plans],
                          in_flight=p.send_concurrency)

    def floor_method(name: str) -> Callable[[int], None]:
        def call(i: int) -> None:
            start, calls = ready[name]
            calls[i - start]()
        return call

    methods = {"send": (Method("send"), full), ASYNC: (Method(ASYNC), None),
               **{name: (Method(name), floor_method(name)) for name in floor_options},
               CALLBACK_FLOOR: (Method(CALLBACK_FLOOR), None), LOGGED_FLOOR: (Method(LOGGED_FLOOR), None),
               ASYNCIO_FLOOR: (Method(ASYNCIO_FLOOR), None), PACED_FLOOR: (Method(PACED_FLOOR), None),
               LOOP_PACED_FLOOR: (Method(LOOP_PACED_FLOOR), None),
               "bare_lwt_insert": (Method("bare_lwt_insert"), bare)}
    ack_ns = {"send": 0, ASYNC: 0}
    counters = {name: iter(range(1 << 62)) for name in methods}  # each method's calls numbered 0, 1, ...
    by_round: dict[str, list[float | None]] = {name: [] for name in methods}  # each block's throughput
    cpu_by_round: dict[str, list[float | None]] = {name: [] for name in methods}  # client CPU ms per call

    def block(name: str, n: int, measured: bool) -> None:
        method, fn = methods[name]
        before = run.snapshot()
        calls = [next(counters[name]) for _ in range(n)]
        cpu = CpuMeter()
        t0 = now_ns()
        if name == ASYNC:
            timings = run_chains([async_chain(i) for i in calls], in_flight=p.send_concurrency)
        elif fn is None:
            timings = run_driver_floor(name, calls)
        else:
            timings = list(run.pool.map(lambda i: timed(lambda: fn(i), errors=True)[1], calls))
        t_ack = now_ns()
        if name == ASYNC:  # the rate its sends started at (the block's throughput is lower by the last one's latency)
            send_rate.append(block_start_rate(timings, calls=n, elapsed_ns=t_ack - t0))
        if name in ack_ns:
            store.drain()  # the head updates this block caused belong to this block
        t1 = now_ns()
        used = cpu.stop()
        if not measured:
            method.warmup += n
            return
        throughput, cpu_ms = method.add_block(timings, before=before, after=run.snapshot(), elapsed_ns=t1 - t0,
                                              cpu_seconds=used.cpu_seconds)
        by_round[name].append(throughput)
        cpu_by_round[name].append(cpu_ms)
        if name in ack_ns:
            ack_ns[name] += t_ack - t0

    names = list(methods)
    build_floors(p.send_warmup)
    build_chained(p.send_warmup)
    for name in names:
        block(name, p.send_warmup, measured=False)
    blocks = p.send_ops // p.send_block
    for r in range(blocks):
        build_floors(p.send_block)
        build_chained(p.send_block)
        for name in (names if r % 2 == 0 else names[::-1]):
            block(name, p.send_block, measured=True)
        run.log(f"  send block {r + 1}/{blocks}")
    send_m = methods["send"][0]
    ack_only = (round(send_m.stats.ok / (ack_ns["send"] / NS_PER_SECOND), 2)
                if ack_ns["send"] else None)
    f = send_m.result(ack_only_throughput_ops_per_s=ack_only)
    sa = methods[ASYNC][0].result()
    fh = methods["send_floor_with_head_read"][0].result()
    fl = methods["send_floor"][0].result()
    fn = methods["send_floor_without_outbox"][0].result()
    cb = methods[CALLBACK_FLOOR][0].result()
    lg = methods[LOGGED_FLOOR][0].result()
    ao = methods[ASYNCIO_FLOOR][0].result()
    pf = methods[PACED_FLOOR][0].result()
    lp = methods[LOOP_PACED_FLOOR][0].result()
    b = methods["bare_lwt_insert"][0].result()
    return Comparison(
        paired_rounds=paired_rounds(by_round, block_calls=p.send_block, cpu_ms_per_call=cpu_by_round),
        description="send throughput: store.send (full §5.1 path) and store.send_async (the same walk on the "
                    "driver's event loop, a future per send) vs its own steps issued raw "
                    "(send_floor_with_head_read: the fencing read on a conversation's first send, dedup LWT, record + "
                    "index together, the durable outbox append, COMMITTED, head read, head write; send_floor: the same "
                    "without the two reads; send_floor_without_outbox: send_floor without the append; "
                    "send_callback_floor: send_floor_with_head_read's statements without the append, chained through "
                    "the driver's callbacks from one thread; send_logged_callback_floor: the same plus the durable "
                    "outbox append between record + index and COMMITTED, a local outbox of its own through "
                    "append_async, the chain going on from the append's future; send_asyncio_floor: "
                    "send_callback_floor's statements as coroutines on an asyncio loop in one "
                    "thread; send_callback_floor_at_send_rate: send_callback_floor started at the rate the last "
                    "send_async block issued its sends, from the calling thread; "
                    "send_callback_floor_at_send_rate_on_loop: the same, each chain started by the driver's event "
                    "loop on its timer) vs the bare client_dedup INSERT ... IF NOT EXISTS alone",
        concurrency=f"thread pool of {p.send_concurrency} closed-loop callers (synchronous calls); "
                    f"send_async and the callback floors: {p.send_concurrency} in flight from one thread; "
                    f"send_asyncio_floor: {p.send_concurrency} coroutines in flight on one asyncio loop; the paced "
                    f"floors: at most {p.send_concurrency} in flight, started from the calling thread or (on_loop) "
                    "from the driver's event loop",
        order=f"warm-up block of {p.send_warmup} per method discarded, then {blocks} interleaved blocks of "
              f"{p.send_block} per method, the order reversed every round; write-path blocks include store.drain(); "
              "the floors' calls of a round built before it",
        methods={f.name: f, sa.name: sa, fh.name: fh, fl.name: fl, fn.name: fn, cb.name: cb, lg.name: lg, ao.name: ao,
                 pf.name: pf, lp.name: lp, b.name: b},
        ratio={"send_over_floor_with_head_read_throughput": a_over_b(f.throughput_ops_per_s, fh.throughput_ops_per_s,
                                                                    digits=RATIO_DIGITS),
               "send_over_floor_with_head_read_p50_latency": a_over_b(f.latency_us.p50, fh.latency_us.p50,
                                                                     digits=RATIO_DIGITS),
               "floor_with_head_read_over_floor_throughput": a_over_b(fh.throughput_ops_per_s,
                                                                      fl.throughput_ops_per_s, digits=RATIO_DIGITS),
               "send_over_floor_throughput": a_over_b(f.throughput_ops_per_s, fl.throughput_ops_per_s,
                                                      digits=RATIO_DIGITS),
               "send_over_floor_without_outbox_throughput": a_over_b(f.throughput_ops_per_s, fn.throughput_ops_per_s,
                                                                     digits=RATIO_DIGITS),
               "floor_over_floor_without_outbox_throughput": a_over_b(fl.throughput_ops_per_s,
                                                                      fn.throughput_ops_per_s, digits=RATIO_DIGITS),
               "send_over_callback_floor_throughput": a_over_b(f.throughput_ops_per_s, cb.throughput_ops_per_s,
                                                               digits=RATIO_DIGITS),
               "send_async_over_callback_floor_throughput": a_over_b(sa.throughput_ops_per_s,
                                                                     cb.throughput_ops_per_s, digits=RATIO_DIGITS),
               "floor_with_head_read_over_callback_floor_throughput": a_over_b(
                   fh.throughput_ops_per_s, cb.throughput_ops_per_s, digits=RATIO_DIGITS),
               "send_async_over_logged_callback_floor_throughput": a_over_b(
                   sa.throughput_ops_per_s, lg.throughput_ops_per_s, digits=RATIO_DIGITS),
               "logged_floor_over_callback_floor_throughput": a_over_b(
                   lg.throughput_ops_per_s, cb.throughput_ops_per_s, digits=RATIO_DIGITS),
               "asyncio_floor_over_callback_floor_throughput": a_over_b(
                   ao.throughput_ops_per_s, cb.throughput_ops_per_s, digits=RATIO_DIGITS),
               "send_over_floor_p50_latency": a_over_b(f.latency_us.p50, fl.latency_us.p50, digits=RATIO_DIGITS),
               "send_over_floor_p99_latency": a_over_b(f.latency_us.p99, fl.latency_us.p99, digits=RATIO_DIGITS),
               "send_over_bare_throughput": a_over_b(f.throughput_ops_per_s, b.throughput_ops_per_s,
                                                     digits=RATIO_DIGITS),
               "bare_over_send_throughput": a_over_b(b.throughput_ops_per_s, f.throughput_ops_per_s,
                                                     digits=RATIO_DIGITS),
               "send_over_bare_p50_latency": a_over_b(f.latency_us.p50, b.latency_us.p50, digits=RATIO_DIGITS),
               "send_over_bare_p99_latency": a_over_b(f.latency_us.p99, b.latency_us.p99, digits=RATIO_DIGITS)})


# the per-round ratios reported (store.json's paired_rounds.ratios), each send over one floor
PAIRED = {"send_over_floor_with_head_read_throughput": ("send", "send_floor_with_head_read"),
          "send_over_floor_throughput": ("send", "send_floor"),
          "send_over_floor_without_outbox_throughput": ("send", "send_floor_without_outbox"),
          "floor_over_floor_without_outbox_throughput": ("send_floor", "send_floor_without_outbox"),
          "send_over_callback_floor_throughput": ("send", CALLBACK_FLOOR),
          "send_async_over_callback_floor_throughput": (ASYNC, CALLBACK_FLOOR),
          "send_over_send_async_throughput": ("send", ASYNC),
          "floor_with_head_read_over_callback_floor_throughput": ("send_floor_with_head_read", CALLBACK_FLOOR),
          "asyncio_floor_over_callback_floor_throughput": (ASYNCIO_FLOOR, CALLBACK_FLOOR),
          "send_async_over_logged_callback_floor_throughput": (ASYNC, LOGGED_FLOOR),
          "floor_with_head_read_over_logged_callback_floor_throughput": ("send_floor_with_head_read", LOGGED_FLOOR),
          "logged_floor_over_callback_floor_throughput": (LOGGED_FLOOR, CALLBACK_FLOOR),
          "send_async_over_paced_callback_floor_throughput": (ASYNC, PACED_FLOOR),
          "paced_floor_over_callback_floor_throughput": (PACED_FLOOR, CALLBACK_FLOOR),
          "logged_floor_over_paced_callback_floor_throughput": (LOGGED_FLOOR, PACED_FLOOR),
          # where a paced chain starts (the calling thread, one sleep each, vs the driver's loop), and the rate
          "paced_floor_over_loop_paced_floor_throughput": (PACED_FLOOR, LOOP_PACED_FLOOR),
          "loop_paced_floor_over_callback_floor_throughput": (LOOP_PACED_FLOOR, CALLBACK_FLOOR),
          "send_async_over_loop_paced_callback_floor_throughput": (ASYNC, LOOP_PACED_FLOOR),
          "send_over_bare_throughput": ("send", "bare_lwt_insert")}
GOAL_RATIO = "send_over_floor_with_head_read_throughput"  # the goal: >= SEND_FLOOR_GOAL
CALLBACK_GOAL_RATIO = "send_async_over_callback_floor_cpu_per_call"  # the driver floor's goal: <= CALLBACK_SEND_GOAL
# the same goal against the driver floor with the outbox append (the durable log step §5.1 asks of every send)
LOGGED_GOAL_RATIO = "send_async_over_logged_callback_floor_cpu_per_call"
# and against the driver floor at the send's own rate (the like-for-like rate)
PACED_GOAL_RATIO = "send_async_over_paced_callback_floor_cpu_per_call"
# and at that rate with each chain started on the driver's loop, where send_async's next send starts
LOOP_PACED_GOAL_RATIO = "send_async_over_loop_paced_callback_floor_cpu_per_call"
# paired_rounds' driver-floor goals (each judged only where its floor ran) and the ratio each is judged on
DRIVER_GOALS = {"callback_goal": CALLBACK_GOAL_RATIO, "logged_callback_goal": LOGGED_GOAL_RATIO,
                "paced_callback_goal": PACED_GOAL_RATIO, "loop_paced_callback_goal": LOOP_PACED_GOAL_RATIO}


def paired_rounds(by_round: dict[str, list[float | None]], *, block_calls: int,
                  cpu_ms_per_call: dict[str, list[float | None]] | None = None) -> dict[str, Any]:
    """store.json's ``paired_rounds``: each measured round's throughput per method and, per pair,
    the ratio of the two blocks of each round (lab.measure.paired_ratio): both blocks of a round
    ran back to back on the same machine, so a burst of someone else's load or a flush of the node
    moves one round, not the whole figure. ``cpu_ms_per_call``: this process's CPU (every thread:
    callers, the driver's I/O loop, the head writer) per call of each block, and per pair the same
    ratio of it (``cpu_ratios``): what the store adds on the client over its statements, which the
    node's own noise moves less than it moves throughput."""
    ratios = {key: paired_ratio(by_round[a], by_round[b]) for key, (a, b) in PAIRED.items()}
    cpu = None if cpu_ms_per_call is None else {
        key.replace("_throughput", "_cpu_per_call"): paired_ratio(cpu_ms_per_call[a], cpu_ms_per_call[b])
        for key, (a, b) in PAIRED.items() if a in cpu_ms_per_call and b in cpu_ms_per_call}
    like = ratios[GOAL_RATIO]
    return {"block_calls": block_calls, "rounds": len(by_round["send"]),
            "vouch_rel_half_width": DEFAULT_VOUCH_REL_HALF_WIDTH,
            # judged only from a figure the run vouches for: a bootstrap interval of a few rounds
            # is too coarse to call the goal missed or met
            "goal": paired_goal(GOAL_RATIO, like, limit=SEND_FLOOR_GOAL, at_least=True),
            # send_async's client CPU per call over each driver floor's, against CALLBACK_SEND_GOAL
            **({} if cpu is None else driver_goals(cpu, DRIVER_GOALS, limit=CALLBACK_SEND_GOAL)),
            "throughput_by_round": {name: [None if x is None else round(x, 2) for x in xs]
                                    for name, xs in by_round.items()},
            "ratios": paired_ratios_json(ratios),
            **({} if cpu is None else {
                "cpu_ms_per_call_by_round": {name: [None if x is None else round(x, 3) for x in xs]
                                             for name, xs in cpu_ms_per_call.items()},
                "cpu_ratios": paired_ratios_json(cpu)})}
