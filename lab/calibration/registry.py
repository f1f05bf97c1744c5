"""Every notebook of the suite, one entry each: its experiment module, what it measures, its quick
preset, its expected seconds, what it reads from earlier notebooks of the run, and the appendix-B
constants it measures. Adding a notebook: its experiment, its ``.ipynb`` and one entry here.

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Rule = Literal["interval", "notebook", "report"]


@dataclass(frozen=True, kw_only=True)
class Measure:
    """Which values.json keys of a notebook measure one appendix-B constant, and by which rule."""

    constant: str
    measured: str | None              # key in values.json (None: observed, not measured)
    rule: Rule
    notebook: str = ""                 # set from the notebook's entry
    ci: tuple[str, str] | None = None  # keys of the 95 % interval
    recommended: str | None = None     # key of the notebook's own recommendation (rule "notebook")
    figure: str | None = None          # stem of the PNG behind it (default: the notebook's first figure)
    what: str = ""                     # how the notebook measured it, for the evidence line
    observe: tuple[str, ...] = ()      # further value keys quoted in the evidence ({current} = the value now)
    precision: str | None = None       # key of the notebook's Precision record
    halves: str | None = None          # key of the notebook's Halves record (recommendation per half)
    rec_ci: tuple[str, str] | None = None  # keys of the recommendation's own (bootstrap) interval
    stability: str | None = None       # key of the choice's Stability record (lab.calibration.stability)


@dataclass(frozen=True, kw_only=True)
class RunInput:
    """A parameter a notebook fills from an earlier notebook's values.json in the same run."""

    source: str                       # the notebook whose values.json it is
    unless: tuple[str, ...] = ()      # parameters that make it unnecessary when the caller gives them


@dataclass(frozen=True, kw_only=True)
class NotebookSpec:
    name: str                         # notebooks/<name>.ipynb, results/<run>/<name>/
    what: str                         # one line: what it measures
    quick: Mapping[str, Any] = field(default_factory=dict)  # the quick preset's parameters (full: the notebook's own)
    quick_seconds: float              # measured: one whole `lab calibrate --quick` (presets)
    full_seconds: float               # the time budget plus fixed parts (a sum of budgets, not a timed run)
    run_inputs: Mapping[str, RunInput] = field(default_factory=dict)
    measures: tuple[Measure, ...] = ()

    @property
    def module(self) -> str:
        """The experiment module behind it (``run`` and ``Params``)."""
        return f"lab.calibration.experiments.{self.name}"


# the notebooks whose constants are latency trade-offs: `lab calibrate --target-rtt` sets their target_rtt_us
TARGET_RTT_NOTEBOOKS = ("in_limit", "empty_buckets", "grouped_reads")

