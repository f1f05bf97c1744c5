"""Each measurement notebook runs headless (papermill) against the real node with small
parameters, and the values it recorded are checked: present, in range, and consistent with what
the admin adapter and the request accounting see. Shared 2-core machine: parameters are tiny."""
from __future__ import annotations

import gc
import json
import time
from pathlib import Path

import pandas as pd
import pytest

from lab.calibration.experiments import common
from lab.calibration.notebooks import run_notebook
from lab.cluster.services import ServicesConfig
from lab.measure import client_gc
from lab.results.scratch import drop_keyspace
from lab.constants import load_constants

pytestmark = pytest.mark.node


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("notebooks")


def test_b_row(run_dir, notebook_artifacts, cluster_config, connection, admin):
    values = run_notebook("b_row", {"rows": 300, "min_repeats": 2, "max_repeats": 3, "target_rel_half_width": 0.5,
                                    "partition_rows": 256, "compression_repeats": 2, "keep_keyspaces": True,
                                    "fit_mixes": ["text_only", "text_long", "files_audio", "photos_small_thumbs"],
                                    "fit_rows": 150, "fit_repeats": 2, "show_progress": False},
                          run_dir, config=cluster_config)
    folder = run_dir / "b_row"
    try:
        notebook_artifacts(folder, "b_row", "b_row")
        assert 150 < values["b_row_bytes"] < 10_000
        if values["b_row_precision"]["steps"] >= 5:
            assert values["b_row_ci_low_bytes"] <= values["b_row_bytes"] <= values["b_row_ci_high_bytes"]
        else:  # 2-3 repeats: too few rounds for an interval (lab.measure.stats.MIN_INTERVAL_ROUNDS)
            assert values["b_row_ci_low_bytes"] is None and values["b_row_precision"]["too_few_rounds"]
        assert values["b_row_message_index_lz4_bytes"] < values["b_row_bytes"]
        assert values["b_row_message_record_none_bytes"] > values["b_row_bytes"]  # same rows, uncompressed
        assert values["design_b_row_bytes"] == 600
        assert values["tombstone_cells_per_row"] == 0  # S-6: no null cells written
        # the reported number is live disk bytes / rows as the admin adapter sees them
        per_repeat = pd.read_csv(folder / "per_repeat.csv")
        rec = per_repeat[(per_repeat.table == "message_record") & (per_repeat.compression == "lz4")]
        assert values["b_row_bytes"] == pytest.approx(rec.b_row_bytes.mean())
        ks, final = values["keyspace"], values["final_compression"]
        stats = admin.table_stats(ks, "message_record")  # the last repeat, in the last compression measured
        assert stats.sstable_count == 1
        assert stats.live_disk_bytes == values[f"last_message_record_{final}_live_disk_bytes"]
        last = per_repeat[(per_repeat.table == "message_record") & (per_repeat.compression == final)].iloc[-1]
        assert last.rows == 300 == values[f"last_message_record_{final}_rows"]
        assert last.b_row_bytes == pytest.approx(stats.live_disk_bytes / 300)
        files = admin.data_files(ks, "message_record")
        if files is not None:
            assert sum(f.stat().st_size for f in files) == last.data_file_bytes
        assert values["partition_bytes_at_width"] > 0 and values["design_partition_bytes"] == 4096 * 600
        # precision stated in advance: the run says whether the target or a limit stopped it
        prec = values["b_row_precision"]
        assert prec["target_rel_half_width"] == 0.5 and prec["status"] in ("reached", "budget", "limit")
        assert prec["steps"] == values["repeats"] == per_repeat.repeat.nunique() >= 2
        rel = prec["achieved_rel_half_width"]
        assert (prec["status"] == "reached") == (rel is not None and rel <= 0.5)
        assert (rel is None) == prec["too_few_rounds"]  # max 3 repeats: too few for an interval
        # b_row for any mix: each mix measured, the fit's four coefficients with intervals, chat_mix held out
        by_mix = values["b_row_by_mix"]
        assert set(by_mix) == {"chat_mix", "text_only", "text_long", "files_audio", "photos_small_thumbs"}
        assert by_mix["chat_mix"]["fitted"] is False and by_mix["text_only"]["thumbnail_bytes"] == 0
        assert by_mix["photos_small_thumbs"]["thumbnail_bytes"] > 500
        assert by_mix["chat_mix"]["b_row_bytes"] == pytest.approx(values["b_row_bytes"])
        model = values["row_model"]
        assert model["fit"]["names"] == ["overhead", "payload_bytes", "media_metadata_bytes", "thumbnail_bytes"]
        assert model["fit"]["observations"] == 8 and model["held_out"]["profile"] == "chat_mix"
        for name in model["fit"]["names"]:
            assert values[f"row_model_{name}_ci_low"] <= values[f"row_model_{name}"] <= values[f"row_model_{name}_ci_high"]
        # sealed payloads and thumbnails do not compress: about one byte on disk per byte carried
        assert 0.8 < values["row_model_thumbnail_bytes"] < 1.3 and 0.8 < values["row_model_payload_bytes"] < 1.3
        assert (folder / "b_row_mixes.png").stat().st_size > 5_000
    finally:
        if values.get("keyspace"):
            drop_keyspace(connection, values["keyspace"])


