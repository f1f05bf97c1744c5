"""A port that answers, but not in CQL, is said as such within the probe's few seconds, and a
bad setting names the variable or section it came from.

The services are the shared ones `lab node start` runs (Cassandra on 9042, Redis on 16379,
the Kafka broker on 19092) and, for a service that answers at once, a tiny HTTP-like server
on a free local port that replies to anything with an HTTP 400 (no fake of a CQL server: the
point is a server that is *not* one)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from lab.cluster.probe import CQL, NOT_CQL, PROBE_TIMEOUT_SECONDS, SILENT, probe_cql

ROOT = Path(__file__).resolve().parents[2]
REDIS_PORT = int(os.environ.get("LAB_REDIS_PORT", "16379"))
KAFKA_PORT = int(os.environ.get("LAB_KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:19092").split(",")[0].rsplit(":", 1)[1])


def _lab(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lab.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120, env={**os.environ, **(env or {})})


@pytest.fixture
def http_like_port():
    """A server that answers anything at once with an HTTP error (what made the driver say
    'does not support protocol version 72')."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(5)
                try:
                    conn.recv(64)
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(5)
    server.close()


def test_the_probe_tells_cql_from_other_services(cluster_config, http_like_port):
    assert probe_cql(cluster_config.contact_points[0], cluster_config.port).verdict == CQL
    for port in (REDIS_PORT, KAFKA_PORT):  # both wait for more bytes than a CQL request sends
        r = probe_cql("127.0.0.1", port)
        assert r.verdict == SILENT and r.seconds == PROBE_TIMEOUT_SECONDS, (port, r)
    r = probe_cql("127.0.0.1", http_like_port)
    assert r.verdict == NOT_CQL and r.looks_like == "an HTTP server"


def test_lab_info_on_redis_says_it_is_not_cql(cluster_config):
    proc = _lab("info", "--port", str(REDIS_PORT))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert (f"127.0.0.1:{REDIS_PORT} accepts connections but did not answer a CQL request within "
            f"{PROBE_TIMEOUT_SECONDS:g} s") in proc.stderr, proc.stderr
    assert "Timed out creating connection" not in proc.stderr  # the driver's 2 x 10 s were not waited for


def test_lab_info_on_an_http_server_names_it(http_like_port):
    proc = _lab("info", "--port", str(http_like_port))
    assert proc.returncode == 2, proc.stderr
    assert "answers, but not in CQL: its reply starts 'HTTP/1.1 400 Bad Request' (an HTTP server)" in proc.stderr
    assert "protocol version 72" not in proc.stderr


def test_a_bad_variable_is_named():
    proc = _lab("info", env={"LAB_PORT": "abc"})
    assert proc.returncode == 2 and "LAB_PORT=abc" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    proc = _lab("info", env={"LAB_PORT": "70000"})
    assert proc.returncode == 2 and "LAB_PORT=70000" in proc.stderr, proc.stderr


def test_a_misspelt_section_is_an_unknown_section_with_a_hint(tmp_path):
    path = tmp_path / "lab.toml"
    path.write_text("[clutser]\nport = 9042\n")
    proc = _lab("info", "--config", str(path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "unknown section [clutser]" in proc.stderr and "did you mean [cluster]?" in proc.stderr, proc.stderr
    path.write_text("[cluster]\nport = 9042\n[servics]\noutbox = 'local'\n")
    proc = _lab("info", "--config", str(path))
    assert proc.returncode == 2 and "unknown section [servics]" in proc.stderr and "[services]" in proc.stderr