SUITE: tuple[NotebookSpec, ...] = (
    NotebookSpec(
        name="b_row", what="bytes per row on disk per table, with/without compression",
        quick={"rows": 2000, "min_repeats": 3, "max_repeats": 8, "target_rel_half_width": 0.1,
               "budget_seconds": 60, "partition_rows": 1024, "compression_repeats": 1, "fit_rows": 500,
               "fit_repeats": 2},
        quick_seconds=96, full_seconds=600 + 420,
        measures=(
            Measure(constant="b_row_bytes", measured="b_row_bytes", rule="interval",
                    ci=("b_row_ci_low_bytes", "b_row_ci_high_bytes"), figure="b_row", precision="b_row_precision",
                    what="live disk bytes / rows after flush + major compaction, message_record, default compression",
                    observe=("repeats", "rows_per_repeat", "profile")),
            Measure(constant="message_seq_bucket_width", measured=None, rule="report", figure="b_row",
                    what="guarded: fixed for existing tables; full-partition size at this width reported",
                    observe=("partition_bytes_at_width", "design_partition_bytes")),
        )),
    NotebookSpec(
        name="in_limit", what="IN-list latency 1..several hundred, server limit, recommendation",
        quick={"partition_rows": 600, "in_sizes": [1, 2, 5, 10, 20, 50, 100, 200, 300, 500], "min_rounds": 10,
               "max_rounds": 40, "target_rel_half_width": 0.3, "budget_seconds": 30, "rtts_us": []},
        quick_seconds=20, full_seconds=300 + 30,
        measures=(
            Measure(constant="batch_read_in_list_limit", measured="recommended_in_limit",
                    rule="notebook", recommended="recommended_in_limit", figure="in_limit",
                    precision="in_limit_precision", halves="in_limit_halves", stability="in_limit_stability",
                    rec_ci=("recommended_in_limit_ci_low", "recommended_in_limit_ci_high"),
                    what="smallest IN size within 10% of the lowest per-row latency, inside the p99 budget and the server limit",
                    observe=("recommended_p99_ms", "recommended_per_row_us", "lowest_per_row_in_size", "in{current}_p99_ms",
                             "server_in_limit", "p99_budget_ms", "rounds", "target_rtt_us",
                             "recommended_in_limit_at_measured_rtt", "in_limit_rtt_model", "in_limit_rtt_held_out")),
        )),
    NotebookSpec(
        name="empty_buckets", what="history pages over runs of empty buckets vs the scan limit",
        quick={"runs": [0, 1, 2, 4, 8, 9, 12, 24, 30], "scan_limits": [8, 16], "min_rounds": 3, "max_rounds": 10,
               "target_rel_half_width": 0.3, "budget_seconds": 20, "hole_messages": 20000,
               "max_hole_messages": 100000, "hole_budget_seconds": 5, "rtts_us": []},
        quick_seconds=28, full_seconds=240 + 30 + 30,
        measures=(
            Measure(constant="history_max_empty_bucket_scan", measured="recommended_scan_limit",
                    rule="notebook", recommended="recommended_scan_limit", figure="empty_buckets",
                    precision="empty_buckets_precision", halves="scan_limit_halves",
                    stability="scan_limit_stability",
                    what="smallest limit leaving the workload's seq holes scannable, at the measured cost per empty bucket",
                    observe=("per_empty_bucket_ms", "per_empty_bucket_ms_ci_low", "per_empty_bucket_ms_ci_high",
                             "worst_case_page_ms_at_recommended",
                             "workload_truncated_share_at_recommended", "workload_truncated_share_at_design",
                             "target_rtt_us", "worst_case_page_ms_at_target_rtt", "empty_buckets_rtt_model",
                             "empty_buckets_rtt_held_out")),
        )),
    NotebookSpec(
        name="twcs_sstables", what="SSTable counts over simulated weeks for two windows per table",
        quick={"record_days": 9, "dedup_hours": 8, "rows_per_interval": 5, "short_ttl_seconds": 10},
        quick_seconds=29, full_seconds=240,
        measures=(
            Measure(constant="message_record_twcs_window_days", measured=None, rule="report",
                    figure="twcs_sstables", what="SSTable counts over simulated days; the window is a policy, not measured",
                    observe=("message_record_w{current}d_sstables", "message_record_w{current}d_predicted_sstables",
                             "message_record_w{current}d_steady_state_windows", "all_match_prediction")),
            Measure(constant="client_dedup_twcs_window_hours", measured=None, rule="report",
                    figure="twcs_sstables", what="SSTable counts over simulated hours; the window is a policy, not measured",
                    observe=("client_dedup_w{current}h_sstables", "client_dedup_w{current}h_predicted_sstables",
                             "client_dedup_w{current}h_steady_state_windows")),
        )),
    NotebookSpec(
        name="space_amp", what="bytes on disk against live bytes over a simulated period: lsm_space_amp",
        quick={"rows_per_day": 30, "seconds_per_day": 1.5, "replicates": 2, "max_batches": 1,
               "target_rel_half_width": 0.25, "budget_seconds": 120, "scenarios": ["profile"]},
        quick_seconds=105, full_seconds=900,
        measures=(
            Measure(constant="lsm_space_amp", measured="lsm_space_amp", rule="interval",
                    ci=("lsm_space_amp_ci_low", "lsm_space_amp_ci_high"), figure="space_amp",
                    precision="lsm_space_amp_precision", halves="lsm_space_amp_halves",
                    what="message_record's bytes on disk (each node's files) / live bytes (a major-compacted twin), mean "
                         "over the steady interval of a simulated period (TTLs and gc_grace in compressed time), the "
                         "profile's retention mix; halves of the steady interval must agree (stationary)",
                    observe=("lsm_space_amp_peak", "lsm_space_amp_peak_ci_high", "expiring_only_message_record_space_amp_steady",
                             "never_expiring_share", "steady_start_day", "days", "replicates", "profile")),
        )),
    NotebookSpec(
        name="grouped_reads", what="grouped vs naive batch reads (S-1 shapes and mixes)",
        quick={"dataset_messages": 1000, "mix_sizes": [50, 200], "repeats": 3, "density_trace_repeats": 1,
               "max_trace_repeats": 1},
        quick_seconds=70, full_seconds=300 + 120,  # + the trace rounds the budget allows past the 6 always run
        measures=(
            Measure(constant="batch_read_range_min_density", measured="recommended_range_min_density",
                    rule="notebook", recommended="recommended_range_min_density", figure="grouped_reads",
                    halves="range_density_halves", stability="range_density_stability",
                    rec_ci=("recommended_range_min_density_ci_low", "recommended_range_min_density_ci_high"),
                    what="density of a group's seqs in their span where one range read costs the server (trace time) "
                         "as much as the IN lists it replaces, over a fully written partition",
                    observe=("density_entries", "density100_range_server_us", "density100_in_server_us",
                             "density50_range_server_us", "density50_in_server_us", "target_rtt_us",
                             "recommended_range_min_density_at_measured_rtt", "range_density_rtt_text")),
        )),
    NotebookSpec(
        name="cpu_cost", what="server and load-generator CPU per operation at fixed rates",
        quick={"window_seconds": 3.0, "idle_seconds": 1.5, "min_rounds": 2, "max_rounds": 2,
               "target_rel_half_width": 0.5, "budget_seconds": 45, "history_conversations": 5, "history_rows": 200},
        quick_seconds=83, full_seconds=720 + 90,
        measures=()),
    NotebookSpec(
        name="cpu_curve", what="node CPU per send of the capacity model's mix at several send rates: the CPU curve",
        quick={"sends_per_second": [10.0, 40.0, 120.0], "rounds": 2, "window_seconds": 4.0, "idle_seconds": 2.0,
               "history_conversations": 5, "history_rows": 200, "group_backlog": 100},
        quick_seconds=60, full_seconds=6 * 6 * 12 + 60),
    NotebookSpec(
        name="knee", what="the node's knee: the highest sends/s of the capacity model's mix within a p99 target",
        quick={"max_steps": 2, "min_calls": 100, "step_seconds": 3.0, "warmup_seconds": 2.0, "seed_size": "tiny",
               "held_out_share": 0.0, "unseen_profile": "", "searches": 1},
        quick_seconds=30, full_seconds=3 * 9 * (36 + 5 + 5) + 6 * (60 + 5 + 5) + 60,
        run_inputs={"cpu_values": RunInput(source="cpu_cost")}),
    NotebookSpec(
        name="capacity", what="§7 capacity with the measured b_row, production sizing, CPU vs disk",
        quick={},
        quick_seconds=15, full_seconds=10,
        run_inputs={"b_row_values": RunInput(source="b_row", unless=("b_row_bytes",)),
                    "cpu_values": RunInput(source="cpu_cost"),
                    "cpu_curve_values": RunInput(source="cpu_curve"),
                    "knee_values": RunInput(source="knee"),
                    "space_amp_values": RunInput(source="space_amp", unless=("lsm_space_amp",))},
        measures=()),
    NotebookSpec(
        name="model_check", what="the capacity model's predictions against a run it did not see",
        quick={"sends": 500, "cpu_rounds": 2, "cpu_window_seconds": 4.0, "cpu_idle_seconds": 2.0,
               "diagnose_rounds": 0, "sstable_days": 9, "sstable_rows_per_day": 10},
        quick_seconds=62, full_seconds=480,
        run_inputs={"b_row_values": RunInput(source="b_row", unless=("calibration_run",)),
                    "cpu_values": RunInput(source="cpu_cost", unless=("calibration_run",)),
                    "space_amp_values": RunInput(source="space_amp", unless=("calibration_run",)),
                    "cpu_curve_values": RunInput(source="cpu_curve", unless=("calibration_run",))},
        measures=()),
)

BY_NAME: dict[str, NotebookSpec] = {s.name: s for s in SUITE}
NOTEBOOKS: tuple[str, ...] = tuple(BY_NAME)
MEASURES: tuple[Measure, ...] = tuple(dataclasses.replace(m, notebook=s.name) for s in SUITE for m in s.measures)