def test_in_limit(run_dir, notebook_artifacts, cluster_config, kafka_services, redis_services):
    """On the design's real parts: the Kafka outbox and archiver mode's Redis hot
    window reach the notebook's stores (as lab bench store reads them) and its environment block.
    One notebook run checks both (a kernel and a run of its own cost ~30 s of the suite);
    test_calibrate runs in_limit on the default local outbox."""
    services = kafka_services.replace(hot_window="redis")
    values = run_notebook("in_limit", {"partition_rows": 200, "in_sizes": [1, 10, 50, 100, 200], "min_rounds": 5,
                                       "max_rounds": 5, "probe_sizes": [500], "p99_budget_ms": 10_000,
                                       "show_progress": False}, run_dir, config=cluster_config, services=services)
    folder = run_dir / "in_limit"
    notebook_artifacts(folder, "in_limit", "in_limit")
    assert values["services"]["outbox"] == "kafka" and values["services"]["hot_window"] == "redis"
    assert values["services"]["archiver_mode"] is True and "kafka_bootstrap_servers" in values["services"]
    assert values["services"]["client_gc"] == client_gc.DEFAULT_CLIENT_GC  # the kernel's collector, as applied
    assert values["rtt_us"] == cluster_config.rtt_us  # the round trip its latencies crossed
    sweep = values["in_limit_rtt"]  # the full preset's sweep: through the proxy at 2, 3 and 4 ms too
    assert sweep["model"]["rtts_us"] == [2000, 3000, 4000] and sweep["target_rtt_us"] is None
    executed = json.loads((folder / "in_limit.ipynb").read_text())
    injected = next("".join(c["source"]) for c in executed["cells"] if "injected-parameters" in c["metadata"].get("tags", []))
    assert '"outbox": "kafka"' in injected and "password" not in injected
    per_size = pd.read_csv(folder / "per_size.csv")
    assert list(per_size.in_size) == [1, 10, 50, 100, 200]
    # the client's CPU per round is recorded; a loader-bound round (over 70% of its core) is not used
    assert 0 < values["loader_cpu_percent_of_core_max"] and 0 <= values["loader_bound_rounds"] <= 5
    assert per_size.ok.all() and (per_size.n == 5 - values["loader_bound_rounds"]).all()
    samples = pd.read_csv(folder / "samples.csv")
    assert (samples.rows == samples.in_size).all()  # every IN read returned exactly its rows
    for k in (1, 10, 50, 100, 200):
        assert values[f"in{k}_p50_ms"] > 0 and values[f"in{k}_p99_ms"] >= values[f"in{k}_p50_ms"]
        assert values[f"in{k}_per_row_us"] == pytest.approx(per_size.set_index("in_size").loc[k, "mean_ms"] * 1000 / k)
    # a budget nothing misses: the recommendation is the smallest size within per_row_tolerance (10%)
    # of the lowest per-row cost (the knee, not the flat minimum)
    lowest = per_size.per_row_us.min()
    within = per_size[per_size.per_row_us <= lowest * (1 + values["per_row_tolerance"])]
    if values["loader_bound"]:  # most rounds measured the client: no recommendation from them
        assert values["recommended_in_limit"] is None
    else:
        assert values["recommended_in_limit"] == int(within.in_size.min())
    assert values["lowest_per_row_in_size"] == int(per_size.sort_values("per_row_us").iloc[0].in_size)
    # the choice's stability over resamples of the rounds: below 90% it is inconclusive, never proposed
    stab = values["in_limit_stability"]
    assert stab["choice"] == values["recommended_in_limit"] and stab["units"] == values["rounds"] == 5
    if stab["choice"] is not None and stab["share"] is not None:
        assert 0 <= stab["share"] <= 1 and stab["stable"] == (stab["share"] >= 0.9)
        assert f"of resamples choose {stab['choice']} (needs 90%" in stab["text"]
        assert values["recommended_in_limit_bootstrap_share"] == stab["share"]
    assert values["in_limit_inconclusive"] == (not stab["stable"] and stab["choice"] is not None
                                               or not values["in_limit_halves"]["agree"])
    settings = values["server_settings"]
    if settings.get("partition_keys_in_select_fail_threshold") == "-1":  # Cassandra, guardrails off
        assert values["server_in_limit"] is None and values["rejected_sizes"] == []
    assert values["design_in_limit"] == 100


