"""What the CLI says against the real node (no authenticator): credentials it never asked for are
a warning (and a preflight `warn`), and a process that used the driver ends as soon as it is
done, its libev loop thread ended by the lab's exit hook before the driver's 5 s join."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _lab(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lab.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120, env={**os.environ, **(env or {})})


def test_credentials_to_a_server_without_authenticator_are_a_warning(connection):
    assert not connection.credentials_unused  # the session's own connection gave none
    proc = _lab("info", env={"LAB_USERNAME": "someone", "LAB_PASSWORD": "pw-not-checked"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines()[0] == (
        "warning: credentials given (username 'someone') but the server at 127.0.0.1:9042 asked for none: it runs "
        "without an authenticator, so they were not checked")
    assert "pw-not-checked" not in proc.stderr + proc.stdout
    proc = _lab("preflight", env={"LAB_USERNAME": "someone", "LAB_PASSWORD": "pw-not-checked"})
    assert "WARN  auth/TLS" in proc.stdout and "PasswordAuthenticator" in proc.stdout, proc.stdout


def test_no_warning_without_credentials():
    proc = _lab("info")
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr


def test_the_driver_loop_has_ended_when_the_driver_cleans_up():
    """The driver's atexit cleanup joins its loop thread with a 5 s timeout, which it used to wait
    out (the loop's timer kept it alive). A hook registered before the lab connects runs after
    the lab's (atexit is LIFO) and before the driver's: it finds the loop thread ended."""
    script = textwrap.dedent("""
        import atexit, os, sys, threading
        import cassandra.io.libevreactor as libev
        from lab.cluster.config import load_config
        from lab.cluster.connection import connect

        def check():
            loop = libev._global_loop
            print("loop thread alive at the driver's cleanup:", loop._thread.is_alive())
        atexit.register(check)
        conn = connect(load_config(env=dict(os.environ)))
        conn.server_version()
        conn.close()
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "loop thread alive at the driver's cleanup: False" in proc.stdout, proc.stdout + proc.stderr


def test_lab_info_is_short_and_json_has_everything():
    import json

    proc = _lab("info")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 3 and lines[-1] == "every setting: lab info --json"
    assert lines[0].startswith("cassandra 5.0.") and " 1 node (127.0.0.1)" in lines[0] and "admin cassandra" in lines[0]
    assert lines[1].startswith("keyspace ") and "RF 1" in lines[1]
    data = json.loads(_lab("info", "--json").stdout)
    assert data["server"] == "cassandra" and data["config"]["port"] == 9042 and data["hosts"] == ["127.0.0.1"]
