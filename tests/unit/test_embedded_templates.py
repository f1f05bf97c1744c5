"""The embedded node's files come from templates: cassandra.yaml, logback.xml, the Maven POM (pure)."""
from __future__ import annotations

import stat
from pathlib import Path

import pytest

from lab.cluster.embedded import jars
from lab.cluster.embedded.node_config import NodeConfig, render_cassandra_yaml, write_node_config
from lab.errors import MavenError

ADDRESSES = ("127.0.0.41", "127.0.0.42", "127.0.0.43")


def _lines(text: str) -> set[str]:
    return {line.rstrip() for line in text.splitlines()}


def test_cassandra_yaml_fills_every_placeholder(tmp_path):
    text = render_cassandra_yaml(NodeConfig(address="127.0.0.42", index=1, addresses=ADDRESSES), tmp_path)
    assert "$" not in text
    lines = _lines(text)
    assert {"listen_address: 127.0.0.42", "rpc_address: 127.0.0.42", "auto_bootstrap: false",
            '      - seeds: "127.0.0.41:7000"', "native_transport_port: 9042",
            f"initial_token: {-(2**63) + 2**64 // 3}", f"  - {tmp_path / 'data' / 'data'}",
            f"commitlog_directory: {tmp_path / 'data' / 'commitlog'}",
            "authenticator: AllowAllAuthenticator"} <= lines
    assert "client_encryption_options:" not in lines
    seed = render_cassandra_yaml(NodeConfig(address="127.0.0.41", index=0, addresses=ADDRESSES), tmp_path)
    assert "auto_bootstrap: true" in _lines(seed) and f"initial_token: {-(2**63)}" in _lines(seed)


def test_auth_and_tls_fragments(tmp_path):
    keystore = tmp_path / "node-keystore.p12"
    node = NodeConfig(address="127.0.0.41", index=0, addresses=ADDRESSES[:1], auth=True, tls_keystore=keystore,
                      tls_keystore_password='pa"ss$word')
    assert "ss$word" not in repr(node)
    lines = _lines(render_cassandra_yaml(node, tmp_path))
    assert {"authenticator: PasswordAuthenticator", "authorizer: CassandraAuthorizer",
            "role_manager: CassandraRoleManager", "client_encryption_options:", "  enabled: true",
            f"  keystore: {keystore}", '  keystore_password: "pa\\"ss$word"', "  store_type: PKCS12"} <= lines


def test_written_config_is_owner_only(tmp_path):
    (tmp_path / "conf").mkdir()
    write_node_config(NodeConfig(address="127.0.0.41", index=0, addresses=ADDRESSES[:1]), tmp_path)
    assert stat.S_IMODE((tmp_path / "conf" / "cassandra.yaml").stat().st_mode) == 0o600
    logback = (tmp_path / "conf" / "logback.xml").read_text()
    assert f"<file>{tmp_path / 'logs' / 'system.log'}</file>" in logback and "%date{ISO8601}" in logback


def test_pom_names_every_coordinate():
    pom = jars.render_pom([jars.Coordinate.parse("org.apache.cassandra:cassandra-all:5.0.9"),
                           jars.Coordinate.parse("org.apache.kafka:kafka_2.13:3.9.1")])
    assert "$" not in pom
    for part in ("<groupId>org.apache.cassandra</groupId>", "<artifactId>cassandra-all</artifactId>",
                 "<version>5.0.9</version>", "<groupId>org.apache.kafka</groupId>",
                 "<artifactId>kafka_2.13</artifactId>", "<version>3.9.1</version>"):
        assert part in pom


@pytest.mark.parametrize("bad", ["cassandra-all", "a:b", "a:b:c:d", "a:b: ", "a b:c:d", ""])
def test_bad_coordinate_is_a_maven_error(bad, tmp_path):
    with pytest.raises(MavenError) as info:
        jars.resolve(bad, tmp_path / "lib")
    assert info.value.coordinate == bad
    assert not (tmp_path / "lib").exists()  # nothing written


def test_resolved_folder_is_not_resolved_again(tmp_path, monkeypatch):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / jars.MARKER).write_text("org.apache.cassandra:cassandra-all:5.0.9\n")
    monkeypatch.setenv("PATH", "/nonexistent")  # Maven is not even looked for
    assert jars.resolve("org.apache.cassandra:cassandra-all:5.0.9", lib) == 0.0


def test_templates_are_package_data():
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert '"**/templates/*"' in pyproject
    assert sorted(p.name for p in jars.TEMPLATES.iterdir()) == [
        "cassandra-auth-none.yaml", "cassandra-auth-password.yaml", "cassandra-client-tls.yaml", "cassandra.yaml",
        "logback-quiet.xml", "logback.xml", "maven-dependency.xml", "maven-pom.xml"]