def test_empty_buckets(run_dir, notebook_artifacts, cluster_config):
    values = run_notebook("empty_buckets", {"runs": [0, 2, 9, 12], "scan_limits": [8, 16], "min_rounds": 1,
                                            "max_rounds": 1, "hole_messages": 5000, "max_hole_messages": 20000,
                                            "rtts_us": [], "show_progress": False}, run_dir,  # swept in test_calibrate
                          config=cluster_config)
    folder = run_dir / "empty_buckets"
    notebook_artifacts(folder, "empty_buckets", "empty_buckets")
    summary = pd.read_csv(folder / "summary.csv")
    for r in summary.itertuples():
        assert r.consistent
        if r.run < r.scan_limit:  # the page crosses the hole and fills up from the older bucket
            assert not r.stopped_on_empty and r.has_more and r.messages == 20
            assert r.empty_buckets_scanned == r.run and r.buckets_scanned == r.run + 2
            assert r.alerts == 0
        else:  # it stops after scan_limit empty buckets (S-3: at most that many), has_more=false, an alert
            assert r.stopped_on_empty and not r.has_more and r.messages == 5
            assert r.empty_buckets_scanned == r.scan_limit
            assert r.alerts == 1
    pages = pd.read_csv(folder / "pages.csv")
    assert (pages.message_record_reads == pages.buckets_scanned).all()  # accounting agrees with the page
    assert values["run9_stopped"] is True and values["run2_stopped"] is False
    assert values["recommended_scan_limit"] >= values["workload_required_scan_limit"]
    assert values["recommended_scan_limit"] >= 8 and values["workload_holes"] > 0
    # the choice's stability over resamples of the workload's holes; more hole samples while unstable
    stab = values["scan_limit_stability"]
    assert stab["choice"] == values["recommended_scan_limit"] and stab["unit"] == "hole"
    assert stab["units"] == values["workload_holes"] and stab["stable"] == (stab["share"] >= 0.9)
    assert values["workload_hole_messages"] in (5000, 10000, 15000, 20000)
    assert stab["stable"] or values["workload_hole_messages"] == 20000  # unstable: sampled to the limit
    assert values["scan_limit_inconclusive"] == (not stab["stable"] or not values["scan_limit_halves"]["agree"])


