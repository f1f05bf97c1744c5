"""The embedded node: it serves CQL, reports its start-up, and stops only what it started."""
from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from lab.errors import NodeDied, PortInUse
from lab.cluster.embedded.node import EmbeddedCluster, NodeOptions
from lab.cluster.embedded.process import is_ours

ROOT = Path(__file__).resolve().parents[2]
LAB = [sys.executable, "-m", "lab.cli"]


def test_node_serves_cql(connection):
    row = connection.execute("SELECT release_version FROM system.local").one()
    assert row[0].startswith("5.0."), row


def test_status_lists_running_node(lab_home):
    cluster = EmbeddedCluster(NodeOptions(home=lab_home))
    state = cluster.read_state()
    assert state is not None and state.nodes, "make test starts the node first"
    assert {n.pid for n in cluster.running()} == {n.pid for n in state.nodes}
    out = subprocess.run([*LAB, "node", "status", "--home", str(lab_home)], capture_output=True, text=True)
    assert out.returncode == 0 and "running" in out.stdout


def test_second_start_reuses_running_node(lab_home):
    out = subprocess.run([*LAB, "node", "start", "--home", str(lab_home)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "reusing" in out.stdout


def _running_address(lab_home):
    return EmbeddedCluster(NodeOptions(home=lab_home)).read_state().nodes[0].address


def test_port_taken_is_explained(tmp_path, lab_home):
    # the running embedded node holds <address>:9042; a second cluster in another home must say so
    cluster = EmbeddedCluster(NodeOptions(home=tmp_path, jmx_port_base=7399,
                                          first_address=_running_address(lab_home)))
    cluster.resolve_jars = lambda: 0.0  # jars are irrelevant: the port check comes first
    with pytest.raises(PortInUse) as info:
        cluster.start()
    assert info.value.port == 9042 and "already in use" in str(info.value)


def test_node_dying_during_start_shows_log_tail(tmp_path, lab_home):
    # a node whose heap cannot hold Cassandra dies during start-up: the error carries its log
    jars = EmbeddedCluster(NodeOptions(home=lab_home)).lib_dir
    home = tmp_path / "home"
    (home / "jars" / jars.parent.name).mkdir(parents=True)
    (home / "jars" / jars.parent.name / "lib").symlink_to(jars)
    cluster = EmbeddedCluster(NodeOptions(home=home, first_address="127.0.0.9", jmx_port_base=7499,
                                          heap="16M", timeout_seconds=120))
    with pytest.raises(NodeDied) as info:
        cluster.start()
    assert info.value.log_tail
    assert cluster.running() == []


def test_stop_leaves_no_process_of_ours(tmp_path, lab_home):
    """Start a second real node on another loopback address, stop it, check its PID is gone."""
    jars = EmbeddedCluster(NodeOptions(home=lab_home)).lib_dir
    home = tmp_path / "home"
    (home / "jars" / jars.parent.name).mkdir(parents=True)
    (home / "jars" / jars.parent.name / "lib").symlink_to(jars)
    out = subprocess.run([*LAB, "node", "start", "--home", str(home), "--address", _running_address(lab_home),
                          "--jmx-port", "7699", "--no-broker", "--no-redis"], capture_output=True, text=True)
    # the default address is taken by the main node: the CLI explains that
    assert out.returncode == 2 and "PortInUse" in out.stderr and "CQL port" in out.stderr
    cluster = EmbeddedCluster(NodeOptions(home=home, first_address="127.0.0.8", jmx_port_base=7599))
    state = cluster.start()
    pid = state.nodes[0].pid
    assert is_ours(pid, state.nodes[0].directory)
    with socket.create_connection(("127.0.0.8", 9042), timeout=5):
        pass
    out = subprocess.run([*LAB, "node", "stop", "--home", str(home)], capture_output=True, text=True)
    assert out.returncode == 0 and str(pid) in out.stdout
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split(")")[-1][:3]
    assert cluster.read_state() is None
