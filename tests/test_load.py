"""`lab load`: pacing and latency bookkeeping (pure), the audit's core (pure), and one short
headless Locust run against the real node whose summary must match what the audit reads back.

Locust itself never runs inside pytest (importing it monkey-patches the process): the run
test goes through ``lab.load.runner.run_load``, which starts Locust as separate processes."""
from __future__ import annotations

import io
import json
import shutil
import uuid
from pathlib import Path

import pytest

from lab.load.audit import Ack, StoredRow, audit_rows, read_acks
from lab.cluster.config import ClusterConfig
from lab.measure.hdr import (IntervalLogWriter, LatencyRecorder, OpStats, latencies_us, merge_stats, parse_interval_log,
                     percentiles_us, read_interval_log, summarize)
from lab.load.runner import LoadOptions, _child_env, _locust_cmd, config_env, run_load
from lab.load.plan import SEED_SHAPES, KeyRange, LoadPlan, load_profiles
from lab.load.pacing import FixedRateSchedule, Stage, UserPacer, staircase, stages_from_steps

MS = 1_000_000  # ns
S = 1_000_000_000


# ---- pacing (pure) -----------------------------------------------------------------------------
def test_fixed_rate_schedule_is_independent_of_past_calls():
    sched = FixedRateSchedule.for_rate(100, start_ns=0)
    assert [sched.due_ns(k) for k in range(3)] == [0, 10 * MS, 20 * MS]
    assert sched.index_due_by(-1) == 0 and sched.index_due_by(0) == 1 and sched.index_due_by(25 * MS) == 3


def test_user_pacer_splits_the_rate_and_walks_the_stages():
    stages = stages_from_steps([(1.0, 10.0), (1.0, 20.0)])  # total 10/s then 20/s
    pacer = UserPacer(stages, t0_ns=0, users=2)              # 5/s then 10/s for this user
    dues = []
    while (d := pacer.next_due(0)) is not None:
        dues.append(d)
    assert dues[:5] == [0, 200 * MS, 400 * MS, 600 * MS, 800 * MS]
    assert dues[5:] == [S + k * 100 * MS for k in range(10)]


def test_user_pacer_late_joiner_is_not_charged_for_time_before_it_existed():
    pacer = UserPacer([Stage(start_s=0, end_s=10, rate=10)], t0_ns=0, users=1)
    first = pacer.next_due(3 * S + 50 * MS)
    assert first == 3 * S + 100 * MS
    # but once running, a stall is not skipped: the next call is due on schedule, in the past
    assert pacer.next_due(5 * S) == 3 * S + 200 * MS


def test_staircase_steps_at_fractions_of_the_max():
    st = staircase(1000, step_seconds=10)
    assert [(s.start_s, s.end_s, s.rate) for s in st] == [(0, 10, 500), (10, 20, 750), (20, 30, 900),
                                                          (30, 40, 1050)]
    assert staircase(1000, step_seconds=10, warmup_seconds=5)[0] == Stage(start_s=0, end_s=5, rate=500)


# ---- latency bookkeeping (pure) -----------------------------------------------------------------
def test_latencies_from_due_time_and_from_start():
    service, corrected = latencies_us(started_ns=10 * MS, ended_ns=12 * MS, due_ns=4 * MS)
    assert (service, corrected) == (2000, 8000)
    assert latencies_us(started_ns=0, ended_ns=1500, due_ns=None) == (2, None)  # rounds up to whole µs
    assert latencies_us(started_ns=5 * MS, ended_ns=6 * MS, due_ns=9 * MS)[1] == 1000  # early start: service


def test_coordinated_omission_is_corrected():
    """Open loop at 100/s, 1 ms calls, one 1 s stall: the stall delays the 100 calls due during
    it. Service time shows one slow call; corrected latency shows the queue behind it."""
    rec = LatencyRecorder(fixed_rate=True)
    sched = FixedRateSchedule.for_rate(100, start_ns=0)
    now = 0
    for k in range(1000):
        due = sched.due_ns(k)
        start = max(now, due)
        end = start + (S if k == 100 else MS)
        rec.record("send", started_ns=start, ended_ns=end, due_ns=due)
        now = end
    s = rec.totals["send"]
    assert percentiles_us(s.service)["p99"] < 1100
    assert percentiles_us(s.corrected)["p99"] > 500_000
    assert s.corrected.get_max_value() >= 1_000_000 * 0.999


def test_failures_are_counted_and_kept_in_the_latency():
    rec = LatencyRecorder(fixed_rate=False)
    rec.record("read", started_ns=0, ended_ns=MS)
    rec.record("read", started_ns=0, ended_ns=20 * S, error="RequestTimeout", timeout=True)
    rec.record("read", started_ns=0, ended_ns=2 * MS, error="Unavailable")
    s = rec.totals["read"]
    assert (s.count, s.ok, s.timeouts, s.errors) == (3, 1, 1, {"RequestTimeout": 1, "Unavailable": 1})
    assert s.service.get_total_count() == 3 and s.service.get_max_value() >= 19_990_000
    summary = summarize(rec.totals, elapsed_seconds=1.5, fixed_rate=False)["read"]
    assert summary["errors"] == 2 and summary["timeouts"] == 1 and summary["rate_per_second"] == 2.0
    assert "corrected_us" not in summary


def test_intervals_reset_totals_do_not_and_merge_across_processes():
    a, b = LatencyRecorder(fixed_rate=True), LatencyRecorder(fixed_rate=True)
    for i in range(10):
        a.record("send", started_ns=0, ended_ns=(i + 1) * MS, due_ns=0)
    b.record("send", started_ns=0, ended_ns=MS, due_ns=0, error="X")
    first = a.take_interval()
    assert first["send"].count == 10 and a.take_interval() == {} and a.totals["send"].count == 10
    shipped = [{op: OpStats.from_json(json.loads(json.dumps(st.to_json()))) for op, st in r.totals.items()}
               for r in (a, b)]
    merged = merge_stats(shipped)["send"]
    assert (merged.ok, merged.errors, merged.service.get_total_count()) == (10, {"X": 1}, 11)


