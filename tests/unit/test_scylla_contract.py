"""Contract tests of what the lab sends to ScyllaDB, since no Scylla server can run here.

The fixtures in ``tests/fixtures/scylla/`` hold facts read in scylladb/scylladb (each names its
file and commit): REST paths, methods and query parameters from ``api/api-doc/*.json``, trace
format strings, error texts, setting names, the partition-key IN and batch-size limits that the
grouped conversation_head requests must stay within (``head_groups.json``). The admin adapter is
driven through a transport that checks every request against the REST fixture before answering it
with a value of the declared type; a request the fixture does not have fails the test. The dialect's CQL is asserted as text.
"""
from __future__ import annotations

import inspect
import json
import re
import socket
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from cassandra.policies import RetryPolicy
from cassandra.protocol import ServerError

from lab.cluster.admin.scylla import REST_CALLS, ScyllaAdmin, http_transport
from lab.cluster.config import ClusterConfig
from lab.cluster.driver_errors import LabRetryPolicy, translate
from lab.cluster.dialect import dialect_named
from lab.cluster.preflight import _TABLETS_SETTINGS
from lab.constants import Constants
from lab.errors import AdminError, InListTooLong, LwtUnavailable, RequestError
from lab.store.crypto import NONCE_BYTES, TAG_BYTES, Encryptor, InMemoryKeyStore
from lab.store.rows.ids import U128_MAX, u128_to_blob
from lab.store.rows.records import ENVELOPE_FLAG_BYTES
from lab.store.rows.schema import table_specs
from lab.store.write.head import KEY_VERSION_BYTES, PREVIEW_MAX_BYTES, HeadUpdate, seal_preview
from lab.store.write.head_writer import HEAD_GROUP_PARTITIONS, HEAD_READ_GROUP_CQL, HEAD_WRITE_CQL, HeadWriter

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


# ---- grouped conversation_head requests (head_groups.json) ------------------------------------
# The head writer reads up to HEAD_GROUP_PARTITIONS heads of one tenant with one IN on the
# partition key and writes as many head UPDATEs in one UNLOGGED batch. Scylla refuses a
# partition-key IN whose cartesian product exceeds max_partition_key_restrictions_per_query, and
# measures a batch of more than one partition as the sum of its mutations' in-memory size
# (mutation_partition::external_memory_usage), which it only logs above
# batch_size_warn_threshold_in_kb and refuses above batch_size_fail_threshold_in_kb. It has no
# warning on the number of partitions an unlogged batch spans (Cassandra's
# unlogged_batch_across_partitions_warn_threshold).
#
# An upper bound of what Scylla measures for one head UPDATE, from the statement's columns:
# every SET column's value at its largest (bigint 8, int 4, uuid 16 bytes; the blobs as the
# writer builds them: the two u128 ids 16 bytes each, the sealed preview 4 + 12 + 1 + 128 + 16 =
# 161 bytes), plus per cell HEAD_CELL_OVERHEAD_BYTES for the atomic cell's header (flags, write
# timestamp, expiry and TTL: 17 bytes), the managed_bytes storage header and the cell's slot in
# the row's radix tree, plus HEAD_ROW_OVERHEAD_BYTES for what one row of one partition costs
# besides its cells (sizeof(rows_entry), the rows tree and radix tree nodes, the empty clustering
# key, the row marker). The partition key is counted too (cells and all), although Scylla leaves
# it out (it lives in the mutation, not in its mutation_partition). Scylla's own test of the fail
# threshold (head_groups.json "calibration") implies that one (int, 743-byte text) row measures
# more than 1023 bytes; the model gives that row more (test_head_write_bound_is_generous).
HEAD_CELL_OVERHEAD_BYTES = 128
HEAD_ROW_OVERHEAD_BYTES = 2048
HEAD_WRITE_BOUND_BYTES = 4096   # documented ceiling of head_write_bound(); 10 x it = 40 KiB
_FIXED_WIDTHS = {"bigint": 8, "int": 4, "uuid": 16}


def _largest_preview_blob() -> int:
    """preview_or_placeholder as the writer seals it (a real Encryptor), for a preview longer
    than the writer keeps, plaintext and E2EE."""
    ctx = SimpleNamespace(encryptor=Encryptor(InMemoryKeyStore()))
    sizes = []
    for e2ee in (False, True):
        update = HeadUpdate(tenant_id=uuid.uuid4(), conversation_id=uuid.uuid4(), conversation_seq=7,
                            message_id=U128_MAX, last_activity_id=U128_MAX, sender_id=uuid.uuid4(),
                            preview=b"\xff" * (4 * PREVIEW_MAX_BYTES), e2ee=e2ee)
        sizes.append(len(seal_preview(ctx, update)))
    return max(sizes)


def _head_blob_widths() -> dict[str, int]:
    return {"last_message_id": len(u128_to_blob(U128_MAX)), "last_activity_id": len(u128_to_blob(U128_MAX)),
            "preview_or_placeholder": _largest_preview_blob()}


def _head_statement_columns() -> tuple[list[str], list[str]]:
    """HEAD_WRITE_CQL's SET columns and WHERE (key) columns."""
    match = re.fullmatch(r"UPDATE \{ks\}\.conversation_head SET (.+) WHERE (.+)", HEAD_WRITE_CQL)
    assert match, HEAD_WRITE_CQL
    sets = [part.split("=")[0].strip() for part in match.group(1).split(",")]
    keys = [part.split("=")[0].strip() for part in match.group(2).split(" AND ")]
    return sets, keys


