"""Node failure on a 3-node embedded cluster, RF 3, QUORUM / SERIAL (issue 7, item 3).

One cluster for the module (3-node start-up is the dominant cost), on its own loopback
addresses and JMX ports, with the jars symlinked from the lab's home; the fixture stops it
by its recorded PIDs even when a test fails. The load is lab.soak's mixed load (sends with
client retries, history, batch reads, reactions, recalls) on driver threads, bounded in time
and operations, audited by lab.audit.

(a) SIGKILL one node while the load runs: every acknowledged message is still readable
    exactly once, a replay of every acknowledged client_message_id returns the first ack
    (LWT dedup held through the failure), the node restarts and rejoins (UN in nodetool).
(b) The same with a node killed before the run starts.

Figures (acked, lost, duplicated, rejoin seconds ...) are printed at the end of the session
and written to results/tests-<run-id>/node_failure.{md,json}.
"""
from __future__ import annotations

import json
import threading
import time
import uuid

import pytest

from lab.config import ClusterConfig
from lab.node import EmbeddedCluster, NodeOptions
from lab.soak import Soak, SoakOptions
from lab.store import MessageStore

pytestmark = [pytest.mark.node, pytest.mark.cluster3, pytest.mark.slow]

FIRST_ADDRESS = "127.0.0.41"
JMX_PORT_BASE = 7441
HEAP = "768M"
LOAD_SECONDS = 12.0
KILL_AFTER_SECONDS = 4.0
LOAD_THREADS = 6
LOAD_MAX_OPERATIONS = 3000
AUDIT_INTERVAL_SECONDS = 5.0
REJOIN_TIMEOUT_SECONDS = 120.0
NODETOOL_POLL_SECONDS = 2.0

# lab.node starts nodes with a 1 s ring delay, which also bounds a joining node's gossip
# shadow round: on a loaded 2-core machine the seed can take longer than that to answer,
# and the joining node dies with "Unable to gossip with any peers". This cluster waits longer.
RING_DELAY_MS = 8000

FIGURES: dict[str, dict] = {}


class PatientCluster(EmbeddedCluster):
    def java_command(self, java, node_dir, jmx_port):
        return [f"-Dcassandra.ring_delay_ms={RING_DELAY_MS}" if arg.startswith("-Dcassandra.ring_delay_ms=") else arg
                for arg in super().java_command(java, node_dir, jmx_port)]


@pytest.fixture(scope="module")
def cluster3(tmp_path_factory, lab_home):
    jars = EmbeddedCluster(NodeOptions(home=lab_home)).lib_dir
    home = tmp_path_factory.mktemp("cluster3") / "home"
    (home / "jars" / jars.parent.name).mkdir(parents=True)
    (home / "jars" / jars.parent.name / "lib").symlink_to(jars)
    cluster = PatientCluster(NodeOptions(home=home, nodes=3, first_address=FIRST_ADDRESS,
                                         jmx_port_base=JMX_PORT_BASE, heap=HEAP))
    try:
        t0 = time.monotonic()
        state = cluster.start()
        FIGURES["cluster"] = {"nodes": [n.address for n in state.nodes], "start_seconds": round(time.monotonic() - t0, 1),
                              "replication_factor": 3, "consistency": "QUORUM", "serial_consistency": "SERIAL"}
        yield cluster
    finally:
        cluster.stop()  # the recorded PIDs only; also after a failed start or test


@pytest.fixture(scope="module")
def cluster_store(cluster3, tmp_path_factory):
    config = ClusterConfig(contact_points=tuple(n.address for n in cluster3.read_state().nodes),
                           keyspace=f"nf_{uuid.uuid4().hex[:10]}", replication_factor=3,
                           read_consistency="QUORUM", write_consistency="QUORUM", serial_consistency="SERIAL",
                           lab_home=cluster3.home)
    store = MessageStore.open(config, state_dir=tmp_path_factory.mktemp("nf-state"), node_id=41)
    store.create_schema()
    yield store
    store.close()