def test_twcs_sstables(run_dir, notebook_artifacts, cluster_config, connection, admin):
    values = run_notebook("twcs_sstables", {"record_days": 8, "dedup_hours": 7, "rows_per_interval": 3,
                                            "short_ttl_seconds": 10, "keep_keyspace": True, "show_progress": False},
                          run_dir, config=cluster_config)
    ks = values["keyspace"]
    try:
        notebook_artifacts(run_dir / "twcs_sstables", "twcs_sstables", "twcs_sstables")
        final = pd.read_csv(run_dir / "twcs_sstables" / "final.csv")
        assert set(final.table) == {"message_record_w1d", "message_record_w7d", "client_dedup_w1h", "client_dedup_w6h"}
        assert values["compactions_settled"]  # every count read with no compaction due (a 300 s deadline each)
        assert values["all_match_prediction"] and values["expiry_matches_prediction"]
        assert values["message_record_w1d_sstables"] == 8 and values["client_dedup_w1h_sstables"] == 7
        assert values["message_record_w1d_sstables_after_expiry"] == 8 - 7 + 1  # 7 daily windows dropped, 1 new
        for table in final.table:  # the counts are the admin adapter's, and match the files on disk
            count = admin.table_stats(ks, table).sstable_count
            assert count == values[f"{table}_sstables_after_expiry"]
            # a dropped SSTable's files are deleted once its last reader lets go, after the drop
            deadline = time.monotonic() + 60
            while (files := admin.data_files(ks, table)) is not None and len(files) > count \
                    and time.monotonic() < deadline:
                time.sleep(0.1)
            if files is not None:
                assert len(files) == count
        assert values["message_record_w7d_steady_state_windows"] == 6  # 30 days / 7 + 1
    finally:
        drop_keyspace(connection, ks)


def test_grouped_reads(run_dir, notebook_artifacts, cluster_config):
    # three densities, not the nine of a measurement: each traced request waits for its trace events
    # (about half a second), and the sweep traces 5 requests per density and round (1 range, 4 IN lists)
    values = run_notebook("grouped_reads", {"dataset_messages": 400, "mix_sizes": [60], "repeats": 1, "density_trace_repeats": 2,
                                            "max_trace_repeats": 2,
                                            "densities": [1.0, 0.5, 0.25], "density_partition_rows": 1600,
                                            "show_progress": False}, run_dir, config=cluster_config)
    notebook_artifacts(run_dir / "grouped_reads", "grouped_reads", "grouped_reads")
    # S-1 (a) 1 group x 500 -> <= 2 reads; (b) 20 DMs x 5 -> <= 21; no point reads, no message_index
    assert values["s1_group_500_grouped_entries"] == 500
    rtt = values["range_density_rtt"]  # the IN lists of one group go out in one concurrent wave
    assert rtt["in_round_trips"] == rtt["range_round_trips"] == 1 and set(rtt["by_rtt"]) == {"0", "1000", "2000"}
    assert len(set(rtt["by_rtt"].values())) == 1 and values["recommended_range_min_density_at_target_rtt"] is None
    assert values["s1_group_500_grouped_record_reads"] <= 2
    assert values["s1_dm_20x5_grouped_entries"] == 100
    assert values["s1_dm_20x5_grouped_record_reads"] <= 21
    for shape in ("s1_group_500", "s1_dm_20x5", "group_500_sparse", "mix_60"):
        assert values[f"{shape}_grouped_point_reads"] == 0
        assert values[f"{shape}_grouped_index_reads"] == 0
        assert values[f"{shape}_naive_record_reads"] == values[f"{shape}_naive_entries"]
        assert values[f"{shape}_naive_index_reads"] == 0
    # every other seq of one bucket (density 500/999): one range from batch_read_range_min_density <= 0.5 up,
    # else IN lists of 100
    sparse_range = 500 / 999 >= load_constants().batch_read_range_min_density
    assert values["group_500_sparse_grouped_record_reads"] == (1 if sparse_range else 5)
    # the density sweep: a range is one request, IN lists one per 100 entries; a recommendation in (0, 1]
    assert values["density100_range_rows"] == values["density_entries"] == 400
    assert values["density50_in_requests"] == 4 and values["density100_range_rows_read"] == 400
    assert 0 < values["recommended_range_min_density"] <= 1
    # its interval (bootstrap over whole trace rounds) and the recommendation of each half of the rounds
    rounds = values["density_trace_rounds"]
    traces = pd.read_csv(run_dir / "grouped_reads" / "density_traces.csv")
    assert rounds >= 2 and (traces.groupby("density").trace.nunique() == rounds).all()
    low, high = values["recommended_range_min_density_ci_low"], values["recommended_range_min_density_ci_high"]
    assert low is None and high is None  # 2 trace rounds: too few for an interval
    assert values["loader_bound_runs"] >= 0 and values["loader_cpu_percent_of_core_max"] > 0
    h = values["range_density_halves"]
    assert 0 < h["first"] <= 1 and 0 < h["second"] <= 1 and h["agree"] == (abs(h["first"] - h["second"]) <= 0.1)
    # 2 trace rounds (max_trace_repeats 2): too few to resample, so never stable: inconclusive
    stab = values["range_density_stability"]
    assert stab["choice"] == values["recommended_range_min_density"] and stab["units"] == 2
    assert stab["share"] is None and stab["stable"] is False and "too few to resample" in stab["text"]
    summary = pd.read_csv(run_dir / "grouped_reads" / "summary.csv")
    assert (summary.found == summary.entries).all()


