"""b_row: bytes on disk per message row, per table, with and without compression (design §7, §9).

Method. For each repeat (a fresh dataset: same profile, seed + repeat) the rows are written to
message_record / message_index / client_dedup exactly as the store encodes them
(``RecordLoader``), the keyspace is flushed and each table major-compacted to one SSTable, and
the admin adapter's live disk bytes of one replica (every SSTable component: Data, Index,
Filter, Statistics, ...; summed over the nodes, divided by the copies each row has among them)
are divided by the rows written: b_row is per replica on any cluster, and the capacity formula
multiplies by RF once. Then each further compression setting is
applied in place (``ALTER TABLE ... WITH compression``, and a major compaction rewrites the
SSTable with it) and measured again: same rows, each written once. Between repeats the tables
are truncated. The design's 600 B is compared with the mean and its Student-t interval.

Partition size: ``partition_rows`` rows (4096 in a full run) written into one seq_bucket
partition, flushed and compacted: bytes per row of that partition times 4096, next to the
design's 4096 x 600 B ~= 2.4 MB and the server's own partition-size histogram.

On ScyllaDB every shard (and tablet) flushes and compacts its own SSTables: "compacted to one
SSTable" is one SSTable per shard holding rows (``sstable_count`` up to nodes x shards), the one
partition lives on one shard of each replica, and compression options are spelled by the
connection's dialect (``sstable_compression``). The traced partition read says ``BYPASS CACHE``
there, so it reads the SSTable, not the row cache a flush fills.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from lab.workload import generate
from lab.calibration.experiments.common import Lab, RecordLoader, scratch_name, scratch_store, single_partition_rows
from lab.measure import a_over_b, mean_ci

TABLES = ("message_record", "message_index", "client_dedup")
# compression settings by name ("lz4" is both servers' default); the options are the dialect's
COMPRESSIONS = ("lz4", "zstd", "none")


@dataclass(frozen=True, kw_only=True)
class Params:
    profile: str = "chat_mix"
    rows: int = 2000
    repeats: int = 2
    seed: int = 0
    compressions: tuple[str, ...] = ("lz4", "none")
    partition_rows: int = 4096
    keep_keyspaces: bool = False
    show_progress: bool = True


@dataclass(frozen=True, kw_only=True)
class Result:
    params: Params
    design_b_row_bytes: float
    bucket_width: int
    per_repeat: pd.DataFrame      # repeat x compression x table
    summary: pd.DataFrame         # compression x table: mean, CI
    partition: pd.DataFrame       # compression: partition measurements
    keyspace: str | None = None   # kept on the server (keep_keyspaces): the last repeat, last compression
    shards_per_node: dict[str, int] | None = None  # node -> shards (Scylla; 1 on Cassandra)

    def b_row(self, table: str = "message_record", compression: str | None = None) -> pd.Series:
        compression = compression or self.params.compressions[0]
        return self.summary.set_index(["table", "compression"]).loc[(table, compression)]

    def values(self) -> dict[str, Any]:
        out: dict[str, Any] = {"design_b_row_bytes": self.design_b_row_bytes, "rows_per_repeat": self.params.rows,
                               "repeats": self.params.repeats, "profile": self.params.profile,
                               "compressions": list(self.params.compressions), "keyspace": self.keyspace,
                               "final_compression": self.params.compressions[-1]}
        for r in self.summary.itertuples():
            key = f"{r.table}_{r.compression}"
            out[f"b_row_{key}_bytes"] = r.b_row_mean_bytes
            out[f"b_row_{key}_ci_low_bytes"] = r.b_row_ci_low_bytes
            out[f"b_row_{key}_ci_high_bytes"] = r.b_row_ci_high_bytes
        main = self.b_row()
        out["b_row_bytes"] = float(main.b_row_mean_bytes)
        out["b_row_ci_low_bytes"] = float(main.b_row_ci_low_bytes)
        out["b_row_ci_high_bytes"] = float(main.b_row_ci_high_bytes)
        out["b_row_vs_design_ratio"] = a_over_b(main.b_row_mean_bytes, self.design_b_row_bytes)
        last = self.per_repeat[self.per_repeat.repeat == self.per_repeat.repeat.max()]
        for r in last.itertuples():  # the last repeat, still on disk when keep_keyspaces is set
            out[f"last_{r.table}_{r.compression}_live_disk_bytes"] = int(r.live_disk_bytes)
            out[f"last_{r.table}_{r.compression}_rows"] = int(r.rows)
        for r in self.partition.itertuples():
            out[f"partition_{r.compression}_bytes_at_width"] = float(r.bytes_at_width)
            out[f"partition_{r.compression}_histogram_max_bytes"] = int(r.histogram_max_partition_bytes)
        out["partition_bytes_at_width"] = float(self.partition.iloc[0].bytes_at_width) if len(self.partition) else None
        if len(self.partition):
            out["tombstone_cells_per_row"] = float(self.partition.iloc[0].tombstone_cells_per_row)
        out["design_partition_bytes"] = self.bucket_width * self.design_b_row_bytes
        if self.shards_per_node:
            out["nodes"] = len(self.shards_per_node)
            out["shards_per_node"] = max(self.shards_per_node.values())
        if len(self.per_repeat):
            out["replicas_per_row"] = float(self.per_repeat.replicas.iloc[-1])
        return out


def _truncate(lab: Lab, keyspace: str) -> None:
    for table in TABLES:
        lab.connection.execute(f"TRUNCATE {keyspace}.{table}")


def _measure(lab: Lab, keyspace: str, tables: tuple[str, ...], *, flush: bool) -> dict[str, Any]:
    if flush:
        lab.admin.flush(keyspace)
    out = {}
    for table in tables:
        lab.admin.compact(keyspace, table)
        stats = lab.admin.table_stats(keyspace, table)
        files = lab.admin.data_files(keyspace, table)
        node = stats.per_node[0] if stats.per_node else {}
        out[table] = {"live_disk_bytes": stats.live_disk_bytes, "sstable_count": stats.sstable_count,
                      "replicas": stats.replicas, "live_disk_bytes_per_replica": stats.live_disk_bytes_per_replica,
                      "data_file_bytes": sum(f.stat().st_size for f in files) if files else None,
                      "compression_ratio": node.get("compression_ratio"),
                      "max_partition_bytes": node.get("max_partition_bytes"),
                      "mean_partition_bytes": node.get("mean_partition_bytes")}
    return out


def _trace_partition(lab: Lab, keyspace: str, part: pd.DataFrame) -> tuple[int, int]:
    """(live rows, tombstone cells) a traced read of the whole partition reports: a write path
    that binds None for absent columns writes one tombstone cell per null column and row."""
    from lab.cluster.tracing import traced

    stmt = lab.connection.prepare(lab.connection.dialect.sstable_read(
        f"SELECT * FROM {keyspace}.message_record WHERE tenant_id = ? AND conversation_id = ? AND seq_bucket = ?"))
    first = part.iloc[0]
    rows, summary = traced(lab.connection, stmt, (uuid.UUID(str(first.tenant_id)),
                                                  uuid.UUID(str(first.conversation_id)), int(first.seq_bucket)))
    return len(rows), summary.tombstones_read


def _set_compression(lab: Lab, keyspace: str, comp: str, tables: tuple[str, ...], current: dict[str, str]) -> None:
    """ALTER the tables whose compression (tracked in ``current``) differs from ``comp``."""
    clause = lab.connection.dialect.compression_clause(comp)
    changed = [t for t in tables if current.get(t) != comp]
    for table in changed:
        lab.connection.execute(f"ALTER TABLE {keyspace}.{table} WITH {clause}")
        current[table] = comp
    if changed:
        lab.connection.wait_schema_agreement()


def run(lab: Lab, params: Params, *, constants: Any) -> Result:
    """One keyspace: each load is measured under the first compression setting, then the
    table is re-compressed in place (ALTER + major compaction rewrites the SSTable) for the
    others, so every setting measures the very same rows and each row is written once."""
    width = constants.message_seq_bucket_width
    rows_out: list[dict[str, Any]] = []
    partition_out: list[dict[str, Any]] = []
    ks = scratch_name("brow")
    first = params.compressions[0]
    with scratch_store(lab, ks, constants=constants, keep=params.keep_keyspaces) as store:
        loaded: list[bool] = []
        current: dict[str, str] = {}

        def load_and_measure(messages: pd.DataFrame, seed: int, desc: str, tables: tuple[str, ...],
                             dedup: bool = True) -> dict[str, dict[str, Any]]:
            if loaded:
                _truncate(lab, ks)
            _set_compression(lab, ks, first, TABLES, current)
            RecordLoader(store, dedup=dedup).load(messages, seed=seed, show_progress=params.show_progress, desc=desc)
            loaded.append(True)
            measured = {first: _measure(lab, ks, tables, flush=True)}
            for comp in params.compressions[1:]:
                _set_compression(lab, ks, comp, tables, current)
                measured[comp] = _measure(lab, ks, tables, flush=False)
            return measured

        if params.partition_rows > 0:
            base = generate(params.profile, size=min(params.partition_rows, max(params.rows, 100)),
                            seed=params.seed, bucket_width=width).messages
            part = single_partition_rows(base, rows=params.partition_rows, first_seq=width,
                                         conversation_id=str(uuid.uuid4()), bucket_width=width)
            measured = load_and_measure(part, params.seed, f"partition {params.partition_rows} rows",
                                        ("message_record",), dedup=False)
            rows_read, tombstones = _trace_partition(lab, ks, part)
            for comp, m in measured.items():
                rec = m["message_record"]
                per_row = rec["live_disk_bytes_per_replica"] / params.partition_rows
                partition_out.append({
                    "compression": comp, "rows": params.partition_rows, "live_disk_bytes": rec["live_disk_bytes"],
                    "bytes_per_row": per_row, "bytes_at_width": per_row * width,
                    "histogram_max_partition_bytes": rec["max_partition_bytes"] or 0,
                    "design_bytes_at_width": width * constants.b_row_bytes, "rows_read": rows_read,
                    "tombstone_cells_read": tombstones,
                    "tombstone_cells_per_row": tombstones / rows_read if rows_read else float("nan")})

        for repeat in range(params.repeats):  # the last repeat's rows stay on disk (cross-checks)
            seed = params.seed + repeat
            messages = generate(params.profile, size=params.rows, seed=seed, bucket_width=width).messages
            measured = load_and_measure(messages, seed, f"repeat {repeat + 1}/{params.repeats}", TABLES)
            for comp, per_table in measured.items():
                for table, m in per_table.items():
                    rows_out.append({"repeat": repeat, "seed": seed, "compression": comp, "table": table,
                                     "rows": len(messages), **m,
                                     "b_row_bytes": m["live_disk_bytes_per_replica"] / len(messages),
                                     "b_row_data_file_bytes": (m["data_file_bytes"] / m["replicas"] / len(messages))
                                     if m["data_file_bytes"] is not None else np.nan})

    per_repeat = pd.DataFrame(rows_out)
    summary_rows = []
    for (table, comp), g in per_repeat.groupby(["table", "compression"], sort=False):
        mean, low, high = mean_ci(g["b_row_bytes"])
        low = max(low, 0.0)  # a t-interval over two repeats can reach below zero; bytes cannot
        summary_rows.append({"table": table, "compression": comp, "repeats": len(g), "b_row_mean_bytes": mean,
                             "b_row_ci_low_bytes": low, "b_row_ci_high_bytes": high,
                             "b_row_std_bytes": float(g["b_row_bytes"].std(ddof=1)) if len(g) > 1 else 0.0,
                             "compression_ratio": float(g["compression_ratio"].mean()),
                             "design_b_row_bytes": constants.b_row_bytes if table == "message_record" else np.nan})
    return Result(params=params, design_b_row_bytes=constants.b_row_bytes, bucket_width=width,
                  per_repeat=per_repeat, summary=pd.DataFrame(summary_rows), partition=pd.DataFrame(partition_out),
                  keyspace=ks if params.keep_keyspaces else None, shards_per_node=lab.admin.shards_per_node())


def conclusion(result: Result) -> str:
    v = result.values()
    main = result.params.compressions[0]
    lines = [f"**b_row (message_record, {main})**: {v['b_row_bytes']:.0f} B per row "
             f"(95% CI {v['b_row_ci_low_bytes']:.0f}-{v['b_row_ci_high_bytes']:.0f} B over {result.params.repeats} "
             f"repeats of {result.params.rows} `{result.params.profile}` rows), "
             f"{v['b_row_vs_design_ratio']:.2f}x the design's {result.design_b_row_bytes:.0f} B."]
    inside = v["b_row_ci_low_bytes"] <= result.design_b_row_bytes <= v["b_row_ci_high_bytes"]
    lines.append("The design's 600 B lies inside the interval." if inside else
                 f"The design's {result.design_b_row_bytes:.0f} B lies {'below' if v['b_row_ci_low_bytes'] > result.design_b_row_bytes else 'above'} "
                 f"the interval: use the measured value in §7.")
    for comp in result.params.compressions[1:]:
        other = v.get(f"b_row_message_record_{comp}_bytes")
        if other:
            lines.append(f"With compression `{comp}`: {other:.0f} B per row "
                         f"({v['b_row_bytes'] / other:.2f}x of it with `{main}`; payloads are AES-GCM sealed and "
                         "thumbnails are JPEG-like, so little compresses).")
    idx = v.get(f"b_row_message_index_{main}_bytes")
    dedup = v.get(f"b_row_client_dedup_{main}_bytes")
    if idx is not None and dedup is not None:
        lines.append(f"message_index: {idx:.0f} B per row (the design says about 60 B); "
                     f"client_dedup: {dedup:.0f} B per row while its 2-hour TTL holds.")
    if v.get("tombstone_cells_per_row") == 0:
        lines.append("A traced read of the whole partition met 0 tombstone cells (absent columns are not written as "
                     "nulls; S-6).")
    elif v.get("tombstone_cells_per_row"):
        lines.append(f"**Tombstones**: a traced read of the partition met {v['tombstone_cells_per_row']:.1f} tombstone "
                     "cells per row: the write path binds null for absent columns (each null is a cell tombstone, "
                     "part of b_row and read on every scan, against S-6). Binding UNSET instead removes them.")
    if v.get("partition_bytes_at_width"):
        lines.append(f"One full partition ({result.bucket_width} rows) would take "
                     f"{v['partition_bytes_at_width'] / 1e6:.2f} MB on disk vs the design's "
                     f"{v['design_partition_bytes'] / 1e6:.2f} MB (measured on {result.params.partition_rows} rows).")
    return " ".join(lines[:2]) + "\n\n" + "\n\n".join(lines[2:])
