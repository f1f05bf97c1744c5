"""Contract tests of what the lab sends to ScyllaDB, since no Scylla server can run here.

The fixtures in ``tests/fixtures/scylla/`` hold facts read in scylladb/scylladb (each names its
file and commit): REST paths, methods and query parameters from ``api/api-doc/*.json``, trace
format strings, error texts, setting names. The admin adapter is driven through a transport that
checks every request against the REST fixture before answering it with a value of the declared
type; a request the fixture does not have fails the test. The dialect's CQL is asserted as text.
"""
from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest
from cassandra.policies import RetryPolicy
from cassandra.protocol import ServerError

from lab.cluster.admin.scylla import REST_CALLS, ScyllaAdmin, http_transport
from lab.cluster.config import ClusterConfig
from lab.cluster.driver_errors import LabRetryPolicy, translate
from lab.cluster.dialect import dialect_named
from lab.cluster.preflight import _TABLETS_SETTINGS
from lab.errors import AdminError, InListTooLong, LwtUnavailable, RequestError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "scylla"
COMMIT = "f4a4091ca28efb8c06c3422fdaac1d2f02e5614f"


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def fill(fmt: str, *values: object) -> str:
    assert fmt.count("{}") == len(values)
    return fmt.replace("{}", "{!s}").format(*values)


class ContractViolation(AssertionError):
    pass


class ContractTransport:
    """Checks each request against the REST fixture, records it, answers with the declared type."""

    def __init__(self, operations: list[dict], answers: dict[str, object] | None = None) -> None:
        self.operations = operations
        self.answers = answers or {}
        self.calls: list[tuple[str, str, str, dict]] = []

    def _operation(self, method: str, path: str) -> dict:
        for op in self.operations:
            pattern = "^" + re.sub(r"\\\{[a-z_]+\\\}", "[^/]+", re.escape(op["path"])) + "$"
            if op["method"] == method and re.match(pattern, path):
                return op
        raise ContractViolation(f"{method} {path} is not in Scylla's REST API fixture")

    def __call__(self, method: str, host: str, port: int, path: str, params: dict, timeout: float) -> object:
        op = self._operation(method, path)
        unknown = set(params) - set(op["query_params"])
        if unknown:
            raise ContractViolation(f"{method} {op['path']} has no query parameter {sorted(unknown)}")
        missing = [q for q, spec in op["query_params"].items() if spec["required"] and q not in params]
        if missing:
            raise ContractViolation(f"{method} {op['path']} needs {missing}")
        if "{name}" in op["path"] and ":" not in path.rsplit("/", 1)[-1]:
            raise ContractViolation(f"{path}: the table name must be keyspace:table")
        self.calls.append((f"{host}:{port}", method, op["path"], dict(params)))
        if op["path"] in self.answers:
            return self.answers[op["path"]]
        return {"long": 7, "string": "2026.2.0", "void": None, "array": []}[op["type"]]


NODES = ("10.0.0.11", "10.0.0.12", "10.0.0.13")


def scylla_admin(transport, **config) -> ScyllaAdmin:
    cfg = ClusterConfig(contact_points=NODES, admin="scylla", dialect="scylla", **config)
    return ScyllaAdmin(cfg, None, transport=transport)


# ---- the fixtures themselves -----------------------------------------------------------------
def test_every_fixture_names_its_source_file_and_commit():
    for path in FIXTURES.glob("*.json"):
        data = json.loads(path.read_text())
        assert data["source"]["repository"] == "scylladb/scylladb" and data["source"]["commit"] == COMMIT, path
        files = re.findall(r'"file": "([^"]+)"', path.read_text())
        assert files, f"{path.name} names no Scylla source file"
        assert all("/" in f or f.endswith((".cc", ".hh", ".g", ".yaml")) for f in files)


def test_rest_calls_of_the_adapter_are_in_the_api_doc():
    ops = {(o["method"], o["path"]): o for o in fixture("rest_api")["operations"]}
    for name, call in REST_CALLS.items():
        assert (call.method, call.path) in ops, f"{name}: {call.method} {call.path} is not in api/api-doc"
        assert set(call.query) <= set(ops[(call.method, call.path)]["query_params"]), name


