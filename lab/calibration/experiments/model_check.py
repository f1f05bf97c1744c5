"""The capacity model checked on a run it did not see (design §7).

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import dataclasses
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lab.results.run_files import read_run_json
from lab.calibration.capacity_model.prediction_check import TARGETS, Check, conclusion, disk_checks, missed_under
from lab.calibration.capacity_model.predictions import (
    Inputs,
    check_profile,
    cpu_diagnosis,
    inputs_from_run,
    inputs_from_values,
    predict_cpu,
    predict_cpu_on_curve,
    predict_disk,
    predict_sstables,
    row_composition,
)
from lab.calibration.experiments import cpu_cost
from lab.calibration.experiments.common import Testbed, progress, scratch_name, scratch_store
from lab.calibration.experiments.mixed_load import run_mixed_load
from lab.cluster.admin.disk import settled_disk_bytes
from lab.errors import ValidationError
from lab.measure import bootstrap_rounds, interval_of
from lab.store import seq_bucket, table_specs, u128_to_blob
from lab.workload import generate, to_message, to_send_request

__all__ = ["Params", "Result", "conclusion", "diagnosis_params", "run"]   # conclusion: prediction_check's, the notebook's name for it

DEFAULT_CPU_RATES = {"send": 15.0, "history_latest": 25.0, "history_older": 5.0, "batch_s1_dm": 2.0,
                     "batch_s1_group": 0.5, "react": 6.0}
DEFAULT_SENDS = 2000
SSTABLE_QUIET_SECONDS = 2.0
PREDICTED_SSTABLE_TABLES = ("message_record", "client_dedup")
LCS_TABLES = ("message_index", "conversation_head")
PARTITION_KEYS = {"message_record": ("tenant_id", "conversation_id", "seq_bucket"),
                  "message_index": ("tenant_id", "message_id"),
                  "client_dedup": ("tenant_id", "sender_id", "client_message_id"),
                  "conversation_head": ("tenant_id", "conversation_id")}


@dataclass(frozen=True, kw_only=True)
class Params:
    calibration_run: str | None = None   # results/<run-id> whose notebooks' values predict
    b_row_values: str | None = None      # or each notebook's values.json (the runner passes this run's)
    cpu_values: str | None = None
    space_amp_values: str | None = None
    cpu_curve_values: str | None = None  # the CPU curve: the CPU part priced at the load it puts on a node
    check_mix: str = "check_mix"
    sends: int | None = None             # None: the b_row run's rows per repeat (each SSTable's fixed
                                         # components then weigh the same per row in both), else 2000
    send_workers: int = 16
    cpu_rates: dict[str, float] | None = None
    cpu_workers: int | None = None       # the mixed load's threads; None: ceil(2 x rate x the warmup's p99), 8-64
    cpu_window_seconds: float = 10.0
    cpu_idle_seconds: float = 4.0
    cpu_rounds: int = 5
    cpu_dataset: dict[str, int] | None = None   # cpu_cost.Params fields of the read dataset (group_backlog, ...)
    diagnose_rounds: int = 2
    sstable_days: int = 16
    sstable_rows_per_day: int = 30
    parts: tuple[str, ...] = ("disk", "cpu", "sstables")
    seed: int = 7
    keep_keyspaces: bool = False
    show_progress: bool = True

    def rates(self) -> dict[str, float]:
        return dict(self.cpu_rates or DEFAULT_CPU_RATES)


@dataclass(frozen=True, kw_only=True)
class Result:
    params: Params
    inputs: Inputs
    checks: tuple[Check, ...]
    nodes: int
    replication_factor: int
    server: str
    disk: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)       # node x table: predicted, measured
    cpu_rounds: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)  # round x node: predicted, measured
    cpu_diagnosis: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    sstables: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)   # node x table
    load: dict[str, Any] = dataclasses.field(default_factory=dict)              # requested / achieved, errors
    skipped: dict[str, str] = dataclasses.field(default_factory=dict)           # part -> why

    @property
    def sends(self) -> int:
        return sends_of(self.params, self.inputs)

    def table(self) -> pd.DataFrame:
        return pd.DataFrame([c.row() for c in self.checks])

    def headline(self, quantity: str) -> Check | None:
        """The cluster-wide check of a quantity (disk and CPU), or the worst node (SSTables)."""
        mine = [c for c in self.checks if c.quantity == quantity and c.predicted is not None]
        if quantity == "sstables":
            off = [c for c in mine if not c.met]
            return (off or mine or [None])[0]
        return next((c for c in mine if c.scope == "cluster" and c.table is None), None)

    def values(self) -> dict[str, Any]:
        out: dict[str, Any] = {"nodes": self.nodes, "replication_factor": self.replication_factor,
                               "server": self.server, "check_mix": self.params.check_mix,
                               "sends": self.sends,
                               "inputs": self.inputs.to_json(), "inputs_source": self.inputs.source,
                               "targets": dict(TARGETS), "load": self.load, "skipped": self.skipped,
                               "single_node": self.nodes == 1}
        for quantity in ("disk", "cpu", "sstables"):
            c = self.headline(quantity)
            if c is None:
                out[f"model_check_{quantity}_error"] = None
                out[f"model_check_{quantity}_met"] = None
                continue
            low, high = c.error_interval
            out[f"model_check_{quantity}_predicted"] = c.predicted
            out[f"model_check_{quantity}_measured"] = c.measured
            out[f"model_check_{quantity}_error"] = c.error
            out[f"model_check_{quantity}_error_ci_low"] = low
            out[f"model_check_{quantity}_error_ci_high"] = high
            # the headline's verdict; the checks under it that missed are listed, never folded into it
            out[f"model_check_{quantity}_met"] = c.met
            out[f"model_check_{quantity}_missed"] = [{"scope": x.scope, "table": x.table, "error": x.error,
                                                      "per_row_error_bytes": x.per_row_error}
                                                     for x in missed_under(self.checks, quantity)]
        out |= self.light_rates()
        out["checks"] = [c.row() for c in self.checks]
        return out

    def light_rates(self) -> dict[str, Any]:
        """The CPU part priced at cpu_cost's rates too, beside the curve's: what the curve changed."""
        cpu, t = self.headline("cpu"), self.cpu_rounds
        out = {"model_check_cpu_priced_on": "the CPU curve" if self.inputs.cpu_curve is not None else "cpu_cost's rates",
               "model_check_cpu_light_rates_predicted": None, "model_check_cpu_light_rates_error": None}
        if cpu is None or t.empty or "predicted_light_rates" not in t or t.predicted_light_rates.isna().any():
            return out
        light = float(t.groupby("round").predicted_light_rates.first().sum())
        return out | {"model_check_cpu_light_rates_predicted": light,
                      "model_check_cpu_light_rates_error": light / cpu.measured - 1 if cpu.measured else None}


def resolve_inputs(p: Params) -> Inputs:
    """The calibration run's constants: ``calibration_run``'s notebooks, else the values files."""
    if p.calibration_run is not None:
        return inputs_from_run(p.calibration_run)

    def read(path: str | None) -> dict[str, Any] | None:
        return read_run_json(path) if path and Path(path).is_file() else None

    source = next((str(Path(x).parent.parent.name) for x in (p.b_row_values, p.cpu_values, p.space_amp_values) if x),
                  "none")
    return inputs_from_values(b_row=read(p.b_row_values), cpu_cost=read(p.cpu_values),
                              space_amp=read(p.space_amp_values), cpu_curve=read(p.cpu_curve_values), source=source)


def sends_of(p: Params, inputs: Inputs) -> int:
    return int(p.sends or inputs.rows_per_repeat or DEFAULT_SENDS)


def _nodes_of(testbed: Testbed, stmts: dict[str, Any], table: str, key: tuple) -> tuple[str, ...]:
    return tuple(sorted({node for node, _shard in testbed.connection.placement(stmts[table], key)}))


def _disk_part(testbed: Testbed, p: Params, constants: Any, inputs: Inputs) -> tuple[list[Check], pd.DataFrame]:
    """N sends of the check mix through the full write path, flushed; bytes per node and table."""

    width = constants.message_seq_bucket_width
    messages = generate(check_profile(p.check_mix), size=sends_of(p, inputs), seed=p.seed, bucket_width=width).messages
    with scratch_store(testbed, scratch_name("mcdisk"), constants=constants, keep=p.keep_keyspaces) as store:
        requests = [to_send_request(row, seed=p.seed) for row in messages.to_dict("records")]
        with ThreadPoolExecutor(max_workers=p.send_workers) as pool:
            acks = list(progress(pool.map(store.send, requests), total=len(requests), desc="sends",
                                 enabled=p.show_progress))
        store.drain(60)
        stmts = {t: store.prepare_raw(f"SELECT {keys[0]} FROM {{ks}}.{t} WHERE "
                                      + " AND ".join(f"{k} = ?" for k in keys), key_columns=keys)
                 for t, keys in PARTITION_KEYS.items()}
        rows = row_composition(messages)
        placed: dict[str, list] = {t: [] for t in PARTITION_KEYS}
        for req, ack in zip(requests, acks):
            keys = {"message_record": (req.tenant_id, req.conversation_id, seq_bucket(ack.conversation_seq, width)),
                    "message_index": (req.tenant_id, u128_to_blob(ack.message_id)),
                    "client_dedup": (req.tenant_id, req.sender_id, req.client_message_id),
                    "conversation_head": (req.tenant_id, req.conversation_id)}
            for t, key in keys.items():
                placed[t].append(_nodes_of(testbed, stmts, t, key))
        for t, nodes in placed.items():
            rows[f"{t}_nodes"] = nodes
        rows["conversation"] = [f"{r.tenant_id}/{r.conversation_id}" for r in requests]
        testbed.admin.flush(store.keyspace)
        testbed.admin.wait_for_compactions(timeout=120, keyspace=store.keyspace)
        for t in PARTITION_KEYS:  # one SSTable per table and node, as b_row measures (module docstring)
            testbed.admin.compact(store.keyspace, t)
        reads = settled_disk_bytes(testbed.admin, [(store.keyspace, t) for t in PARTITION_KEYS])
        measured = {(node, t): b for (_ks, t), read in reads.items() for node, b in read.per_node.items()}
    predicted = predict_disk(inputs, rows)
    checks = disk_checks(predicted, measured)
    table = pd.DataFrame([c.row() for c in checks if c.table is not None])
    return checks, table


def _cpu_part(testbed: Testbed, p: Params, constants: Any, inputs: Inputs
              ) -> tuple[list[Check], pd.DataFrame, pd.DataFrame, dict[str, Any], int]:
    """The mixed load's CPU per node against the prediction from the operations it completed."""

    load = run_mixed_load(testbed, constants=constants, rates=p.rates(), rounds=p.cpu_rounds,
                          window_seconds=p.cpu_window_seconds, idle_seconds=p.cpu_idle_seconds, seed=p.seed,
                          keep=p.keep_keyspaces, show_progress=p.show_progress, dataset=p.cpu_dataset,
                          workers=p.cpu_workers)
    bound = set(load.loader_bound_rounds())
    rounds = load.rounds()
    nodes = sorted(rounds.node.unique())
    rounds = rounds[~rounds["round"].isin(bound)]  # a loader-bound window's load was not what it claims
    if rounds.empty:
        return [], load.rounds(), pd.DataFrame(), load.load(), load.copies
    predicted_rows, per_op = [], Counter()
    for rnd, counts in enumerate(load.counts):
        if rnd in bound:
            continue
        wall = float(rounds[rounds["round"] == rnd].wall_seconds.iloc[0])
        light = predict_cpu(inputs, counts, wall, replication_factor=load.copies)
        per_op.update(light["per_op"])
        pred = light
        if inputs.cpu_curve is not None:  # the same work priced at the load it puts on each node
            pred = predict_cpu_on_curve(light, wall, curve=inputs.cpu_curve, curve_mix=inputs.cpu_curve_mix or {},
                                        costs=inputs.cpu_costs["cpu_ms_per_op"], nodes=len(nodes))
        predicted_rows.append({"round": rnd, "wall_seconds": wall, "predicted": pred["seconds"],
                               "predicted_low": pred["low"], "predicted_high": pred["high"],
                               "predicted_light_rates": light["seconds"],
                               "curve_sends_per_second_per_node": pred.get("sends_per_second_per_node"),
                               "curve_where": pred.get("where"), **{f"ops_{op}": n for op, n in counts.items()}})
    pred = pd.DataFrame(predicted_rows)
    table = rounds.merge(pred[["round", "predicted", "predicted_low", "predicted_high", "predicted_light_rates"]],
                         on="round")
    share = 1 / len(nodes)  # the prediction is the cluster's; every node its even share
    checks = []
    for scope in nodes + ["cluster"]:
        mine = table if scope == "cluster" else table[table.node == scope]
        per_round = mine.groupby("round").agg(net=("net_cpu_seconds", "sum")).reset_index().merge(pred, on="round")
        k = 1.0 if scope == "cluster" else share
        net, wall = per_round.net.to_numpy(), per_round.wall_seconds.to_numpy()
        low, high = interval_of(bootstrap_rounds(len(net), lambda idx: net[idx].sum() * wall.sum() / wall[idx].sum()))
        checks.append(Check(quantity="cpu", scope=scope, table=None, predicted=float(per_round.predicted.sum()) * k,
                            predicted_low=_scaled_sum(per_round.predicted_low, k),
                            predicted_high=_scaled_sum(per_round.predicted_high, k),
                            measured=float(net.sum()), measured_low=low, measured_high=high, unit="CPU s",
                            note=f"{len(net)} mixed windows of {p.cpu_window_seconds:g} s, net of the idle rate"
                            + (f" ({len(bound)} loader-bound window(s) left out)" if bound else "")
                            + ("; priced on the CPU curve" if inputs.cpu_curve is not None
                               else "; priced at cpu_cost's rates")))
    diagnosis = pd.DataFrame()
    cluster = checks[-1]
    if cluster.met is False and p.diagnose_rounds > 0:
        diagnosis = _diagnose(testbed, p, constants, dict(per_op), load.load()["ops_by_kind"], load.workers)
    return checks, table, diagnosis, load.load(), load.copies


