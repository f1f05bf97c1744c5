"""Auth and TLS: a second, secure embedded node (PasswordAuthenticator + TLS on the CQL port)
started for this module on its own loopback address, reached with a role and a CA file; the
role's password shows up nowhere (reprs, CLI output, results, logs, errors, accounting)."""
from __future__ import annotations

import json
import logging
import secrets
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from awkward_password import PASSWORD, SECRET_BITS
from lab.cluster.config import ClusterConfig, load_config
from lab.cluster.connection import connect
from lab.errors import ConnectError, LabError, RequestError
from lab.cluster.embedded.security import (KEYSTORE_FILENAME, KEYSTORE_PASSWORD_FILENAME, TLS_DIRNAME, create_role,
                                           generate_tls_material)
from secure_node import env_without_lab, secure_node

ROOT = Path(__file__).resolve().parents[2]
LAB = [sys.executable, "-m", "lab.cli"]
ADDRESS = "127.0.0.31"
JMX_PORT = 7831
ROLE = "labrole"


def _assert_secret_free(text: str, where: str) -> None:
    for bit in SECRET_BITS:
        assert bit not in text, f"a piece of the password appears in {where}"


# ---- the secure node --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def secure(tmp_path_factory, lab_home):
    """`lab node start --secure` in a fresh home; stopped by its recorded PID afterwards."""
    with secure_node(tmp_path_factory.mktemp("secure"), lab_home, address=ADDRESS, jmx_port=JMX_PORT,
                     role=ROLE) as node:
        yield {"home": node.home, "ca": node.ca, "start_output": node.start_output, "cluster": node.cluster,
               "node": node}


def _config(secure, **kw) -> ClusterConfig:
    return secure["node"].config(**kw)


def test_start_prints_how_to_connect_but_not_the_password(secure):
    out = secure["start_output"]
    assert str(secure["ca"]) in out and ROLE in out and "LAB_PASSWORD" in out
    _assert_secret_free(out, "the node start output")
    state = secure["cluster"].read_state()
    assert state.auth and state.tls and state.contact_points == (ADDRESS,)


def test_secrets_on_disk_are_owner_only(secure):
    tls = secure["home"] / TLS_DIRNAME
    node_conf = Path(secure["cluster"].read_state().nodes[0].directory) / "conf" / "cassandra.yaml"
    for path in (tls / KEYSTORE_FILENAME, tls / KEYSTORE_PASSWORD_FILENAME, node_conf):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert "store_type: PKCS12" in node_conf.read_text()


def test_no_credentials_is_refused(secure, caplog):
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ConnectError, match="authentication"):
        connect(_config(secure, username=None, password=None))


def test_wrong_password_is_refused_without_echoing_it(secure, caplog):
    caplog.set_level(logging.DEBUG)
    wrong = "wrong-" + secrets.token_hex(6)
    with pytest.raises(ConnectError, match="authentication") as info:
        connect(_config(secure, password=wrong))
    err = info.value
    for text in (str(err), repr(err), repr(err.facts), str(err.__cause__), repr(err.__cause__), caplog.text):
        assert wrong not in text


def test_plain_connection_is_refused(secure):
    with pytest.raises(ConnectError, match="TLS") as info:
        connect(_config(secure, tls_ca_file=None))
    _assert_secret_free(str(info.value) + repr(info.value.__cause__), "a failed connect")


def test_another_ca_is_refused(secure, tmp_path):
    other = generate_tls_material(tmp_path, [ADDRESS])
    with pytest.raises(ConnectError, match="TLS|certificate"):
        connect(_config(secure, tls_ca_file=other.ca_file))


