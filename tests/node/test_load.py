"""`lab load`: pacing and latency bookkeeping (pure), the audit's core (pure), and one short
headless Locust run against the real node whose summary must match what the audit reads back.

Locust itself never runs inside pytest (importing it monkey-patches the process): the run
test goes through ``lab.load.runner.run_load``, which starts Locust as separate processes."""
from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest

from lab.load.audit import Ack, StoredRow, read_acks
from lab.measure.hdr import (read_interval_log)
from lab.load.runner import LoadOptions, run_load
from lab.load.plan import SEED_SHAPES

MS = 1_000_000  # ns
S = 1_000_000_000


# ---- audit core (pure) --------------------------------------------------------------------------
T, C = uuid.uuid4(), uuid.uuid4()
U = uuid.uuid4()


def _ack(seq: int, mid: int, cmid: str, replayed: bool = False, phase: str = "measured") -> Ack:
    return Ack(phase=phase, tenant_id=T, conversation_id=C, conversation_seq=seq, message_id=mid,
               client_message_id=cmid, sender_id=U, replayed=replayed)


def _row(seq: int, mid: int, cmid: str, control: bool = False) -> StoredRow:
    return StoredRow(conversation_seq=seq, message_id=mid, client_message_id=cmid, sender_id=U, control=control)


# ---- a real run ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def load_run(cluster_config, connection, tmp_path_factory):
    keyspace = f"loadtest_{uuid.uuid4().hex[:10]}"
    config = cluster_config.replace(keyspace=keyspace)
    result = run_load(config, LoadOptions(profile="chat", rate=30, duration_seconds=4, warmup_seconds=1,
                                          processes=2, seed_size="tiny",
                                          results=tmp_path_factory.mktemp("results")))
    yield result
    connection.execute(f"DROP KEYSPACE IF EXISTS {keyspace}")
    shutil.rmtree(result.state_root, ignore_errors=True)


@pytest.mark.node
def test_load_run_loses_and_duplicates_nothing(load_run):
    audit = load_run.summary["audit"]
    assert audit["lost"] == 0 and audit["duplicates"] == 0 and audit["replay_mismatches"] == 0, audit["examples"]
    assert audit["ok"]


@pytest.mark.node
def test_summary_counts_match_the_audit(load_run):
    s, audit = load_run.summary, load_run.summary["audit"]
    acks = s["acks"]
    assert acks["measured"] > 0 and acks["seed"] == 2 * SEED_SHAPES["tiny"].sends
    assert audit["acked"] == acks["total_new"] == audit["found"]
    assert audit["acked_by_phase"].get("measured", 0) == acks["measured"]
    assert s["operations"]["send"]["ok"] == acks["measured"]
    assert audit["replays"] == acks["replayed"] >= s["operations"].get("send_retry", {}).get("ok", 0)
    assert s["workers_reporting"] == 2 and all(w["acks"] > 0 for w in s["workers"])
    assert {w["driver"] for w in s["workers"]} == {"native-threads"}  # lab load's default


@pytest.mark.node
def test_run_writes_every_artifact(load_run):
    d = load_run.load_dir
    for name in ("summary.json", "parameters.json", "audit.json", "cpu.csv", "locust.json", "locust_stats.csv",
                 "locust_stats_history.csv", "locust_failures.csv", "hdr/worker-0.hlog", "hdr/worker-1.hlog",
                 "acks/worker-0.csv", "acks/worker-1.csv"):
        assert (d / name).exists(), name
    s = load_run.summary
    assert s["mode"] == "fixed-rate" and s["requested_rate"] == 30 and s["achieved_rate"] > 0
    assert s["achieved_over_requested"] == pytest.approx(s["achieved_rate"] / 30, rel=1e-3)
    assert s["loadgen_cpu"]["samples"] > 0
    send = s["operations"]["send"]
    for key in ("p50", "p90", "p99", "p999", "max"):
        assert send["service_us"][key] <= send["corrected_us"][key] * 1.01 + 1
    # the interval logs hold exactly the measured calls the totals hold
    logged = sum(iv.histogram.get_total_count() for p in sorted((d / "hdr").glob("*.hlog"))
                 for iv in read_interval_log(p) if iv.tag == "send.service")
    assert logged == send["count"]
    assert json.loads((d / "parameters.json").read_text())["cluster"]["password"] in (None, "***")


@pytest.mark.node
def test_gevent_driver_mode_also_audits_clean(cluster_config, connection, tmp_path):
    """The fallback: patched Locust, store calls on the gevent loop (asyncore reactor)."""
    keyspace = f"loadtest_{uuid.uuid4().hex[:10]}"
    try:
        result = run_load(cluster_config.replace(keyspace=keyspace), LoadOptions(
            profile="send_only", users=4, duration_seconds=2, seed_size="tiny", native_threads=False,
            results=tmp_path))
        s = result.summary
        assert s["audit"]["ok"] and s["audit"]["acked"] == s["acks"]["total_new"] > 0
        assert [(w["driver"], w["reactor"]) for w in s["workers"]] == [("gevent", "AsyncoreConnection")]
        shutil.rmtree(result.state_root, ignore_errors=True)
    finally:
        connection.execute(f"DROP KEYSPACE IF EXISTS {keyspace}")


@pytest.mark.node
def test_workers_own_disjoint_key_ranges(load_run):
    d: Path = load_run.load_dir
    tenants = [{a.tenant_id for a in read_acks(d / "acks" / f"worker-{i}.csv")} for i in range(2)]
    assert len(tenants[0]) == len(tenants[1]) == 1 and not tenants[0] & tenants[1]