SMALL_CPU_DATASET = {"group_backlog": 60, "dm_count": 3, "dm_backlog": 5, "history_conversations": 2,
                     "history_rows": 120}


# Stated CPU costs (ms of server CPU per operation at RF 1), not a measurement: the test checks the
# model check's arithmetic from them against the operations its mixed windows completed and the
# CPU the node spent (measured); cpu_cost's own tests measure costs. Running cpu_cost here would
# cost a minute of the suite's budget.
STATED_MS_PER_OP = {"send": 2.0, "history_latest": 1.0}


@pytest.fixture(scope="module")
def calibration_inputs(run_dir, cluster_config):
    """b_row's values (test_b_row's run: a row model over four mixes; a tiny real run when it did
    not run) and a cpu_cost values file with STATED_MS_PER_OP: what model_check predicts from."""
    from lab.calibration.experiments import b_row
    from lab.calibration.experiments.common import Output, open_testbed

    folder = run_dir / "inputs"
    (folder / "b_row").mkdir(parents=True, exist_ok=True)
    if (run_dir / "b_row" / "values.json").exists():
        (folder / "b_row" / "values.json").write_text((run_dir / "b_row" / "values.json").read_text())
    else:
        with open_testbed(cluster_config) as testbed:
            r = b_row.run(testbed, b_row.Params(rows=300, min_repeats=2, max_repeats=2, partition_rows=0,
                                                compressions=("lz4",), fit_rows=150, fit_repeats=2, show_progress=False,
                                                fit_mixes=("text_only", "text_long", "files_audio",
                                                           "photos_small_thumbs")), constants=load_constants())
            Output(folder / "b_row").record(r.values())
    cpu = {"operations": list(STATED_MS_PER_OP), "server": "cassandra", "measured_replication_factor": 1}
    for op, ms in STATED_MS_PER_OP.items():
        cpu |= {f"cpu_{op}_server_ms_per_op": ms, f"cpu_{op}_requests_per_op": 1.0}
    (folder / "cpu_cost").mkdir(parents=True, exist_ok=True)
    (folder / "cpu_cost" / "values.json").write_text(json.dumps(cpu))
    return folder