def test_role_with_ca_file_reads_and_writes(secure, caplog):
    caplog.set_level(logging.DEBUG)
    config = _config(secure, tls_verify_hostname=True)  # the certificate names the node's IP
    with connect(config) as conn:
        conn.execute("CREATE KEYSPACE sec_ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        conn.execute("CREATE TABLE sec_ks.t (k int PRIMARY KEY, v text)")
        insert = conn.prepare("INSERT INTO sec_ks.t (k, v) VALUES (?, ?)")
        conn.execute(insert, (1, "hello"))
        row = conn.execute(conn.prepare("SELECT v FROM sec_ks.t WHERE k = ?", key_columns=("k",)), (1,)).one()
        assert row.v == "hello"
        with pytest.raises(RequestError, match="Unauthorized"):  # a login role, not a superuser
            conn.execute("SELECT * FROM system_auth.roles")
        conn.execute("DROP KEYSPACE sec_ks")
        state = "\n".join([repr(config), json.dumps(config.redacted()), repr(vars(conn)),
                           repr(conn.counter.snapshot()), repr(list(conn._prepared)), caplog.text])
    assert config.redacted()["password"] == "***"
    _assert_secret_free(state, "config / connection / accounting state or client logs")


def test_create_role_keeps_the_password_out_of_state_and_errors(secure, caplog):
    caplog.set_level(logging.DEBUG)
    other = f"o'{secrets.token_hex(6)}' FROM tbl_{secrets.token_hex(4)}"
    admin = _config(secure, username="cassandra", password="cassandra")
    with connect(admin) as conn:
        create_role(conn, "second", other, keyspace="msglab")
        state = repr(conn.counter.snapshot()) + repr(list(conn._prepared)) + repr(vars(conn))
    with connect(_config(secure, username="second", password=other)) as conn:
        # not a superuser: creating a role is refused, and the error does not quote the password
        with pytest.raises(LabError) as info:
            create_role(conn, "third", other)
        state += repr(conn.counter.snapshot()) + str(info.value) + repr(info.value.facts)
        assert info.value.__cause__ is None
    for bit in (other, other.split("'")[1], other.rsplit(" ", 1)[1]):
        assert bit not in state + caplog.text


def test_lab_info_and_calibrate_never_show_the_password(secure, tmp_path):
    env = env_without_lab(LAB_CONTACT_POINTS=ADDRESS, LAB_USERNAME=ROLE, LAB_PASSWORD=PASSWORD,
               LAB_TLS_CA_FILE=str(secure["ca"]))
    home = ["--home", str(secure["home"])]
    info = subprocess.run([*LAB, "info", "--json", *home], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert info.returncode == 0, info.stderr[-2000:]
    _assert_secret_free(info.stdout + info.stderr, "`lab info` output")
    shown = json.loads(info.stdout)
    assert shown["config"]["password"] == "***" and shown["version"].startswith("5.0.")
    results = tmp_path / "results"
    # environment + round trip: the part of a calibration run that records the cluster config
    cal = subprocess.run([*LAB, "calibrate", "--quick", "--notebooks", "none", "--no-progress",
                          "--results", str(results), *home],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert cal.returncode == 0, cal.stderr[-2000:]
    _assert_secret_free(cal.stdout + cal.stderr, "`lab calibrate` output")
    files = [p for p in results.rglob("*") if p.is_file()]
    assert any(p.name == "calibration.json" for p in files)
    for path in files:
        _assert_secret_free(path.read_text(errors="replace"), str(path))


def test_config_from_env_masks_the_password(secure):
    config = load_config(env={"LAB_USERNAME": ROLE, "LAB_PASSWORD": PASSWORD,
                              "LAB_TLS_CA_FILE": str(secure["ca"])})
    _assert_secret_free(repr(config) + json.dumps(config.redacted()) + str(config), "config reprs")


def test_node_logs_never_hold_a_secret(secure):
    # last: after every login, role change and failure above
    node = secure["cluster"].read_state().nodes[0]
    keystore_password = (secure["home"] / TLS_DIRNAME / KEYSTORE_PASSWORD_FILENAME).read_text().strip()
    for path in Path(node.directory, "logs").glob("*.log"):
        text = path.read_text(errors="replace")
        _assert_secret_free(text, str(path))
        assert keystore_password not in text, path