def mutation_bound(widths: list[int]) -> int:
    """The model's upper bound of one single-row partition's measured size, its cells' values
    ``widths`` bytes long."""
    return HEAD_ROW_OVERHEAD_BYTES + sum(widths) + len(widths) * HEAD_CELL_OVERHEAD_BYTES


def head_write_bound() -> int:
    types = dict(table_specs(Constants.appendix_b())["conversation_head"].columns)
    blobs = _head_blob_widths()
    sets, keys = _head_statement_columns()
    widths = []
    for column in (*sets, *keys):
        if types[column] == "blob":
            assert column in blobs, f"{column}: a blob the bound does not size"
            widths.append(blobs[column])
        else:
            widths.append(_FIXED_WIDTHS[types[column]])
    return mutation_bound(widths)


def test_head_group_read_is_within_scylla_partition_key_in_limit():
    facts = fixture("head_groups")["partition_key_in"]
    limit = facts["setting"]["default"]
    assert facts["setting"]["name"] == "max_partition_key_restrictions_per_query"
    assert limit == fixture("config")["settings"]["max_partition_key_restrictions_per_query"]["default"]
    assert facts["counted"]["what"] == "cartesian_product" and facts["check"]["comparison"] == "size > limit"
    # the grouped read: EQ on tenant_id (a list of one), IN on conversation_id
    head = table_specs(Constants.appendix_b())["conversation_head"]
    where = HEAD_READ_GROUP_CQL.split(" WHERE ", 1)[1]
    relations = dict(re.fullmatch(r"(\w+) (=|IN) \?", part).groups() for part in where.split(" AND "))
    assert relations == {"tenant_id": "=", "conversation_id": "IN"}
    assert tuple(relations) == head.partition_key
    product = 1 * HEAD_GROUP_PARTITIONS
    assert not product > limit, f"{product} partition keys per IN read; Scylla refuses more than {limit}"
    # the writer's default group is the constant
    default = inspect.signature(HeadWriter).parameters["group_partitions"].default
    assert default == HEAD_GROUP_PARTITIONS
    # at the limit's edge Scylla's refusal is the lab's typed InListTooLong (not retried)
    text = fill(facts["error"]["format"], limit + 1, limit)
    err = translate(_server_error(text), table="conversation_head", dialect=dialect_named("scylla"))
    assert isinstance(err, InListTooLong) and err.setting == facts["setting"]["name"]


def test_head_write_bound_is_generous():
    sets, keys = _head_statement_columns()
    assert keys == ["tenant_id", "conversation_id"] and len(sets) == 8
    preview = _largest_preview_blob()
    assert preview == KEY_VERSION_BYTES + NONCE_BYTES + ENVELOPE_FLAG_BYTES + PREVIEW_MAX_BYTES + TAG_BYTES == 161
    bound = head_write_bound()
    # 4 bigints, the 2 ids, the sender uuid, the preview (241 bytes in 8 cells), the 2 uuid keys
    # (32 bytes in 2 cells): 2048 + 273 + 10 x 128 = 3601 bytes
    values = 4 * 8 + 2 * 16 + 16 + preview + 2 * 16
    assert bound == HEAD_ROW_OVERHEAD_BYTES + values + 10 * HEAD_CELL_OVERHEAD_BYTES == 3601
    assert bound <= HEAD_WRITE_BOUND_BYTES
    # Scylla's own fail-threshold test: 1025 rows of (int k, 743-byte text) exceed 1024 KiB
    calibration = fixture("head_groups")["batch_size"]["calibration"]
    fail_bytes = fixture("head_groups")["batch_size"]["settings"]["batch_size_fail_threshold_in_kb"]["default"] * 1024
    least_per_row = fail_bytes // calibration["rows"] + 1
    assert mutation_bound([4, 743]) > least_per_row  # the model is above what Scylla's test shows


def test_head_group_batch_stays_below_scylla_batch_warn_threshold():
    facts = fixture("head_groups")["batch_size"]
    check = facts["check"]
    assert check["measured"]["what"].startswith("sum over the batch's mutations")
    assert check["skipped_when"]["condition"] == "mutations <= 1" and check["comparison"]["op"] == "size > threshold"
    warn = facts["settings"]["batch_size_warn_threshold_in_kb"]["default"] * 1024
    fail = facts["settings"]["batch_size_fail_threshold_in_kb"]["default"] * 1024
    assert facts["settings"]["batch_size_warn_threshold_in_kb"]["shipped"]["value"] * 1024 == warn
    group = HEAD_GROUP_PARTITIONS * head_write_bound()
    assert group < warn < fail, f"a group of {HEAD_GROUP_PARTITIONS} head writes may measure {group} bytes > {warn}"
    assert HEAD_GROUP_PARTITIONS * HEAD_WRITE_BOUND_BYTES < warn
    # the warning would only reach Scylla's log; the fail is an InvalidRequest "Batch too large"
    assert facts["warn"]["sent_to_client"] is False and facts["fail"]["message"] == "Batch too large"


def test_scylla_has_no_unlogged_batch_partition_count_warning():
    facts = fixture("head_groups")["unlogged_partition_count"]
    assert facts["cassandra_setting"] == "unlogged_batch_across_partitions_warn_threshold"
    assert facts["in_scylla_config"] is False and facts["warning"] is None
    assert facts["cassandra_setting"] not in fixture("config")["settings"]
    assert facts["only_occurrence"]["file"].startswith("test/")
