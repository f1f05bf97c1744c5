"""Grouped vs naive batch reads (design §4.3, S-1).

Shapes, all joined for one tenant with the body LRU cleared before every grouped read:

- ``s1_group_500``: one big group, a backlog of 500 consecutive messages (S-1 (a): <= 2 reads);
- ``s1_dm_20x5``: 20 direct chats, the latest 5 messages each (S-1 (b): <= 21 reads);
- ``group_500_sparse``: the same group, every other message (no range: IN lists split at
  ``batch_read_in_list_limit``);
- ``mix_<n>``: realistic mailbox backlogs of n entries drawn from the workload: conversations
  picked by activity, the latest few messages of each.

Grouped = ``store.batch_read`` (one request per (conversation, bucket) group and table, groups
concurrent). Naive = what the design forbids: one point read of message_record per message
(and one of message_reaction_summary, to return the same data), same concurrency. Counted:
message_record requests (request accounting), all requests, wall latency; cost per joined
entry = message_record requests / entries (the design's 0.002 and 0.2).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from lab.store.records import MESSAGE_RECORD_COLUMNS
from lab.workload import generate
from lab.calibration.experiments.common import Lab, RecordLoader, latency_summary, progress, scratch_name, scratch_store, single_partition_rows, timed_ms

NAIVE_CONCURRENCY = 32


@dataclass(frozen=True, kw_only=True)
class Params:
    profile: str = "chat_mix"
    dataset_messages: int = 2000
    mix_sizes: tuple[int, ...] = (50, 200)
    group_backlog: int = 500
    dm_count: int = 20
    dm_backlog: int = 5
    repeats: int = 5
    seed: int = 0
    keep_keyspace: bool = False
    show_progress: bool = True


@dataclass(frozen=True, kw_only=True)
class Result:
    params: Params
    in_list_limit: int
    runs: pd.DataFrame       # one row per (shape, method, repeat)
    summary: pd.DataFrame    # shape x method

    def values(self) -> dict[str, Any]:
        out: dict[str, Any] = {"in_list_limit": self.in_list_limit, "repeats": self.params.repeats}
        for r in self.summary.itertuples():
            key = f"{r.shape}_{r.method}"
            out[f"{key}_entries"] = int(r.entries)
            out[f"{key}_record_reads"] = int(r.record_reads)
            out[f"{key}_requests"] = int(r.requests)
            out[f"{key}_point_reads"] = int(r.point_reads)
            out[f"{key}_index_reads"] = int(r.index_reads)
            out[f"{key}_p50_ms"] = float(r.p50_ms)
            out[f"{key}_reads_per_entry"] = float(r.reads_per_entry)
            out[f"{key}_us_per_entry"] = float(r.us_per_entry)
        s = self.summary.set_index(["shape", "method"])
        for shape in self.summary["shape"].unique():
            if (shape, "naive") in s.index and (shape, "grouped") in s.index:
                out[f"{shape}_speedup"] = float(s.loc[(shape, "naive"), "p50_ms"] / s.loc[(shape, "grouped"), "p50_ms"])
        return out


def _entries(rows: pd.DataFrame) -> list[Any]:
    from lab.store.batch_read import BatchEntry
    from lab.store.ids import compose_message_id

    return [BatchEntry(conversation_id=uuid.UUID(str(r.conversation_id)), conversation_seq=int(r.conversation_seq),
                       message_id=compose_message_id(time_ms=int(r.created_at_ms), node_id=1, counter=int(r.row)))
            for r in rows.itertuples()]


def _mix(messages: pd.DataFrame, tenant: str, n: int, rng: np.random.Generator) -> pd.DataFrame:
    """A mailbox backlog of about ``n`` entries: spread over the tenant's conversations in
    proportion to their activity, the latest messages of each."""
    mine = messages[messages.tenant_id == tenant]
    sizes = mine.groupby("conversation_id").size()
    counts = np.minimum(rng.multinomial(min(n, len(mine)), (sizes / sizes.sum()).to_numpy()), sizes.to_numpy())
    picked = [mine[mine.conversation_id == conv].nlargest(int(k), "conversation_seq")
              for conv, k in zip(sizes.index, counts) if k > 0]
    return pd.concat(picked, ignore_index=True)


def run(lab: Lab, params: Params, *, constants: Any) -> Result:
    width = constants.message_seq_bucket_width
    rng = np.random.default_rng([params.seed, 9])
    wl = generate(params.profile, size=params.dataset_messages, seed=params.seed, bucket_width=width)
    messages = wl.messages
    tenant = messages.tenant_id.value_counts().index[0]
    base = messages[messages.tenant_id == tenant]
    group_conv = str(uuid.uuid4())
    group = single_partition_rows(base, rows=2 * params.group_backlog, first_seq=1, conversation_id=group_conv,
                                  bucket_width=width)
    dms = []
    for i in range(params.dm_count):
        dm = single_partition_rows(base.iloc[i * params.dm_backlog:], rows=params.dm_backlog + 3, first_seq=1,
                                   conversation_id=str(uuid.uuid4()), bucket_width=width)
        dm["row"] += (i + 1) * 100_000
        dms.append(dm)
    dm_rows = pd.concat(dms, ignore_index=True)
    for extra in (group, dm_rows):
        extra["tenant_id"] = tenant
    group["row"] += 50_000_000

    shapes: dict[str, pd.DataFrame] = {
        f"s1_group_{params.group_backlog}": group.nlargest(params.group_backlog, "conversation_seq"),
        f"s1_dm_{params.dm_count}x{params.dm_backlog}": dm_rows.sort_values("conversation_seq", ascending=False)
        .groupby("conversation_id").head(params.dm_backlog),
        f"group_{params.group_backlog}_sparse": group.iloc[::2].head(params.group_backlog),
    }
    for n in params.mix_sizes:
        shapes[f"mix_{n}"] = _mix(messages, tenant, n, rng)

    runs: list[dict[str, Any]] = []
    with scratch_store(lab, scratch_name("grouped"), constants=constants, keep=params.keep_keyspace) as store:
        loader = RecordLoader(store, dedup=False)
        loader.load(messages, seed=params.seed, show_progress=params.show_progress, desc="workload")
        loader.load(pd.concat([group, dm_rows], ignore_index=True), seed=params.seed,
                    show_progress=params.show_progress, desc="S-1 shapes")
        lab.admin.flush(store.keyspace)
        conn = store.connection
        point = store.prepare_raw(f"SELECT {', '.join(MESSAGE_RECORD_COLUMNS)} FROM {{ks}}.message_record WHERE "
                                  "tenant_id = ? AND conversation_id = ? AND seq_bucket = ? AND conversation_seq = ?",
                                  key_columns=("tenant_id", "conversation_id", "seq_bucket", "conversation_seq"))
        point_summary = store.prepare_raw(
            "SELECT conversation_seq, counts FROM {ks}.message_reaction_summary WHERE tenant_id = ? AND "
            "conversation_id = ? AND seq_bucket = ? AND conversation_seq = ?",
            key_columns=("tenant_id", "conversation_id", "seq_bucket", "conversation_seq"))
        tenant_id = uuid.UUID(str(tenant))

        def grouped(entries: list[Any]) -> int:
            store.body_cache.clear()
            return len(store.batch_read(tenant_id, entries).messages)

        def naive(entries: list[Any]) -> int:
            items = []
            for e in entries:
                key = (tenant_id, e.conversation_id, e.conversation_seq // width, e.conversation_seq)
                items += [(point, key), (point_summary, key)]
            results = conn.execute_concurrent(items, concurrency=NAIVE_CONCURRENCY)
            return sum(1 for r in results[0::2] for row in r if store.decode_record(row))

        total = params.repeats * len(shapes) * 2
        bar = iter(progress(range(total), total=total, desc="batch reads", enabled=params.show_progress))
        for name, rows in shapes.items():
            entries = _entries(rows)
            for method, fn in (("grouped", grouped), ("naive", naive)):
                fn(entries[:10])  # warm-up: statements prepared
                for rep in range(params.repeats):
                    before = conn.counter.snapshot()
                    found, ms = timed_ms(lambda: fn(entries))
                    after = conn.counter.snapshot()

                    def delta(table: str, kind: str | None = None) -> int:
                        a, b = after.get(table, {}), before.get(table, {})
                        kinds = [kind] if kind else set(a) | set(b)
                        return sum(a.get(k, 0) - b.get(k, 0) for k in kinds)

                    record_reads = sum(delta("message_record", k) for k in ("point_read", "range_read", "in_read"))
                    runs.append({"shape": name, "method": method, "repeat": rep, "entries": len(entries),
                                 "found": found, "latency_ms": ms, "record_reads": record_reads,
                                 "point_reads": delta("message_record", "point_read"),
                                 "index_reads": delta("message_index"),
                                 "requests": sum(delta(t) for t in set(after) | set(before)),
                                 "groups": rows.groupby(["conversation_id", "seq_bucket"]).ngroups})
                    next(bar, None)
    df = pd.DataFrame(runs)
    summary_rows = []
    for (shape, method), g in df.groupby(["shape", "method"], sort=False):
        lat = latency_summary(g.latency_ms)
        first = g.iloc[0]
        summary_rows.append({"shape": shape, "method": method, "entries": int(first.entries),
                             "groups": int(first.groups), "found": int(g.found.min()),
                             "record_reads": int(first.record_reads), "point_reads": int(first.point_reads),
                             "index_reads": int(first.index_reads), "requests": int(first.requests), **lat,
                             "reads_per_entry": first.record_reads / first.entries,
                             "us_per_entry": lat["p50_ms"] * 1000 / first.entries})
    return Result(params=params, in_list_limit=constants.batch_read_in_list_limit, runs=df,
                  summary=pd.DataFrame(summary_rows))


def conclusion(result: Result) -> str:
    s = result.summary.set_index(["shape", "method"])
    p = result.params
    lines = []
    for shape, limit in ((f"s1_group_{p.group_backlog}", 2), (f"s1_dm_{p.dm_count}x{p.dm_backlog}", p.dm_count + 1)):
        g, n = s.loc[(shape, "grouped")], s.loc[(shape, "naive")]
        ok = g.record_reads <= limit and g.point_reads == 0 and g.index_reads == 0
        lines.append(f"**{shape}** ({int(g.entries)} entries): grouped {int(g.record_reads)} message_record reads "
                     f"({g.reads_per_entry:.3f} per entry, {'within' if ok else 'OVER'} S-1's <= {limit}, "
                     f"{int(g.point_reads)} point reads, {int(g.index_reads)} message_index reads), p50 "
                     f"{g.p50_ms:.1f} ms; naive {int(n.record_reads)} point reads, p50 {n.p50_ms:.1f} ms "
                     f"({n.p50_ms / g.p50_ms:.1f}x slower).")
    sparse = f"group_{p.group_backlog}_sparse"
    if (sparse, "grouped") in s.index:
        g = s.loc[(sparse, "grouped")]
        lines.append(f"Without a contiguous range ({sparse}) the group costs {int(g.record_reads)} reads: IN lists "
                     f"split at {result.in_list_limit} elements.")
    for shape in [x for x in s.index.get_level_values(0).unique() if str(x).startswith("mix_")]:
        g, n = s.loc[(shape, "grouped")], s.loc[(shape, "naive")]
        lines.append(f"Mailbox mix {shape} ({int(g.entries)} entries over {int(g.groups)} partitions): grouped "
                     f"{int(g.record_reads)} reads ({g.us_per_entry:.0f} µs/entry) vs naive {int(n.record_reads)} "
                     f"({n.us_per_entry:.0f} µs/entry).")
    return "\n\n".join(lines)
