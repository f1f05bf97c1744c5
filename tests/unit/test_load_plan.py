"""A load run's plan: profiles, per-worker key ranges, the environment round trip, secrets."""
from __future__ import annotations

import json

import pytest

from lab.calibration.capacity_model.cpu_sizing import DEFAULT_OPERATIONS_PER_MESSAGE
from lab.cluster.config import ClusterConfig
from lab.errors import ConfigError
from lab.load.pacing import staircase
from lab.load.plan import SEED_SHAPES, KeyRange, LoadPlan, LoadProfile, load_profiles
from lab.load.processes import child_env, config_env, locust_cmd

MS = 1_000_000  # ns
S = 1_000_000_000


def test_every_profile_names_known_user_kinds():
    profiles = load_profiles()
    assert {"chat", "send_only", "read_only", "backfill"} <= set(profiles)


def test_the_capacity_profile_is_the_capacity_models_mix_per_send():
    """Calls are shared by weight at a fixed rate; a reading session reads its first (latest) page,
    then older ones: per send, latest = readers / senders / mean pages, older = the rest."""
    p = load_profiles()["capacity"]
    sends = p.weights["sender"]
    pages = sum(p.history_pages) / len(p.history_pages)
    per_send = {"send": 1.0, "history_latest": p.weights["history_reader"] / sends / pages,
                "history_older": p.weights["history_reader"] / sends * (1 - 1 / pages),
                "react": p.weights["reactor"] / sends}
    model = DEFAULT_OPERATIONS_PER_MESSAGE
    assert p.history_jump_share == 0 and set(p.weights) == {"sender", "history_reader", "reactor"}
    assert per_send == pytest.approx({op: model[op] for op in per_send})
    assert sum(n for op, n in model.items() if op not in per_send) / sum(model.values()) < 0.01  # grouped reads


@pytest.mark.parametrize("bad", [dict(history_pages=[]), dict(history_pages=[0]), dict(history_pages=[1.5]),
                                 dict(history_jump_share=1.5), dict(retry_share=-0.1)])
def test_a_profile_with_reading_sessions_out_of_range_is_refused(bad):
    with pytest.raises(ConfigError, match="load profile x"):
        LoadProfile(name="x", **bad)


def test_key_ranges_of_workers_are_disjoint():
    a, b = KeyRange("run", 0, SEED_SHAPES["tiny"]), KeyRange("run", 1, SEED_SHAPES["tiny"])
    ids = lambda k: {k.tenant_id, k.big_group, *k.dms(), *k.chats()}  # noqa: E731
    assert not ids(a) & ids(b)
    assert KeyRange("run", 0, SEED_SHAPES["tiny"]).tenant_id == a.tenant_id  # deterministic


def test_password_travels_only_in_the_environment(tmp_path):
    config = ClusterConfig(username="lab", password="s3cret-pw")
    plan = LoadPlan(run_id="r", load_dir=tmp_path, state_root=tmp_path, profile="chat", users=2, workers=2)
    for role in ("master", "worker", "standalone"):
        assert "s3cret-pw" not in " ".join(locust_cmd(plan, tmp_path, role=role, stop_timeout_seconds=5,
                                                      master_port=5557, index=0))
    assert "s3cret-pw" not in json.dumps(plan.to_json()) and "s3cret-pw" not in json.dumps(config.redacted())
    assert child_env(config, plan, 0, role="worker")["LAB_PASSWORD"] == "s3cret-pw"
    assert "LAB_PASSWORD" not in child_env(None, plan, role="master")  # the master holds no store
    assert config_env(config)["LAB_USERNAME"] == "lab"


# ---- plan, key ranges, secrets (pure) -----------------------------------------------------------
def test_plan_round_trips_through_the_environment(tmp_path):
    plan = LoadPlan(run_id="r1", load_dir=tmp_path / "load", state_root=tmp_path / "state", profile="chat",
                    users=10, workers=2, stages=staircase(100, step_seconds=5), t0=123.5, warmup_seconds=2,
                    duration_seconds=18, start_gate=True)
    again = LoadPlan.from_env(plan.to_env())
    assert again == plan and again.for_worker(1).worker_name() == "worker-1"
    assert again.for_worker(1).node_id == again.node_id + 1