# ---- the adapter through the contract --------------------------------------------------------
def test_admin_requests_follow_the_rest_api():
    ks = "lab_twcs_1"
    answers = {
        "/compaction_manager/metrics/pending_tasks_by_table": [
            {"ks": ks, "cf": "message_record_w1d", "task": 2}, {"ks": "system", "cf": "local", "task": 5}],
        "/compaction_manager/compactions": [
            {"id": "a", "ks": ks, "cf": "client_dedup_w1h", "completed": 1, "total": 2, "task_type": "COMPACTION",
             "unit": "keys"},
            {"id": "b", "ks": "system", "cf": "peers", "completed": 1, "total": 2, "task_type": "COMPACTION",
             "unit": "keys"}],
        "/compaction_manager/metrics/pending_tasks": 9,
    }
    transport = ContractTransport(fixture("rest_api")["operations"], answers)
    admin = scylla_admin(transport, rest_addresses=(("10.0.0.12", "127.0.0.1:10002"),))
    admin.flush(ks)
    admin.flush(ks, "message_record")
    admin.compact(ks, "message_record")
    stats = admin.table_stats(ks, "message_record")
    assert stats.sstable_count == 3 * 7 and stats.live_disk_bytes == 3 * 7  # summed over the three nodes
    assert admin.compactions_running(ks) == 3 * (2 + 1)  # this keyspace only, on each node
    assert admin.compactions_running() == 3 * (9 + 2)   # node-wide: every table's estimate
    assert all(c.ok for c in admin.check_nodes())
    endpoints = {endpoint for endpoint, *_ in transport.calls}
    assert endpoints == {"10.0.0.11:10000", "127.0.0.1:10002", "10.0.0.13:10000"}  # the tunnel is used
    assert ("10.0.0.11:10000", "POST", "/storage_service/keyspace_flush/{keyspace}", {"cf": "message_record"}) \
        in transport.calls
    assert {path for _, _, path, _ in transport.calls} == {c.path for c in REST_CALLS.values()}


def test_a_request_missing_from_the_fixture_fails():
    ops = [o for o in fixture("rest_api")["operations"] if o["path"] != "/column_family/major_compaction/{name}"]
    admin = scylla_admin(ContractTransport(ops))
    admin.flush("ks")  # still in the fixture
    with pytest.raises(ContractViolation, match="major_compaction"):
        admin.compact("ks", "t")


def test_refused_rest_port_names_api_address_and_the_tunnel():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # one node, reached through a "tunnel" on loopback that nothing answers
    config = ClusterConfig(contact_points=("10.0.0.11",), admin="scylla",
                           rest_addresses=(("10.0.0.11", f"127.0.0.1:{port}"),))
    admin = ScyllaAdmin(config, None, transport=http_transport)
    with pytest.raises(AdminError) as info:
        admin.flush("msglab")
    err = info.value
    assert err.refused and err.setting == "api_address" and (err.host, err.port) == ("127.0.0.1", port)
    assert "api_address" in str(err) and "rest_addresses" in str(err)
    [check] = admin.check_nodes()
    assert not check.ok and check.endpoint == f"127.0.0.1:{port}" and "refused" in check.detail
    assert "api_address" in check.fix and "rest_addresses" in check.fix


# ---- the dialect's CQL, as text --------------------------------------------------------------
def test_scylla_keyspace_is_nts_with_tablets_off():
    scylla = dialect_named("scylla")
    assert scylla.create_keyspace("msglab", {"class": "SimpleStrategy", "replication_factor": 3}) == (
        "CREATE KEYSPACE IF NOT EXISTS msglab WITH replication = {'class': 'NetworkTopologyStrategy', "
        "'replication_factor': 3} AND tablets = {'enabled': false}")
    assert scylla.create_keyspace("msglab", {"class": "NetworkTopologyStrategy", "dc1": 3}, tablets=True) == (
        "CREATE KEYSPACE IF NOT EXISTS msglab WITH replication = {'class': 'NetworkTopologyStrategy', "
        "'dc1': 3} AND tablets = {'enabled': true}")
    nts = ClusterConfig(replication_class="NetworkTopologyStrategy", replication_factor=3).replication_map()
    assert scylla.create_keyspace("msglab", nts) == (
        "CREATE KEYSPACE IF NOT EXISTS msglab WITH replication = {'class': 'NetworkTopologyStrategy', "
        "'replication_factor': 3} AND tablets = {'enabled': false}")
    assert "replication_factor" in fixture("cql")["nts_replication_factor"]["note"]
    cql = fixture("cql")["tablets_option"]
    assert cql["keys"] == ["enabled", "initial"] and "false" in cql["enabled_values"]


def test_cassandra_keyspace_text_is_unchanged():
    cassandra = dialect_named("cassandra")
    assert cassandra.create_keyspace("msglab", {"class": "SimpleStrategy", "replication_factor": 1}) == (
        "CREATE KEYSPACE IF NOT EXISTS msglab WITH replication = {'class': 'SimpleStrategy', "
        "'replication_factor': 1}")
    assert cassandra.compression_clause("none") == "compression = {'enabled': 'false'}"
    assert cassandra.sstable_read("SELECT * FROM ks.t WHERE p = ?") == "SELECT * FROM ks.t WHERE p = ?"
    assert cassandra.expiring_table_options() == ()