def _scaled_sum(values: pd.Series, k: float) -> float | None:
    return None if values.isna().any() else float(values.sum()) * k


def diagnosis_params(p: Params, workers: int) -> Any:
    """The cpu_cost parameters of the diagnosis: each operation of the check's mix alone, at the
    rate the mixed load offered it (its rate in ``p.rates()``: the mix interleaves them at these
    shares), on the mixed load's dataset (``p.cpu_dataset``: a group read of 60 entries is not one
    of 500), with its threads and windows. cpu_cost's defaults (send 60/s, pages 100/s, ...: 4-12x
    the check's, and its own dataset) would measure other operations than the ones that missed."""

    rates = {op: float(r) for op, r in p.rates().items() if r > 0}
    return cpu_cost.Params(operations=tuple(rates), rates=rates, min_rounds=p.diagnose_rounds,
                           max_rounds=p.diagnose_rounds, window_seconds=p.cpu_window_seconds,
                           idle_seconds=p.cpu_idle_seconds, seed=p.seed + 1, workers=workers,
                           show_progress=p.show_progress, **(p.cpu_dataset or {}))


def _diagnose(testbed: Testbed, p: Params, constants: Any, predicted_per_op: dict[str, float],
              counts: dict[str, int], workers: int) -> pd.DataFrame:
    """Each operation's cost measured here in single-operation windows (the cpu_cost
    experiment on this cluster, at the check's own rates and dataset: :func:`diagnosis_params`),
    set against what the calibration's cost predicted for it."""

    here = cpu_cost.run(testbed, diagnosis_params(p, workers), constants=constants)
    local = {r.op: float(r.server_ms_per_op) for r in here.summary.itertuples()}
    return cpu_diagnosis(predicted_per_op, counts, local)


