"""Schema changes get their own timeout (lab.cluster.connection.SCHEMA_TIMEOUT_SECONDS).

A DROP KEYSPACE on the shared node at load average 15 ran past the 20 s request timeout and
failed a test's teardown; a schema change is never what a run measures, so the request timeout
(which is) must not cut it short. Here the request timeout is 1 ms: no CREATE/DROP finishes in
that, so without the schema floor every statement below raises RequestTimeout."""
from __future__ import annotations

from lab.cluster.connection import Connection
from lab.results.scratch import scratch_name


def test_schema_changes_outlive_a_tiny_request_timeout(cluster_config):
    config = cluster_config.replace(request_timeout_seconds=0.001)
    name = scratch_name("schema_timeout")
    with Connection(config) as conn:
        conn.create_keyspace(name)
        conn.execute(f"CREATE TABLE {name}.t (k int PRIMARY KEY, v int)")
        conn.execute(f"TRUNCATE {name}.t")
        conn.execute(f"DROP KEYSPACE {name}")
        rows = conn.execute("SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = %s",
                            (name,), timeout=20.0)
        assert list(rows) == []
