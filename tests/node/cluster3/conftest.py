"""The one 3-node embedded cluster every test in this folder shares.

Starting three Cassandra JVMs costs 36 s on a quiet 2-core machine and up to 160 s under load,
so the cluster is package-scoped: started by the first test here that asks for it, stopped by
its recorded PIDs after the last one (even when a test fails). It runs on its own loopback
addresses and JMX ports (127.0.0.41-43, JMX 7441-7443), never on the shared node's, with the
jars symlinked from the lab's home. File order matters: ``test_b_row_replicas`` measures on
the full cluster before ``test_node_failure`` kills and restarts node3.
"""
from __future__ import annotations

import time

import pytest

from lab.cluster.config import ClusterConfig
from lab.cluster.embedded.node import EmbeddedCluster, NodeOptions
from lab.cluster.embedded.process import is_ours

FIRST_ADDRESS = "127.0.0.41"
JMX_PORT_BASE = 7441
HEAP = "768M"
NODES = 3
START_FIGURES: dict[str, object] = {}


def pytest_collection_modifyitems(items) -> None:
    for item in items:
        if "cluster3" in item.fixturenames:
            item.add_marker(pytest.mark.cluster3)


@pytest.fixture(scope="package")
def cluster3(tmp_path_factory, lab_home):
    jars = EmbeddedCluster(NodeOptions(home=lab_home)).lib_dir
    home = tmp_path_factory.mktemp("cluster3") / "home"
    (home / "jars" / jars.parent.name).mkdir(parents=True)
    (home / "jars" / jars.parent.name / "lib").symlink_to(jars)
    cluster = EmbeddedCluster(NodeOptions(home=home, nodes=NODES, first_address=FIRST_ADDRESS,
                                          jmx_port_base=JMX_PORT_BASE, heap=HEAP))
    try:
        t0 = time.monotonic()
        state = cluster.start()
        START_FIGURES.update(nodes=[n.address for n in state.nodes], start_seconds=round(time.monotonic() - t0, 1))
        yield cluster
    finally:
        # a throwaway cluster: SIGKILL its recorded PIDs (a graceful stop costs ~20 s), then
        # stop() clears the record (and would SIGTERM anything still ours)
        state = cluster.read_state()
        for node in state.nodes if state else ():
            if is_ours(node.pid, node.directory):
                cluster.kill(node.name)
        cluster.stop()


@pytest.fixture(scope="package")
def cluster3_start(cluster3) -> dict:
    """How the shared cluster started: its nodes and the seconds it took."""
    return dict(START_FIGURES)


@pytest.fixture(scope="package")
def cluster3_config(cluster3):
    """``cluster3_config(**changes)``: RF 3 on the three nodes, QUORUM / SERIAL; the admin adapter
    finds their JMX ports through the cluster's home."""
    def make(**changes) -> ClusterConfig:
        values = dict(contact_points=tuple(n.address for n in cluster3.read_state().nodes), replication_factor=3,
                      read_consistency="QUORUM", write_consistency="QUORUM", serial_consistency="SERIAL",
                      lab_home=cluster3.home)
        return ClusterConfig(**{**values, **changes})
    return make
