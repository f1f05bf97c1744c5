"""Node failure on a 3-node embedded cluster, RF 3, QUORUM / SERIAL: no acknowledged send is lost
or duplicated, and a replayed send gets its first ack, while a node is down and after it rejoins.

The 3-node cluster is this folder's shared one (``conftest.py``: started once for the folder,
on its own loopback addresses and JMX ports, killed by its recorded PIDs at the end even when a
test fails). The load is lab.load.soak's mixed load (sends with
client retries, history, batch reads, reactions, recalls) on driver threads, bounded in time
and operations, and audited by lab.load.audit.

The three tests run in order and share the cluster:

(a) ``killed during load``: node3 gets SIGKILL a few seconds into the load. After the load,
    with node3 still down: a replay of every acknowledged client_message_id must return its
    first ack (LWT dedup held through the failure) and the audit must find every
    acknowledged message exactly once.
(b) ``stopped before load``: node3 is still down (convicted by gossip, known down to the
    driver) when a second load starts: the same checks.
(c) node3 restarts (``restart(name)``) and rejoins: every node coordinates a read at
    consistency ALL (all three replicas answer), and both loads' acknowledged messages are
    all there, once, with the full cluster.

One restart serves (a) and (b): a single-node restart costs a minute on this machine and the
whole file has to stay within ~5 minutes of CI. Figures (acked, lost, duplicated, restart
and rejoin seconds ...) are printed at the end of the session and written to
results/tests-<run-id>/node_failure.{md,json}.
"""
from __future__ import annotations

import json
import threading
import time
import uuid

import pytest

from lab.errors import ClusterError
from lab.cluster.embedded.process import is_ours
from lab.load.soak import Soak, SoakOptions
from lab.store import MessageStore

pytestmark = [pytest.mark.node, pytest.mark.cluster3, pytest.mark.slow]

VICTIM = "node3"
LOAD_SECONDS = 12.0
KILL_AFTER_SECONDS = 4.0
LOAD_THREADS = 8
LOAD_MAX_OPERATIONS = 3000
AUDIT_INTERVAL_SECONDS = 6.0
REJOIN_TIMEOUT_SECONDS = 120.0
REJOIN_POLL_SECONDS = 0.5

FIGURES: dict[str, dict] = {}
SOAKS: dict[str, Soak] = {}


@pytest.fixture(scope="module")
def cluster_store(cluster3, cluster3_config, cluster3_start, tmp_path_factory):
    FIGURES["cluster"] = {**cluster3_start, "replication_factor": 3, "consistency": "QUORUM",
                          "serial_consistency": "SERIAL"}
    config = cluster3_config(keyspace=f"nf_{uuid.uuid4().hex[:10]}")
    store = MessageStore.open(config, state_dir=tmp_path_factory.mktemp("nf-state"), node_id=41)
    store.create_schema()
    yield store
    store.close()


SCENARIOS = ("killed during load", "stopped before load")


