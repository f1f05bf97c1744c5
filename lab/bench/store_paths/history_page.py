"""``history_latest_page``: ``store.history`` (latest page: conversation_head read + one bucket
read + decrypt/decode) against its own two statements issued raw together (``history_floor``,
lab.bench.store_paths.floors) and against one bare single-partition SELECT of the same columns and LIMIT.

More: docs/bench-internals.md.
"""
from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from lab.bench.store_paths.floors import history_floor
from lab.bench.store_paths.recording import BenchRun, Method, alternate
from lab.bench.store_paths.bench_report import (HISTORY_FLOOR_GOAL, RATIO_DIGITS, Comparison, paired_goal,
                                                paired_ratios_json)
from lab.measure import a_over_b, paired_ratio, percentile
from lab.measure.paired import DEFAULT_VOUCH_REL_HALF_WIDTH
from lab.store import PARTITION_ROW_COLUMNS, SendAck, seq_bucket

# the per-round ratios reported (store.json's paired_rounds.ratios): the page's p50 over each other side's
PAIRED = {"history_over_floor_p50": ("history", "history_floor"),
          "history_over_bare_p50": ("history", "bare_select")}
GOAL_RATIO = "history_over_floor_p50"  # the goal: <= HISTORY_FLOOR_GOAL


def bench_history(run: BenchRun, tenant: uuid.UUID, conversation: uuid.UUID, acks: list[SendAck]) -> Comparison:
    p, store = run.params, run.store
    width = store.constants.message_seq_bucket_width
    bucket = seq_bucket(max(a.conversation_seq for a in acks), width)
    bare_stmt = store.prepare_raw(
        f"SELECT {', '.join(PARTITION_ROW_COLUMNS)} FROM {{ks}}.message_record WHERE tenant_id = ? AND "
        "conversation_id = ? AND seq_bucket = ? ORDER BY conversation_seq DESC LIMIT ?")
    expected = min(p.history_limit, sum(1 for a in acks if seq_bucket(a.conversation_seq, width) == bucket))
    history_m, floor_m, bare_m = (Method(name, keep_samples=True) for name in ("history", "history_floor",
                                                                               "bare_select"))
    calls = {
        "history": (history_m, lambda: len(store.history(tenant, conversation, limit=p.history_limit).messages),
                    p.history_limit),
        "history_floor": (floor_m, history_floor(run, tenant, conversation, bucket, p.history_limit), expected),
        "bare_select": (bare_m, lambda: len(list(run.conn.execute(bare_stmt, (tenant, conversation, bucket,
                                                                              p.history_limit)))), expected),
    }
    alternate(run, calls, warmup=p.history_warmup, ops=p.history_ops, progress="history rounds")
    h, fl = history_m.result(rows_per_op=p.history_limit), floor_m.result(rows_per_op=expected)
    b = bare_m.result(rows_per_op=expected)
    rounds = p.history_ops // p.history_round_calls
    return Comparison(
        paired_rounds=paired_rounds({m.name: m.samples_us or [] for m in (history_m, floor_m, bare_m)},
                                    round_calls=p.history_round_calls),
        description=f"latest history page (store.history, limit {p.history_limit}: head read + bucket read + "
                    "decrypt/decode) vs its own two statements issued raw together (history_floor: rows fetched, "
                    "not decoded) vs a bare single-partition SELECT of the same columns and LIMIT",
        concurrency="one caller, synchronous calls (no queueing); throughput = calls / own summed latency",
        order=f"in turn call by call, the order reversed every round; {p.history_warmup} warm-up rounds discarded; "
              f"per-round figures over {rounds} rounds of {p.history_round_calls} consecutive calls per side",
        methods={h.name: h, fl.name: fl, b.name: b},
        ratio={"history_over_floor_p50": a_over_b(h.latency_us.p50, fl.latency_us.p50, digits=RATIO_DIGITS),
               "history_over_floor_p99": a_over_b(h.latency_us.p99, fl.latency_us.p99, digits=RATIO_DIGITS),
               "history_over_bare_p50": a_over_b(h.latency_us.p50, b.latency_us.p50, digits=RATIO_DIGITS),
               "history_over_bare_p99": a_over_b(h.latency_us.p99, b.latency_us.p99, digits=RATIO_DIGITS),
               "bare_over_history_throughput": a_over_b(b.throughput_ops_per_s, h.throughput_ops_per_s,
                                                        digits=RATIO_DIGITS)})


def paired_rounds(samples_us: Mapping[str, Sequence[float]], *, round_calls: int) -> dict[str, Any]:
    """store.json's ``paired_rounds`` of the latest page: each side's measured latencies (µs, in call
    order) cut into rounds of ``round_calls`` consecutive calls (a last, shorter round is left out),
    each round's p50 (lab.measure.percentile), and per pair the ratio of the two p50s of each round
    (lab.measure.paired_ratio): the sides' calls of a round alternate, so a burst of someone else's
    load or a flush of the node moves one round, not the whole figure."""
    p50s = {name: [percentile(xs[i:i + round_calls], 50) for i in range(0, len(xs) - round_calls + 1, round_calls)]
            for name, xs in samples_us.items()}
    ratios = {key: paired_ratio(p50s[a], p50s[b]) for key, (a, b) in PAIRED.items()}
    goal = ratios[GOAL_RATIO]
    return {"round_calls": round_calls, "rounds": len(p50s["history"]),
            "vouch_rel_half_width": DEFAULT_VOUCH_REL_HALF_WIDTH,
            # judged only from a figure the run vouches for, as the send's (send_throughput.paired_rounds)
            "goal": paired_goal(GOAL_RATIO, goal, limit=HISTORY_FLOOR_GOAL, at_least=False),
            "p50_us_by_round": {name: [None if x is None else round(x, 1) for x in xs] for name, xs in p50s.items()},
            "ratios": paired_ratios_json(ratios)}