def test_model_check(cluster_config, calibration_inputs):
    """The experiment the model_check notebook runs (called directly: no kernel, no figure; the
    suite's time budget), on the shared node at RF 1."""
    from lab.calibration.experiments import model_check
    from lab.calibration.experiments.common import open_testbed

    params = model_check.Params(b_row_values=str(calibration_inputs / "b_row" / "values.json"),
                                cpu_values=str(calibration_inputs / "cpu_cost" / "values.json"),
                                sends=300, cpu_rates={"send": 4.0, "history_latest": 4.0}, cpu_rounds=2,
                                cpu_window_seconds=2.0, cpu_idle_seconds=1.0, cpu_dataset=SMALL_CPU_DATASET,
                                diagnose_rounds=0, sstable_days=8, sstable_rows_per_day=4, show_progress=False)
    with open_testbed(cluster_config) as testbed:
        result = model_check.run(testbed, params, constants=load_constants())
    values, checks = result.values(), result.table()
    assert values["single_node"] is (values["nodes"] == 1) and values["sends"] == 300
    assert "space_amp (conversation_head bytes)" in values["inputs"]["missing"]
    # disk: every table the sends wrote, measured from the node's files; the row model predicts the records
    disk = checks[checks.quantity == "disk"]
    assert {"message_record", "message_index", "client_dedup", "conversation_head"} <= set(disk.table.dropna())
    rec = disk[disk.table == "message_record"].iloc[0]
    assert rec.predicted > 0 and abs(rec.error) < 0.25
    assert pd.isna(disk[disk.table == "conversation_head"].predicted).all()  # no space_amp input: not predicted
    assert values["model_check_disk_error"] == pytest.approx(
        disk[(disk.scope == "cluster") & disk.table.isna()].iloc[0].error)
    # CPU: predicted from the operations the mixed windows completed, measured net of idle; a
    # loader-bound window (this process the bottleneck on a busy machine) is named and left out
    load = values["load"]
    assert load["ops_by_kind"]["send"] > 0 and load["limits"]["max_loader_cpu_percent_of_core"] > 0
    assert (load["verdict"] == "loader-bound") == bool(load["loader_bound_rounds"])
    cpu = checks[(checks.quantity == "cpu") & (checks.scope == "cluster")]
    if len(load["loader_bound_rounds"]) == 2:
        assert cpu.empty and "loader-bound" in values["skipped"]["cpu"]
    else:
        assert cpu.iloc[0].measured != 0
        if not load["loader_bound_rounds"]:  # at RF 1: the stated cost of every completed operation
            done = load["ops_by_kind"]
            assert cpu.iloc[0].predicted == pytest.approx(sum(STATED_MS_PER_OP[op] * n for op, n in done.items()) / 1000)
    # SSTables: the window arithmetic is exact per node
    sst = checks[checks.quantity == "sstables"]
    assert set(sst.table) == {"message_record", "client_dedup"} and sst.met.all()
    assert values["model_check_sstables_met"] is True
    assert "**Model check**" in model_check.conclusion(result)


@pytest.mark.parametrize("mode", client_gc.CLIENT_GC_MODES)
def test_a_testbed_applies_client_gc_and_gives_the_kernel_its_collector_back(cluster_config, mode):
    """The notebooks' loader CPU is measured with the collector the bench and load processes use
    (client_gc), and the kernel (here the test session) gets its own back when the testbed closes."""
    thresholds, was_frozen = gc.get_threshold(), gc.get_freeze_count()
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    try:
        with common.open_testbed(cluster_config, ServicesConfig(client_gc=mode)) as testbed:
            assert testbed.environment()["services"]["client_gc"] == mode
            if mode == "freeze":
                assert gc.get_threshold() == client_gc.FREEZE_THRESHOLDS and gc.get_freeze_count() > 0
                garbage = [object() for _ in range(1000)]
                testbed.settle_client_gc()  # a later set-up phase frozen too
                assert gc.get_freeze_count() > 0 and gc.is_tracked(garbage)
            else:
                assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0
        assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0
        with pytest.raises(RuntimeError), common.open_testbed(cluster_config, ServicesConfig(client_gc=mode)):
            raise RuntimeError("an experiment failed")
        assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0  # also when it fails
    finally:
        gc.set_threshold(*thresholds)
        if was_frozen:
            gc.freeze()