def _table_of(stmt: Any) -> str:
    """The table an upsert writes (``INSERT INTO ks.table (...`` or ``UPDATE ks.table USING ...``)."""
    head = stmt.cql.split("INTO", 1)[1] if stmt.cql.lstrip().upper().startswith("INSERT") else stmt.cql.split(None, 2)[1]
    return head.split("(", 1)[0].strip().split()[0].split(".")[-1]


def _sstable_part(testbed: Testbed, p: Params, constants: Any) -> tuple[list[Check], pd.DataFrame]:
    """Simulated days of the check mix, a flush per day: SSTables per node against the window arithmetic."""

    day_s = 86_400
    windows = {"message_record": constants.message_record_twcs_window_days * day_s,
               "client_dedup": constants.client_dedup_twcs_window_hours * 3_600}
    n = p.sstable_rows_per_day
    messages = generate(check_profile(p.check_mix), size=n * p.sstable_days, seed=p.seed + 1,
                        bucket_width=constants.message_seq_bucket_width).messages.sort_values("created_at_ms")
    flushes: dict[str, list[dict[tuple[str, int], int]]] = {t: [] for t in windows}
    span = max(windows.values())
    start = (int(time.time()) - (p.sstable_days + 2) * day_s) // span * span - span

    written = [(table_specs(constants)[t], ()) for t in PREDICTED_SSTABLE_TABLES + LCS_TABLES]  # no reaction tables
    with scratch_store(testbed, scratch_name("mcsst"), constants=constants, keep=p.keep_keyspaces,
                       tables=written) as store:
        for day in progress(range(p.sstable_days), total=p.sstable_days, desc="simulated days",
                            enabled=p.show_progress):
            part = messages.iloc[day * n:(day + 1) * n]
            stamps = (start + day * day_s) * 1_000_000 + np.sort(
                np.random.default_rng([p.seed, day]).integers(0, day_s * 1_000_000, len(part)))
            items: list[tuple[Any, tuple]] = []
            newest: dict[str, dict[tuple[str, int], int]] = {t: {} for t in windows}
            for row, ts in zip(part.to_dict("records"), stamps):
                statements = store.seeding.statements(to_message(row, seed=p.seed), ttl_seconds=0,
                                                      timestamp_us=int(ts), dedup=True)
                for stmt, values in statements:
                    table = _table_of(stmt)
                    if table in windows:
                        window = int(ts) // 1_000_000 // windows[table]
                        for group in testbed.connection.placement(stmt, values):
                            newest[table][group] = max(newest[table].get(group, window), window)
                items += statements
            testbed.connection.execute_concurrent(items, concurrency=64)
            testbed.admin.flush(store.keyspace)
            testbed.admin.wait_for_compactions(timeout=60, keyspace=store.keyspace)
            for table in windows:
                flushes[table].append(newest[table])
        # settled: no compaction running and the files unchanged for a moment (one scheduled just
        # after the last flush would otherwise be missed), then the adapter's counts
        settled_disk_bytes(testbed.admin, [(store.keyspace, t) for t in PREDICTED_SSTABLE_TABLES + LCS_TABLES],
                           quiet=SSTABLE_QUIET_SECONDS)
        measured = {t: {str(x["node"]): int(x["sstable_count"]) for x in testbed.admin.table_stats(store.keyspace, t).per_node}
                    for t in PREDICTED_SSTABLE_TABLES + LCS_TABLES}
    checks, rows = [], []
    for table in PREDICTED_SSTABLE_TABLES + LCS_TABLES:
        predicted = predict_sstables(flushes[table]) if table in windows else {}
        for node, count in sorted(measured[table].items()):
            c = Check(quantity="sstables", scope=node, table=table, predicted=predicted.get(node),
                      measured=float(count), unit="SSTables",
                      note=f"{len(flushes.get(table, []))} flushes, {windows[table] // 3600} h TWCS windows"
                      if table in windows else "LCS: no window arithmetic, recorded only")
            rows.append(c.row())
            if table in windows:
                checks.append(c)
    return checks, pd.DataFrame(rows)