@pytest.fixture(scope="module", autouse=True)
def node_failure_report(report):
    yield
    lines = ["| scenario | node | acked | lost | duplicated | replay mismatches | replays probed | failed ops "
             "(after client retries) | retried cluster errors | sends replayed after an error |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name in SCENARIOS:
        f = FIGURES.get(name)
        if f is None or "acked" not in f:
            lines.append(f"| {name} | not run | | | | | | | | |")
            continue
        lines.append(f"| {name} | {f['node']} | {f['acked']} | {f['lost']} | {f['duplicated']} | "
                     f"{f['replay_mismatches']} | {f['replays']['probed']} | {f['errors_total']} | "
                     f"{f['retried_errors']} | {f['replayed_after_error']} |")
    cluster, rejoin = FIGURES.get("cluster", {}), FIGURES.get("rejoin", {})
    lines += ["", f"3 nodes {cluster.get('nodes')}, RF 3, QUORUM / SERIAL; cluster start {cluster.get('start_seconds')} s.",
              f"{VICTIM} restart: CQL up after {rejoin.get('restart_seconds')} s, rejoined (a read at ALL "
              f"coordinated by every node) after {rejoin.get('rejoin_seconds')} s; after the rejoin: "
              f"{rejoin.get('after_rejoin')}.",
              "lost / duplicated: lab.audit over every acknowledged send (history walk + partition read); "
              "replays: every acknowledged client_message_id re-sent, each must return its first ack."]
    report("node_failure.md", "node failure (3 nodes, RF 3)", "\n".join(lines) + "\n")
    report("node_failure.json", "node failure figures (json)", json.dumps(FIGURES, indent=2, default=str) + "\n")


def run_load(cluster, store, name: str, *, kill_after: float | None) -> dict:
    soak = SOAKS[name] = Soak(store, SoakOptions(
        duration_seconds=LOAD_SECONDS, threads=LOAD_THREADS, max_operations=LOAD_MAX_OPERATIONS,
        audit_interval_seconds=AUDIT_INTERVAL_SECONDS, conversations=8, seed=41))
    figures: dict = FIGURES.setdefault(name, {"node": VICTIM})
    load = threading.Thread(target=lambda: figures.update(totals=soak.run()), name="nf-load")
    t0 = time.monotonic()
    load.start()
    if kill_after is not None:
        time.sleep(kill_after)
        cluster.kill(VICTIM)
        figures["killed_at_seconds"] = round(time.monotonic() - t0, 1)
    load.join()
    assert "totals" in figures, "the load thread died"
    totals = figures.pop("totals")
    # with the node still down: every acked send replays its first ack, then the audit
    figures["replays"] = soak.replay_acked()
    final = soak.audit(final=True)
    figures.update(acked=final.acked, lost=final.lost, duplicated=final.duplicated,
                   hidden_by_head=final.hidden_by_head, replay_mismatches=final.replay_mismatches,
                   recalls=final.recalls, recalls_lost=final.recalls_lost,
                   errors_total=totals.errors_total, replayed_after_error=totals.replayed_after_error,
                   retried_errors=totals.retried_errors, batch_missing=totals.batch_missing,
                   operations={op: o.to_json() for op, o in totals.operations.items()},
                   audits=[a.to_json() for a in totals.audits], alerts=totals.alerts, final_audit=final.to_json())
    print(json.dumps({k: v for k, v in figures.items() if k not in ("audits", "operations")}, default=str))
    return figures


def check(f: dict) -> None:
    assert "error" not in f["final_audit"], f["final_audit"]
    assert f["acked"] > 0
    assert (f["lost"], f["duplicated"], f["replay_mismatches"], f["recalls_lost"]) == (0, 0, 0, 0), f["final_audit"]
    assert f["hidden_by_head"] == 0 and f["batch_missing"] == 0
    assert f["replays"] == {"probed": f["acked"], "mismatches": 0, "errors": 0}


def test_a_node_killed_during_load(cluster3, cluster_store):
    for node in cluster3.read_state().nodes:
        assert is_ours(node.pid, node.directory), f"{node.name} is not running before the load"
    check(run_load(cluster3, cluster_store, "killed during load", kill_after=KILL_AFTER_SECONDS))


def test_b_node_stopped_before_load(cluster3, cluster_store):
    victim = next(n for n in cluster3.read_state().nodes if n.name == VICTIM)
    if is_ours(victim.pid, victim.directory):  # (a) failed before its kill
        cluster3.kill(VICTIM)
    check(run_load(cluster3, cluster_store, "stopped before load", kill_after=None))


def test_c_killed_node_rejoins_and_every_acked_message_is_there(cluster3, cluster_store):
    figures = FIGURES.setdefault("rejoin", {"node": VICTIM})
    t0 = time.monotonic()
    cluster3.restart(VICTIM)
    figures["restart_seconds"] = round(time.monotonic() - t0, 1)  # restart() returns once CQL answers
    wait_rejoined(cluster_store)
    figures["rejoin_seconds"] = round(time.monotonic() - t0, 1)
    after = {}
    for name, soak in SOAKS.items():
        audit = soak.audit(final=True)  # QUORUM reads with all three nodes up
        after[name] = {k: getattr(audit, k) for k in ("acked", "lost", "duplicated", "hidden_by_head", "error")}
    figures["after_rejoin"] = after
    assert set(after) == set(SCENARIOS)
    for name, audit in after.items():
        assert audit["error"] is None and (audit["lost"], audit["duplicated"]) == (0, 0), (name, audit)
        assert audit["acked"] == FIGURES[name]["acked"]


def wait_rejoined(store) -> float:
    """Seconds until every node coordinates a read at consistency ALL: all three replicas are
    up in every node's view, and the driver reaches each of them again."""
    probe = store.prepare_raw("SELECT latest_conversation_seq FROM {ks}.conversation_head WHERE tenant_id = ? "
                              "AND conversation_id = ?")
    t0 = time.monotonic()
    last: Exception | None = None
    while time.monotonic() - t0 < REJOIN_TIMEOUT_SECONDS:
        try:
            for host in store.connection.hosts():
                store.connection.execute(probe, (uuid.UUID(int=0), uuid.UUID(int=0)), host=host, consistency="ALL")
            return time.monotonic() - t0
        except ClusterError as exc:
            last = exc
            time.sleep(REJOIN_POLL_SECONDS)
    raise AssertionError(f"{VICTIM} did not rejoin within {REJOIN_TIMEOUT_SECONDS}s: {last}")
