"""b_row: bytes on disk per message row, per table, with and without compression (design §7, §9).

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from lab.calibration.capacity_model.row_model import (
    DESIGN_MIXES,
    REGRESSORS,
    RowModel,
    composition,
    fit_row_model,
    mix_profile,
)
from lab.calibration.experiments.common import RecordLoader, Testbed, scratch_name, scratch_store, single_partition_rows
from lab.calibration.precision import Precision, sample_until
from lab.cluster.tracing import traced
from lab.errors import LabError
from lab.measure import a_over_b, mean_ci, relative_half_width, sample_std
from lab.results.jsonio import flatten
from lab.workload import generate

TABLES = ("message_record", "message_index", "client_dedup")
# compression settings by name ("lz4" is both servers' default); the options are the dialect's
COMPRESSIONS = ("lz4", "zstd", "none")


@dataclass(frozen=True, kw_only=True)
class Params:
    profile: str = "chat_mix"
    rows: int = 10_000                 # rows per repeat
    min_repeats: int = 3
    max_repeats: int = 40
    target_rel_half_width: float = 0.02
    budget_seconds: float = 600.0      # for the repeats of ``profile`` (the fit's mixes come after)
    seed: int = 0
    compressions: tuple[str, ...] = ("lz4", "none")
    compression_repeats: int = 2       # repeats that also measure compressions[1:]
    partition_rows: int = 4096
    fit_mixes: tuple[str, ...] = ("text_only", "media_heavy") + tuple(DESIGN_MIXES)
    fit_rows: int = 4000
    fit_repeats: int = 3
    held_out: str | None = "chat_mix"  # a profile checked against the fit, not fitted (None: fit everything)
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
    precision: Precision
    mixes: pd.DataFrame           # one row per repeat of every mix measured (composition, b_row)
    row_model: RowModel | None    # None when the mixes cannot be fitted (too few, or dependent)
    keyspace: str | None = None   # kept on the server (keep_keyspaces): the last repeat, last compression
    shards_per_node: dict[str, int] | None = None  # node -> shards (Scylla; 1 on Cassandra)
    row_model_error: str | None = None
    final_compression: str | None = None  # what the kept keyspace's tables were left in

    def b_row(self, table: str = "message_record", compression: str | None = None) -> pd.Series:
        compression = compression or self.params.compressions[0]
        return self.summary.set_index(["table", "compression"]).loc[(table, compression)]

    @property
    def repeats(self) -> int:
        return int(self.per_repeat.repeat.nunique()) if len(self.per_repeat) else 0

    def by_mix(self) -> pd.DataFrame:
        """Per mix: repeats, mean b_row and its interval, composition (means over repeats)."""
        rows = []
        for mix, g in self.mixes.groupby("mix", sort=False):
            mean, low, high = mean_ci(g.b_row_bytes)
            rows.append({"mix": mix, "profile": bool(g.is_profile.iloc[0]), "fitted": bool(g.fitted.iloc[0]),
                         "repeats": len(g), "rows": int(g.rows.sum()), "b_row_mean_bytes": mean,
                         "b_row_ci_low_bytes": max(low, 0.0), "b_row_ci_high_bytes": high,
                         **{c: float(g[c].mean()) for c in REGRESSORS}})
        return pd.DataFrame(rows)

    def mix_values(self) -> dict[str, Any]:
        out: dict[str, Any] = {"b_row_by_mix": {}}
        for r in self.by_mix().itertuples():
            out["b_row_by_mix"][r.mix] = {"profile": r.profile, "fitted": r.fitted, "repeats": r.repeats,
                                          "rows": r.rows, "b_row_bytes": r.b_row_mean_bytes,
                                          "ci_low_bytes": r.b_row_ci_low_bytes, "ci_high_bytes": r.b_row_ci_high_bytes,
                                          **{c: getattr(r, c) for c in REGRESSORS}}
            out[f"b_row_mix_{r.mix}_bytes"] = r.b_row_mean_bytes
        if self.row_model is not None:
            out["row_model"] = self.row_model.to_json()
            fit = self.row_model.fit
            for i, name in enumerate(fit.names):
                out[f"row_model_{name}"] = fit.coefficients[i]
                out[f"row_model_{name}_ci_low"] = fit.ci_low[i]
                out[f"row_model_{name}_ci_high"] = fit.ci_high[i]
            if self.row_model.held_out is not None:
                h = self.row_model.held_out
                out["row_model_held_out"] = h.profile
                out["row_model_held_out_relative_error"] = h.relative_error
                out["row_model_held_out_agrees"] = h.agrees
        out["row_model_error"] = self.row_model_error
        return out

    def values(self) -> dict[str, Any]:
        out: dict[str, Any] = {"design_b_row_bytes": self.design_b_row_bytes, "rows_per_repeat": self.params.rows,
                               "repeats": self.repeats, "profile": self.params.profile,
                               "compressions": list(self.params.compressions), "keyspace": self.keyspace,
                               "final_compression": self.final_compression or self.params.compressions[-1]}
        out |= flatten(self.summary, "b_row_{table}_{compression}_{value}",
                       {"bytes": "b_row_mean_bytes", "ci_low_bytes": "b_row_ci_low_bytes",
                        "ci_high_bytes": "b_row_ci_high_bytes"})
        main = self.b_row()
        out["b_row_bytes"] = float(main.b_row_mean_bytes)
        out["b_row_ci_low_bytes"] = float(main.b_row_ci_low_bytes)
        out["b_row_ci_high_bytes"] = float(main.b_row_ci_high_bytes)
        out["b_row_vs_design_ratio"] = a_over_b(main.b_row_mean_bytes, self.design_b_row_bytes)
        out["b_row_precision"] = self.precision.to_json()
        out["rows_measured"] = int(self.repeats * self.params.rows)
        out.update(self.mix_values())
        last = self.per_repeat[self.per_repeat.repeat == self.per_repeat.repeat.max()]
        # the last repeat, still on disk when keep_keyspaces is set
        out |= flatten(last, "last_{table}_{compression}_{value}", {"live_disk_bytes": int, "rows": int})
        out |= flatten(self.partition, "partition_{compression}_{value}",
                       {"bytes_at_width": float, "histogram_max_bytes": ("histogram_max_partition_bytes", int)})
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


def _truncate(testbed: Testbed, keyspace: str) -> None:
    for table in TABLES:
        testbed.connection.execute(f"TRUNCATE {keyspace}.{table}")


def _measure(testbed: Testbed, keyspace: str, tables: tuple[str, ...], *, flush: bool) -> dict[str, Any]:
    if flush:
        testbed.admin.flush(keyspace)
    out = {}
    for table in tables:
        testbed.admin.compact(keyspace, table)
        stats = testbed.admin.table_stats(keyspace, table)
        files = testbed.admin.data_files(keyspace, table)
        node = stats.per_node[0] if stats.per_node else {}
        out[table] = {"live_disk_bytes": stats.live_disk_bytes, "sstable_count": stats.sstable_count,
                      "replicas": stats.replicas, "live_disk_bytes_per_replica": stats.live_disk_bytes_per_replica,
                      "data_file_bytes": sum(f.stat().st_size for f in files) if files else None,
                      "compression_ratio": node.get("compression_ratio"),
                      "max_partition_bytes": node.get("max_partition_bytes"),
                      "mean_partition_bytes": node.get("mean_partition_bytes")}
    return out


def _trace_partition(testbed: Testbed, keyspace: str, part: pd.DataFrame) -> tuple[int, int]:
    """(live rows, tombstone cells) a traced read of the whole partition reports: a write path
    that binds None for absent columns writes one tombstone cell per null column and row."""

    stmt = testbed.connection.prepare(testbed.connection.dialect.sstable_read(
        f"SELECT * FROM {keyspace}.message_record WHERE tenant_id = ? AND conversation_id = ? AND seq_bucket = ?"))
    first = part.iloc[0]
    rows, summary = traced(testbed.connection, stmt, (uuid.UUID(str(first.tenant_id)),
                                                  uuid.UUID(str(first.conversation_id)), int(first.seq_bucket)))
    return len(rows), summary.tombstones_read


def _set_compression(testbed: Testbed, keyspace: str, comp: str, tables: tuple[str, ...], current: dict[str, str]) -> None:
    """ALTER the tables whose compression (tracked in ``current``) differs from ``comp``."""
    clause = testbed.connection.dialect.compression_clause(comp)
    changed = [t for t in tables if current.get(t) != comp]
    for table in changed:
        testbed.connection.execute(f"ALTER TABLE {keyspace}.{table} WITH {clause}")
        current[table] = comp
    if changed:
        testbed.connection.wait_schema_agreement()


def _repeat_rows(repeat: int, seed: int, messages: pd.DataFrame, measured: dict[str, dict[str, Any]]) -> list[dict]:
    return [{"repeat": repeat, "seed": seed, "compression": comp, "table": table, "rows": len(messages), **m,
             "b_row_bytes": m["live_disk_bytes_per_replica"] / len(messages),
             "b_row_data_file_bytes": (m["data_file_bytes"] / m["replicas"] / len(messages))
             if m["data_file_bytes"] is not None else np.nan}
            for comp, per_table in measured.items() for table, m in per_table.items()]


def _summary(per_repeat: pd.DataFrame, design_b_row: float) -> pd.DataFrame:
    rows = []
    for (table, comp), g in per_repeat.groupby(["table", "compression"], sort=False):
        mean, low, high = mean_ci(g["b_row_bytes"])
        low = max(low, 0.0)  # a t-interval over two repeats can reach below zero; bytes cannot
        rows.append({"table": table, "compression": comp, "repeats": len(g), "b_row_mean_bytes": mean,
                     "b_row_ci_low_bytes": low, "b_row_ci_high_bytes": high,
                     "b_row_std_bytes": sample_std(g["b_row_bytes"]),
                     "compression_ratio": float(g["compression_ratio"].mean()),
                     "design_b_row_bytes": design_b_row if table == "message_record" else np.nan})
    return pd.DataFrame(rows)


class _Keyspace:
    """One scratch keyspace that loads a table of rows and measures it under each compression
    setting (truncating what the previous load left)."""

    def __init__(self, testbed: Testbed, store: Any, params: Params) -> None:
        self.testbed, self.store, self.params = testbed, store, params
        self.ks = store.keyspace
        self.loaded = False
        self.current: dict[str, str] = {}
        self.final_compression: str | None = None

    def load_and_measure(self, messages: pd.DataFrame, seed: int, desc: str, tables: tuple[str, ...], *,
                         dedup: bool = True, compressions: tuple[str, ...] | None = None) -> dict[str, dict[str, Any]]:
        compressions = compressions or self.params.compressions
        first = compressions[0]
        if self.loaded:
            _truncate(self.testbed, self.ks)
        _set_compression(self.testbed, self.ks, first, TABLES, self.current)
        # ids as the store mints them: b_row prices sent rows, whose ids do not compress
        RecordLoader(self.store, dedup=dedup, minted_ids=True).load(messages, seed=seed,
                                                                    show_progress=self.params.show_progress, desc=desc)
        self.loaded = True
        measured = {first: _measure(self.testbed, self.ks, tables, flush=True)}
        for comp in compressions[1:]:
            _set_compression(self.testbed, self.ks, comp, tables, self.current)
            measured[comp] = _measure(self.testbed, self.ks, tables, flush=False)
        self.final_compression = compressions[-1]
        return measured


def run(testbed: Testbed, params: Params, *, constants: Any) -> Result:
    """The main profile in one keyspace (each load measured under the first compression
    setting, then re-compressed in place, ALTER + major compaction, for the others: every
    setting measures the very same rows, each written once; the last repeat stays there with
    ``keep_keyspaces``), then the fit's mixes in a second keyspace."""
    width = constants.message_seq_bucket_width
    rows_out: list[dict[str, Any]] = []
    partition_out: list[dict[str, Any]] = []
    mixes_out: list[dict[str, Any]] = []
    first = params.compressions[0]

    def mix_row(mix: str, repeat: int, messages: pd.DataFrame, b_row: float, *, is_profile: bool) -> None:
        mixes_out.append({"mix": mix, "repeat": repeat, "is_profile": is_profile,
                          "fitted": mix != params.held_out, "b_row_bytes": b_row, **composition(messages)})

    ks = scratch_name("brow")
    with scratch_store(testbed, ks, constants=constants, keep=params.keep_keyspaces) as store:
        space = _Keyspace(testbed, store, params)
        if params.partition_rows > 0:
            base = generate(params.profile, size=min(params.partition_rows, max(params.rows, 100)),
                            seed=params.seed, bucket_width=width).messages
            part = single_partition_rows(base, rows=params.partition_rows, first_seq=width,
                                         conversation_id=str(uuid.uuid4()), bucket_width=width)
            measured = space.load_and_measure(part, params.seed, f"partition {params.partition_rows} rows",
                                              ("message_record",), dedup=False)
            rows_read, tombstones = _trace_partition(testbed, ks, part)
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

        def repeat(i: int) -> None:  # one more repeat of the main profile
            seed = params.seed + i
            messages = generate(params.profile, size=params.rows, seed=seed, bucket_width=width).messages
            comps = params.compressions if i < params.compression_repeats else params.compressions[:1]
            measured = space.load_and_measure(messages, seed, f"repeat {i + 1}", TABLES, compressions=comps)
            rows_out.extend(_repeat_rows(i, seed, messages, measured))
            mix_row(params.profile, i, messages, measured[first]["message_record"]["live_disk_bytes_per_replica"]
                    / len(messages), is_profile=True)

        def achieved() -> float | None:
            b = [r["b_row_bytes"] for r in rows_out if r["table"] == "message_record" and r["compression"] == first]
            return relative_half_width(*mean_ci(b))

        precision = sample_until(repeat, achieved, quantity="b_row_bytes", target=params.target_rel_half_width,
                                 budget_seconds=params.budget_seconds, min_steps=params.min_repeats,
                                 max_steps=params.max_repeats, step_unit="repeat")
        final_compression = space.final_compression
    others = [m for m in dict.fromkeys(params.fit_mixes + ((params.held_out,) if params.held_out else ()))
              if m != params.profile]
    if others and params.fit_repeats > 0:
        with scratch_store(testbed, scratch_name("brmix"), constants=constants) as store:
            space = _Keyspace(testbed, store, params)
            for mix in others:  # the fit's mixes: message_record only, first compression
                profile = mix_profile(mix)
                for r in range(params.fit_repeats):
                    seed = params.seed + 1000 + r
                    messages = generate(profile, size=params.fit_rows, seed=seed, bucket_width=width).messages
                    measured = space.load_and_measure(messages, seed, f"{mix} {r + 1}/{params.fit_repeats}",
                                                      ("message_record",), compressions=(first,))
                    mix_row(mix, r, messages, measured[first]["message_record"]["live_disk_bytes_per_replica"]
                            / len(messages), is_profile=mix not in DESIGN_MIXES)

    per_repeat = pd.DataFrame(rows_out)
    mixes = pd.DataFrame(mixes_out)
    model, error = None, None
    try:
        model = fit_row_model(mixes, held_out=params.held_out)
    except (ValueError, LabError) as exc:  # one mix, or mixes that cannot separate the regressors
        error = str(exc)
    return Result(params=params, design_b_row_bytes=constants.b_row_bytes, bucket_width=width,
                  per_repeat=per_repeat, summary=_summary(per_repeat, constants.b_row_bytes),
                  partition=pd.DataFrame(partition_out), precision=precision, mixes=mixes, row_model=model,
                  row_model_error=error, final_compression=final_compression,
                  keyspace=ks if params.keep_keyspaces else None, shards_per_node=testbed.admin.shards_per_node())