@pytest.fixture(scope="module", autouse=True)
def node_failure_report(report):
    yield
    lines = ["| scenario | node | acked | lost | duplicated | replay mismatches | replays probed | client-visible "
             "errors | sends replayed after an error | restart to CQL (s) | rejoin UN (s) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name in ("killed during load", "stopped before load"):
        f = FIGURES.get(name)
        if f is None:
            lines.append(f"| {name} | not run | | | | | | | | | |")
            continue
        lines.append(f"| {name} | {f['node']} | {f['acked']} | {f['lost']} | {f['duplicated']} | "
                     f"{f['replay_mismatches']} | {f['replays']['probed']} | {f['errors_total']} | "
                     f"{f['replayed_after_error']} | {f.get('restart_seconds')} | {f.get('rejoin_seconds')} |")
    cluster = FIGURES.get("cluster", {})
    lines += ["", f"3 nodes {cluster.get('nodes')}, RF 3, QUORUM / SERIAL; cluster start "
                  f"{cluster.get('start_seconds')} s. lost/duplicated: lab.audit over every acknowledged send "
                  "(history walk + partition read); replays: every acked client_message_id re-sent, each must "
                  "return the first ack."]
    report("node_failure.md", "node failure (3 nodes, RF 3)", "\n".join(lines) + "\n")
    report("node_failure.json", "node failure figures (json)", json.dumps(FIGURES, indent=2, default=str) + "\n")


def _node(cluster, name):
    return next(n for n in cluster.read_state().nodes if n.name == name)


def wait_rejoined(cluster, name: str, *, via: str) -> float:
    """Seconds until ``via`` reports ``name`` Up/Normal in nodetool status."""
    address = _node(cluster, name).address
    t0 = time.monotonic()
    while time.monotonic() - t0 < REJOIN_TIMEOUT_SECONDS:
        status = cluster.nodetool("status", node=_node(cluster, via), timeout=60)
        if any(line.split()[:2] == ["UN", address] for line in status.splitlines() if line.strip()):
            return time.monotonic() - t0
        time.sleep(NODETOOL_POLL_SECONDS)
    raise AssertionError(f"{name} ({address}) not UN within {REJOIN_TIMEOUT_SECONDS}s:\n{status}")


def run_scenario(cluster, store, *, name: str, node: str, kill_during: bool) -> dict:
    for n in cluster.read_state().nodes:  # a failed earlier scenario may have left a node down
        cluster.restart(n.name)
    soak = Soak(store, SoakOptions(duration_seconds=LOAD_SECONDS, threads=LOAD_THREADS,
                                   max_operations=LOAD_MAX_OPERATIONS, audit_interval_seconds=AUDIT_INTERVAL_SECONDS,
                                   conversations=8, seed=41))
    figures: dict = {"node": node}
    if not kill_during:
        cluster.kill(node)
    load = threading.Thread(target=lambda: figures.update(load=soak.run()), name="nf-load")
    t0 = time.monotonic()
    load.start()
    if kill_during:
        time.sleep(KILL_AFTER_SECONDS)
        cluster.kill(node)
        figures["killed_at_seconds"] = round(time.monotonic() - t0, 1)
    load.join()
    assert "load" in figures, "the load thread died"
    # with the node still down: every acked send replays its first ack, then the audit
    figures["replays"] = soak.replay_acked()
    final = soak.audit(final=True)
    totals = soak.totals()
    figures.update(acked=final.get("acked"), lost=final.get("lost"), duplicated=final.get("duplicated"),
                   hidden_by_head=final.get("hidden_by_head"), replay_mismatches=final.get("replay_mismatches"),
                   recalls_lost=final.get("recalls_lost"), errors_total=totals["errors_total"],
                   replayed_after_error=totals["replayed_after_error"], batch_missing=totals["batch_missing"],
                   operations=totals["operations"], audits=totals["audits"], alerts=totals["alerts"],
                   final_audit=final)
    t_restart = time.monotonic()
    cluster.restart(node)
    figures["restart_seconds"] = round(time.monotonic() - t_restart, 1)
    wait_rejoined(cluster, node, via="node1")
    figures["rejoin_seconds"] = round(time.monotonic() - t_restart, 1)
    after = soak.audit(final=True)  # all three nodes up again: still everything, once
    figures["after_rejoin"] = {k: after.get(k) for k in ("acked", "lost", "duplicated", "hidden_by_head", "error")}
    figures.pop("load")
    FIGURES[name] = figures
    return figures


def check(f: dict) -> None:
    assert "error" not in f["final_audit"], f["final_audit"]
    assert f["acked"] > 0
    assert (f["lost"], f["duplicated"], f["replay_mismatches"], f["recalls_lost"]) == (0, 0, 0, 0), f["final_audit"]
    assert f["hidden_by_head"] == 0 and f["batch_missing"] == 0
    assert f["replays"]["mismatches"] == 0 and f["replays"]["probed"] == f["acked"]
    assert (f["after_rejoin"]["acked"], f["after_rejoin"]["lost"], f["after_rejoin"]["duplicated"]) == \
           (f["acked"], 0, 0), f["after_rejoin"]


def test_node_killed_during_load(cluster3, cluster_store):
    f = run_scenario(cluster3, cluster_store, name="killed during load", node="node3", kill_during=True)
    print(json.dumps({k: v for k, v in f.items() if k not in ("audits", "operations")}, default=str))
    check(f)


def test_node_stopped_before_load(cluster3, cluster_store):
    f = run_scenario(cluster3, cluster_store, name="stopped before load", node="node2", kill_during=False)
    print(json.dumps({k: v for k, v in f.items() if k not in ("audits", "operations")}, default=str))
    check(f)