def test_interval_log_round_trip():
    rec = LatencyRecorder(fixed_rate=True)
    rec.record("send", started_ns=0, ended_ns=3 * MS, due_ns=-MS)
    buf = io.StringIO()
    w = IntervalLogWriter(buf, start_time_s=1000.0, comment="test")
    w.write_interval(rec.take_interval(), begin_s=1001.0, end_s=1002.0)
    lines = list(parse_interval_log(buf.getvalue()))
    assert [(iv.tag, iv.op, iv.kind, iv.start_s, iv.length_s) for iv in lines] == [
        ("send.service", "send", "service", 1.0, 1.0), ("send.corrected", "send", "corrected", 1.0, 1.0)]
    assert lines[1].histogram.get_max_value() >= 3990
    assert buf.getvalue().startswith("#[Histogram log format version 1.3]")


# ---- audit core (pure) --------------------------------------------------------------------------
T, C = uuid.uuid4(), uuid.uuid4()
U = uuid.uuid4()


def _ack(seq: int, mid: int, cmid: str, replayed: bool = False, phase: str = "measured") -> Ack:
    return Ack(phase=phase, tenant_id=T, conversation_id=C, conversation_seq=seq, message_id=mid,
               client_message_id=cmid, sender_id=U, replayed=replayed)


def _row(seq: int, mid: int, cmid: str, control: bool = False) -> StoredRow:
    return StoredRow(conversation_seq=seq, message_id=mid, client_message_id=cmid, sender_id=U, control=control)


def test_audit_clean_run():
    acks = [_ack(1, 11, "a", phase="seed"), _ack(2, 12, "b"), _ack(2, 12, "b", replayed=True)]
    rows = {C: [_row(3, 99, "recall-event", control=True), _row(2, 12, "b"), _row(1, 11, "a")]}
    res = audit_rows(acks, rows)
    assert res.ok and (res.acked, res.found, res.replays, res.lost, res.duplicates) == (2, 2, 1, 0, 0)
    assert res.acked_by_phase == {"seed": 1, "measured": 1}


def test_audit_counts_losses_and_classifies_them():
    res = audit_rows([_ack(1, 11, "a"), _ack(2, 12, "b")], {C: [_row(1, 11, "a")]}, {C: [12]})
    assert (res.lost, res.stored_not_in_history, res.found) == (1, 1, 1) and not res.ok
    res = audit_rows([_ack(1, 11, "a")], {C: [_row(1, 77, "a")]})  # right seq, another message
    assert res.lost == 1


def test_audit_counts_duplicates_three_ways():
    dup_id = audit_rows([_ack(1, 11, "a")], {C: [_row(1, 11, "a"), _row(1, 11, "a")]})
    assert dup_id.duplicates >= 1
    dup_client = audit_rows([_ack(1, 11, "a")], {C: [_row(1, 11, "a"), _row(5, 15, "a")]})
    assert dup_client.duplicates == 1
    acked_twice = audit_rows([_ack(1, 11, "a"), _ack(5, 15, "a")], {C: [_row(1, 11, "a"), _row(5, 15, "a")]})
    assert acked_twice.duplicates >= 1 and not acked_twice.ok
    mismatch = audit_rows([_ack(1, 11, "a"), _ack(4, 14, "a", replayed=True)], {C: [_row(1, 11, "a")]})
    assert mismatch.replay_mismatches == 1 and not mismatch.ok


# ---- plan, key ranges, secrets (pure) -----------------------------------------------------------
def test_plan_round_trips_through_the_environment(tmp_path):
    plan = LoadPlan(run_id="r1", load_dir=tmp_path / "load", state_root=tmp_path / "state", profile="chat",
                    users=10, workers=2, stages=staircase(100, step_seconds=5), t0=123.5, warmup_seconds=2,
                    duration_seconds=18, start_gate=True)
    again = LoadPlan.from_env(plan.to_env())
    assert again == plan and again.for_worker(1).worker_name() == "worker-1"
    assert again.for_worker(1).node_id == again.node_id + 1


def test_key_ranges_of_workers_are_disjoint():
    a, b = KeyRange("run", 0, SEED_SHAPES["tiny"]), KeyRange("run", 1, SEED_SHAPES["tiny"])
    ids = lambda k: {k.tenant_id, k.big_group, *k.dms(), *k.chats()}  # noqa: E731
    assert not ids(a) & ids(b)
    assert KeyRange("run", 0, SEED_SHAPES["tiny"]).tenant_id == a.tenant_id  # deterministic


def test_every_profile_names_known_user_kinds():
    profiles = load_profiles()
    assert {"chat", "send_only", "read_only", "backfill"} <= set(profiles)


def test_password_travels_only_in_the_environment(tmp_path):
    config = ClusterConfig(username="lab", password="s3cret-pw")
    plan = LoadPlan(run_id="r", load_dir=tmp_path, state_root=tmp_path, profile="chat", users=2, workers=2)
    opts = LoadOptions(users=2)
    for role in ("master", "worker", "standalone"):
        assert "s3cret-pw" not in " ".join(_locust_cmd(plan, tmp_path, opts, role, 5557, 0))
    assert "s3cret-pw" not in json.dumps(plan.to_json()) and "s3cret-pw" not in json.dumps(config.redacted())
    assert _child_env(config, plan, 0, role="worker")["LAB_PASSWORD"] == "s3cret-pw"
    assert config_env(config)["LAB_USERNAME"] == "lab"


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