PARTS = ("disk", "cpu", "sstables")


def run(testbed: Testbed, params: Params, *, constants: Any) -> Result:
    unknown = sorted(set(params.parts) - set(PARTS))
    if unknown:
        raise ValidationError(f"unknown parts {', '.join(unknown)}; known: {', '.join(PARTS)}", parts=unknown)
    inputs = resolve_inputs(params)
    if params.check_mix in inputs.fitted_mixes:
        raise ValidationError(f"check_mix {params.check_mix!r} was measured by the b_row run {inputs.source}: the "
                              "check needs a mix the row model never saw", check_mix=params.check_mix)
    checks: list[Check] = []
    skipped: dict[str, str] = {}
    out: dict[str, Any] = {"copies": []}
    if "disk" in params.parts:
        if inputs.row_model is None:
            skipped["disk"] = "no row model (run the b_row notebook, or give b_row_values / calibration_run)"
        else:
            disk_checks_, out["disk"] = _disk_part(testbed, params, constants, inputs)
            checks += disk_checks_
    if "cpu" in params.parts:
        unmeasured = sorted(op for op, r in params.rates().items() if r > 0 and op not in
                            ((inputs.cpu_costs or {}).get("cpu_ms_per_op") or {}))
        if inputs.cpu_costs is None:
            skipped["cpu"] = "no CPU costs (run the cpu_cost notebook, or give cpu_values / calibration_run)"
        elif unmeasured:
            skipped["cpu"] = (f"the calibration run measured no CPU cost for {', '.join(unmeasured)} (cpu_cost: every "
                              "window loader-bound, or not run): nothing to predict the mix from")
        else:
            cpu, out["cpu_rounds"], out["cpu_diagnosis"], out["load"], copies = _cpu_part(testbed, params, constants,
                                                                                         inputs)
            checks += cpu
            if not cpu:
                skipped["cpu"] = ("every mixed window was loader-bound (this process over its CPU limit or the rate "
                                  "not offered): no window carried the stated load")
            out["copies"].append(copies)
    if "sstables" in params.parts:
        sst, out["sstables"] = _sstable_part(testbed, params, constants)
        checks += sst
    hosts = testbed.connection.hosts()
    rf = max(out["copies"], default=0) or min(testbed.config.replication_factor, len(hosts))
    return Result(params=params, inputs=inputs, checks=tuple(checks), nodes=len(hosts), replication_factor=rf,
                  server=testbed.connection.server_kind(), disk=out.get("disk", pd.DataFrame()),
                  cpu_rounds=out.get("cpu_rounds", pd.DataFrame()), cpu_diagnosis=out.get("cpu_diagnosis", pd.DataFrame()),
                  sstables=out.get("sstables", pd.DataFrame()), load=out.get("load", {}), skipped=skipped)