def test_scylla_compression_bypass_cache_and_tombstone_gc():
    scylla = dialect_named("scylla")
    facts = fixture("cql")
    assert scylla.compression_clause("lz4") == (
        "compression = {'sstable_compression': 'LZ4Compressor', 'chunk_length_in_kb': '16'}")
    assert scylla.compression_clause("zstd") == (
        "compression = {'sstable_compression': 'ZstdCompressor', 'chunk_length_in_kb': '16'}")
    assert scylla.compression_clause("none") == "compression = {'sstable_compression': ''}"
    for name in ("lz4", "zstd", "none"):
        options = scylla.compression(name)
        assert facts["compression"]["class_option"] in options and "class" not in options
        assert options["sstable_compression"] in facts["compression"]["compressors"] + [facts["compression"]["none"]]
    assert scylla.sstable_read("SELECT * FROM ks.t WHERE p = ? AND c IN ?") == (
        "SELECT * FROM ks.t WHERE p = ? AND c IN ? BYPASS CACHE")
    assert scylla.sstable_read("SELECT * FROM ks.t WHERE p = ? ALLOW FILTERING USING TIMEOUT 5s") == (
        "SELECT * FROM ks.t WHERE p = ? ALLOW FILTERING BYPASS CACHE USING TIMEOUT 5s")
    assert scylla.sstable_read("SELECT * FROM ks.t BYPASS CACHE") == "SELECT * FROM ks.t BYPASS CACHE"
    assert facts["bypass_cache"]["after"] == "ALLOW FILTERING" and facts["bypass_cache"]["before"] == "USING TIMEOUT"
    assert scylla.expiring_table_options() == ("tombstone_gc = {'mode': 'timeout'}",)
    assert "timeout" in facts["tombstone_gc"]["modes"] and facts["tombstone_gc"]["default_mode"] == "repair"


# ---- errors ----------------------------------------------------------------------------------
def _server_error(text: str) -> ServerError:
    return ServerError(0x0000, text, None)


@pytest.mark.parametrize("which,setting", [("in_list_clustering", "max_clustering_key_restrictions_per_query"),
                                           ("in_list_partition", "max_partition_key_restrictions_per_query")])
def test_in_limit_rejection_is_typed_and_not_retried(which, setting):
    text = fill(fixture("errors")["messages"][which]["format"], 101, 100)
    exc = _server_error(text)
    err = translate(exc, table="message_record", dialect=dialect_named("scylla"))
    assert isinstance(err, InListTooLong) and err.__cause__ is exc
    assert (err.size, err.limit, err.setting, err.table) == (101, 100, setting, "message_record")
    assert setting in fixture("config")["settings"]
    policy = LabRetryPolicy()
    policy.dialect = dialect_named("scylla")
    assert policy.on_request_error(None, 1, exc, 0) == (RetryPolicy.RETHROW, None)
    other = _server_error("java.lang.RuntimeException: something transient")
    assert policy.on_request_error(None, 1, other, 0) == (RetryPolicy.RETRY_NEXT_HOST, None)
    assert isinstance(translate(other, dialect=dialect_named("scylla")), RequestError)


def test_lwt_on_tablets_is_typed():
    text = fill(fixture("errors")["messages"]["lwt_with_tablets"]["format"], "msglab", "client_dedup")
    err = dialect_named("scylla").translate_error(Exception(text), table="client_dedup")
    assert isinstance(err, LwtUnavailable) and "tablets" in str(err)


def test_cassandra_guardrail_rejection_is_typed():
    # cassandra-all 5.0.9 db/guardrails/Guardrails: the in_select_cartesian_product fail message
    text = ("Guardrail in_select_cartesian_product violated: Aborting query because the cartesian product of the IN "
            "restrictions on ks.t produces 120 values, this exceeds fail threshold of 100.")
    err = dialect_named("cassandra").translate_error(Exception(text))
    assert isinstance(err, InListTooLong) and (err.size, err.limit) == (120, 100)


# ---- settings the lab reads ------------------------------------------------------------------
def test_setting_names_exist_in_scylla_config():
    settings = fixture("config")["settings"]
    for name in (*dialect_named("scylla").in_limit_settings, *_TABLETS_SETTINGS):
        assert name in settings, name
    assert settings["api_address"]["shipped"]["value"] == "127.0.0.1"
    assert settings["tablets_mode_for_new_keyspaces"]["shipped"]["value"] == "enabled"
    assert settings["max_clustering_key_restrictions_per_query"]["default"] == 100
    assert fixture("config")["virtual_tables"]["system.config"]["columns"][:1] == ["name"]