def conclusion(result: Result) -> str:
    v = result.values()
    main = result.params.compressions[0]
    prec = result.precision
    lines = [f"**b_row (message_record, {main})**: {v['b_row_bytes']:,.0f} B per row "
             f"(95% CI {v['b_row_ci_low_bytes']:,.0f}-{v['b_row_ci_high_bytes']:,.0f} B over {result.repeats} "
             f"repeats of {result.params.rows:,} `{result.params.profile}` rows), "
             f"{v['b_row_vs_design_ratio']:.2f}x the design's {result.design_b_row_bytes:,.0f} B. "
             f"Precision {prec.describe()}."]
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
    lines += mix_lines(result)
    return " ".join(lines[:2]) + "\n\n" + "\n\n".join(lines[2:])


def mix_lines(result: Result) -> list[str]:
    """The per-mix b_row and the fitted row model, as conclusion paragraphs."""
    mixes = result.by_mix()
    if mixes.empty:
        return []
    def interval(r: Any) -> str:
        if not (math.isfinite(r.b_row_ci_low_bytes) and math.isfinite(r.b_row_ci_high_bytes)):
            return f"no interval: {r.repeats} repeat{'' if r.repeats == 1 else 's'}"
        return f"{r.b_row_ci_low_bytes:,.0f}-{r.b_row_ci_high_bytes:,.0f}"

    parts = ", ".join(f"`{r.mix}` {r.b_row_mean_bytes:,.0f} B ({interval(r)}"
                      f"{'' if r.fitted else ', held out'})" for r in mixes.itertuples())
    out = [f"**b_row by mix** (message_record, 95% CI): {parts}."]
    if result.row_model is None:
        return out + [f"No row model: {result.row_model_error}."]
    fit = result.row_model.fit
    terms = [f"{fit.coefficient('overhead'):,.0f} B"] + [
        f"{fit.coefficients[i]:.3f} ({fit.ci_low[i]:.3f}-{fit.ci_high[i]:.3f}) x {name.replace('_bytes', '')} bytes"
        for i, name in enumerate(fit.names) if name != "overhead"]
    lo, hi = fit.ci_low[0], fit.ci_high[0]
    out.append(f"**Bytes per row for any mix** (least squares over {fit.observations} repeats of "
               f"{len(result.row_model.mixes)} mixes): b_row = {' + '.join(terms)} (overhead 95% CI {lo:,.0f}-{hi:,.0f} B, "
               f"residual sd {fit.residual_sd:,.1f} B).")
    h = result.row_model.held_out
    if h is not None:
        out.append(f"**Held-out check** (`{h.profile}`, not fitted): predicted {h.predicted_bytes:,.0f} B "
                   f"({h.predicted_ci_low:,.0f}-{h.predicted_ci_high:,.0f}) vs measured {h.measured_bytes:,.0f} B "
                   + (f"({h.measured_ci_low:,.0f}-{h.measured_ci_high:,.0f})" if h.measured_ci_low == h.measured_ci_low
                      else "(too few repeats for an interval)")
                   + f": {100 * h.relative_error:+.1f}%, "
                   f"{'within' if h.agrees else 'OUTSIDE'} the combined intervals.")
    return out
