"""The connection picks the server's dialect, and the dialect's CQL runs on the real node."""
from __future__ import annotations

import pytest

from lab.cluster.connection import connect
from lab.errors import ConfigError


def test_dialect_is_chosen_from_the_server(connection):
    assert connection.server_kind() == "cassandra"
    assert connection.dialect.name == "cassandra"
    assert connection.retry_policy.dialect is connection.dialect


def test_dialect_can_be_forced(cluster_config):
    with connect(cluster_config.replace(dialect="scylla")) as conn:
        assert conn.server_kind() == "cassandra" and conn.dialect.name == "scylla"


def test_keyspace_and_compression_text_run_on_cassandra(connection):
    ks = "t_dialect_ks"
    connection.execute(f"DROP KEYSPACE IF EXISTS {ks}")
    try:
        connection.create_keyspace(ks)
        row = connection.execute("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s",
                                 (ks,)).one()
        assert dict(row[0])["replication_factor"] == str(connection.config.replication_factor)
        connection.execute(f"CREATE TABLE {ks}.t (p int, c int, v text, PRIMARY KEY (p, c))")
        for name in ("lz4", "zstd", "none"):
            connection.execute(f"ALTER TABLE {ks}.t WITH {connection.dialect.compression_clause(name)}")
        stmt = connection.prepare(connection.dialect.sstable_read(f"SELECT v FROM {ks}.t WHERE p = ?"))
        assert list(connection.execute(stmt, (1,))) == []
        assert connection.placement(connection.prepare(f"INSERT INTO {ks}.t (p, c, v) VALUES (?, ?, ?)"),
                                    (1, 1, "x")) == [(str(connection.hosts()[0].address), 0)]
    finally:
        connection.execute(f"DROP KEYSPACE IF EXISTS {ks}")


def test_tablets_on_cassandra_is_a_config_error(connection):
    with pytest.raises(ConfigError, match="tablets"):
        connection.dialect.create_keyspace("x", connection.config.replication_map(), tablets=True)


def test_network_topology_without_local_dc_expands_to_the_datacenters(cluster_config):
    config = cluster_config.replace(replication_class="NetworkTopologyStrategy", local_dc=None)
    assert config.replication_map() == {"class": "NetworkTopologyStrategy",
                                        "replication_factor": config.replication_factor}
    ks = "t_dialect_nts"
    with connect(config) as conn:
        conn.execute(f"DROP KEYSPACE IF EXISTS {ks}")
        try:
            conn.create_keyspace(ks)
            row = conn.execute("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s", (ks,)).one()
            dcs = {h.datacenter for h in conn.hosts()}
            assert {k: v for k, v in dict(row[0]).items() if k != "class"} == {
                dc: str(config.replication_factor) for dc in dcs}
        finally:
            conn.execute(f"DROP KEYSPACE IF EXISTS {ks}")
