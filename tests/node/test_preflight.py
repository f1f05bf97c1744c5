"""`lab preflight` against the real node: it passes there, and an unreachable REST port names the fix."""
from __future__ import annotations

import json
import socket
import subprocess
import sys

from lab.cluster.preflight import run_preflight

LAB = [sys.executable, "-m", "lab.cli"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_preflight_passes_on_the_embedded_node(cluster_config, lab_home):
    out = subprocess.run([*LAB, "preflight", "--home", str(lab_home), "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads(out.stdout)
    assert report["ok"]
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["server"]["value"].startswith("cassandra 5.0")
    assert checks["LWT"]["status"] == "ok" and checks["tablets"]["status"] == "ok"
    assert any(name.startswith("JMX ") and c["status"] == "ok" for name, c in checks.items())
    assert any(name.startswith("disk ") for name in checks)
    for name in ("nodes", "IN-list limit", "replication", "auth/TLS"):
        assert checks[name]["status"] in ("ok", "warn"), checks[name]


def test_preflight_leaves_no_scratch_keyspace(cluster_config, connection):
    assert run_preflight(cluster_config, connection=connection, in_list_limit=100).ok
    names = [r[0] for r in connection.execute("SELECT keyspace_name FROM system_schema.keyspaces")]
    assert not [n for n in names if n.startswith("lab_preflight_")]


def test_unreachable_rest_port_fails_and_names_the_fix(lab_home):
    port = _free_port()
    out = subprocess.run([*LAB, "preflight", "--home", str(lab_home), "--admin", "scylla", "--rest-port", str(port)],
                         capture_output=True, text=True)
    assert out.returncode == 1, out.stdout + out.stderr
    rest = [line for line in out.stdout.splitlines() if line.startswith("FAIL  REST ")]
    assert rest and f":{port}" in rest[0] and "refused" in rest[0]
    assert "api_address" in out.stdout and "rest_addresses" in out.stdout and "preflight: 1 check(s) failed" in out.stdout


def test_calibrate_stops_on_a_failed_preflight(lab_home, tmp_path):
    out = subprocess.run([*LAB, "calibrate", "--home", str(lab_home), "--notebooks", "none", "--admin", "scylla",
                          "--rest-port", str(_free_port()), "--results", str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 2 and "preflight failed" in out.stderr and "api_address" in out.stderr
    assert not any(tmp_path.iterdir())  # nothing measured, no run folder
