"""Cluster configuration: precedence, validation and secrets."""
from __future__ import annotations

import subprocess
import sys

import pytest

from lab.cluster.accounting import classify
from lab.cluster.config import ClusterConfig, load_config
from lab.errors import ConfigError, ConnectError


def test_precedence_flags_over_env_over_toml(tmp_path):
    toml = tmp_path / "c.toml"
    toml.write_text('[cluster]\ncontact_points = ["10.0.0.1"]\nport = 9043\nkeyspace = "from_toml"\n')
    cfg = load_config(toml_path=toml, env={"LAB_PORT": "9044", "LAB_KEYSPACE": "from_env"},
                      flags={"keyspace": "from_flag"})
    assert cfg.contact_points == ("10.0.0.1",)
    assert cfg.port == 9044
    assert cfg.keyspace == "from_flag"


@pytest.mark.parametrize("flags, field", [
    ({"port": "0"}, "port"),
    ({"port": "nine"}, "port"),
    ({"contact_points": ""}, "contact_points"),
    ({"keyspace": "bad-name"}, "keyspace"),
    ({"read_consistency": "MOST"}, "read_consistency"),
    ({"admin": "mongo"}, "admin"),
    ({"username": "alice"}, "username"),
    ({"tls_ca_file": "/nonexistent/ca.pem"}, "tls_ca_file"),
    ({"replication_factor": "0"}, "replication_factor"),
])
def test_bad_configuration_is_a_clear_error(flags, field):
    with pytest.raises(ConfigError) as info:
        load_config(flags=flags)
    assert info.value.field == field


def test_unknown_toml_key_is_rejected(tmp_path):
    toml = tmp_path / "c.toml"
    toml.write_text('contact_point = "typo"\n')
    with pytest.raises(ConfigError, match="unknown keys"):
        load_config(toml_path=toml)


def test_password_never_in_repr_or_redacted():
    cfg = ClusterConfig(username="alice", password="s3cret-pw")
    assert "s3cret-pw" not in repr(cfg)
    assert "s3cret-pw" not in str(cfg.redacted())
    assert cfg.redacted()["password"] == "***"


def test_nothing_listening_is_a_connect_error():
    from lab.cluster.connection import connect

    with pytest.raises(ConnectError, match="is the node running"):
        connect(ClusterConfig(contact_points=("127.0.0.77",), connect_timeout_seconds=2))


@pytest.mark.spawns
def test_cli_reports_config_errors_without_traceback():
    import os

    out = subprocess.run([sys.executable, "-m", "lab.cli", "info", "--port", "70000"],
                         capture_output=True, text=True)
    assert out.returncode == 2  # the flag's range, checked by the CLI
    assert "'--port': 70000 is not in the range 1<=x<=65535" in out.stderr and "Traceback" not in out.stderr
    out = subprocess.run([sys.executable, "-m", "lab.cli", "info"], capture_output=True, text=True,
                         env={**os.environ, "LAB_PORT": "70000"})
    assert out.returncode == 2  # the same value from the environment: the config's own check
    assert "ConfigError" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("cql, table, kind", [
    ("SELECT * FROM ks.message_record WHERE a = ? AND conversation_seq IN ?", "message_record", "in_read"),
    ("SELECT * FROM message_index WHERE tenant_id = ? AND message_id = ?", "message_index", "point_read"),
    ("SELECT * FROM ks.message_record WHERE a = ? AND conversation_seq < ? LIMIT 10", "message_record", "range_read"),
    ("INSERT INTO ks.client_dedup (a) VALUES (?) IF NOT EXISTS", "client_dedup", "lwt"),
    ("UPDATE ks.conversation_head SET x = ? WHERE a = ? IF fencing_epoch = ?", "conversation_head", "lwt"),
    ("INSERT INTO ks.message_record (a) VALUES (?) USING TTL ?", "message_record", "write"),
    ("CREATE TABLE IF NOT EXISTS ks.kv (p int PRIMARY KEY)", "kv", "schema"),
])
def test_statement_classification(cql, table, kind):
    key = ("tenant_id", "message_id") if "message_index" in cql else ()
    info = classify(cql, key_columns=key)
    assert (info.table, info.kind) == (table, kind)


def test_scylla_settings_from_flags_env_and_toml(tmp_path):
    cfg = load_config(env={"LAB_REST_ADDRESSES": "10.0.0.11=127.0.0.1:10001, 10.0.0.12=127.0.0.1",
                           "LAB_TABLETS": "true", "LAB_DIALECT": "scylla"})
    assert cfg.rest_addresses == (("10.0.0.11", "127.0.0.1:10001"), ("10.0.0.12", "127.0.0.1"))
    assert cfg.tablets is True and cfg.dialect == "scylla"
    assert cfg.rest_endpoint("10.0.0.11") == ("127.0.0.1", 10001)
    assert cfg.rest_endpoint("10.0.0.12") == ("127.0.0.1", 10000)  # the default port
    assert cfg.rest_endpoint("10.0.0.13") == ("10.0.0.13", 10000)  # default: the node's own address
    assert cfg.redacted()["rest_addresses"] == {"10.0.0.11": "127.0.0.1:10001", "10.0.0.12": "127.0.0.1"}
    toml = tmp_path / "lab.toml"
    toml.write_text('[cluster]\nrest_addresses = {"10.0.0.11" = "127.0.0.1:10005"}\ntablets = false\n')
    cfg = load_config(toml_path=toml)
    assert cfg.rest_endpoint("10.0.0.11") == ("127.0.0.1", 10005) and cfg.tablets is False
    assert ClusterConfig().dialect == "auto" and ClusterConfig().tablets is False


@pytest.mark.parametrize("env", [{"LAB_REST_ADDRESSES": "10.0.0.11"}, {"LAB_REST_ADDRESSES": "10.0.0.11=h:99999"},
                                 {"LAB_REST_ADDRESSES": "=h:1"}, {"LAB_DIALECT": "mysql"},
                                 {"LAB_TABLETS": "maybe"}])
def test_bad_scylla_settings_are_config_errors(env):
    with pytest.raises(ConfigError):
        load_config(env=env)


def test_tcp_nodelay_defaults_on_and_reads_every_source(tmp_path):
    assert ClusterConfig().tcp_nodelay is True and load_config(env={}).tcp_nodelay is True
    assert load_config(env={"LAB_TCP_NODELAY": "false"}).tcp_nodelay is False
    assert load_config(flags={"tcp_nodelay": False}, env={"LAB_TCP_NODELAY": "true"}).tcp_nodelay is False
    toml = tmp_path / "lab.toml"
    toml.write_text("[cluster]\ntcp_nodelay = false\n")
    assert load_config(toml_path=toml).tcp_nodelay is False
    with pytest.raises(ConfigError, match="LAB_TCP_NODELAY"):
        load_config(env={"LAB_TCP_NODELAY": "maybe"})
    with pytest.raises(ConfigError, match="tcp_nodelay must be true or false"):
        ClusterConfig(tcp_nodelay="yes")
