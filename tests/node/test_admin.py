"""Admin adapter, request accounting and tracing against the real node."""
from __future__ import annotations

import pytest

from lab.cluster.tracing import traced


@pytest.fixture(scope="module")
def kv(connection, scratch_keyspace):
    connection.execute(f"CREATE TABLE {scratch_keyspace}.kv (p int, c int, v text, PRIMARY KEY (p, c)) "
                       "WITH compaction = {'class': 'SizeTieredCompactionStrategy', 'min_threshold': 32}")
    connection.wait_schema_agreement()
    return scratch_keyspace


def test_flush_raises_sstable_count_matching_data_files(connection, admin, kv):
    insert = connection.prepare(f"INSERT INTO {kv}.kv (p, c, v) VALUES (?, ?, ?)")
    before = admin.table_stats(kv, "kv").sstable_count
    for round_ in range(3):
        for i in range(50):
            connection.execute(insert, (round_, i, "x" * 100))
        admin.flush(kv, "kv")
    stats = admin.table_stats(kv, "kv")
    assert stats.sstable_count == before + 3
    files = admin.data_files(kv, "kv")
    assert files is not None and len(files) == stats.sstable_count
    assert stats.live_disk_bytes >= sum(f.stat().st_size for f in files) > 0
    admin.compact(kv, "kv")
    assert admin.table_stats(kv, "kv").sstable_count == 1
    assert len(admin.data_files(kv, "kv")) == 1


def test_request_counter_matches_statements_and_server(connection, admin, kv):
    insert = connection.prepare(f"INSERT INTO {kv}.kv (p, c, v) VALUES (?, ?, ?)")
    point = connection.prepare(f"SELECT v FROM {kv}.kv WHERE p = ? AND c = ?", key_columns=("p", "c"))
    slice_ = connection.prepare(f"SELECT v FROM {kv}.kv WHERE p = ? AND c >= ? AND c <= ?")
    in_read = connection.prepare(f"SELECT v FROM {kv}.kv WHERE p = ? AND c IN ?")
    lwt = connection.prepare(f"INSERT INTO {kv}.kv (p, c, v) VALUES (?, ?, ?) IF NOT EXISTS")
    server_before = admin.server_counts(kv, "kv")
    connection.counter.reset()
    for i in range(7):
        connection.execute(insert, (100, i, "y"))
    for i in range(5):
        connection.execute(point, (100, i))
    for _ in range(3):
        connection.execute(slice_, (100, 0, 6))
    for _ in range(2):
        connection.execute(in_read, (100, [1, 2, 3]))
    connection.execute(lwt, (101, 1, "z"))
    assert connection.counter.count("kv", "write") == 7
    assert connection.counter.count("kv", "point_read") == 5
    assert connection.counter.count("kv", "range_read") == 3
    assert connection.counter.count("kv", "in_read") == 2
    assert connection.counter.count("kv", "lwt") == 1
    assert connection.counter.reads("kv") == 10
    server_after = admin.server_counts(kv, "kv")
    # each single-partition read is one local read on the replica; an LWT reads once (Paxos)
    assert server_after.reads - server_before.reads in (10, 11)
    assert server_after.writes - server_before.writes == 8
    connection.counter.reset()
    assert connection.counter.snapshot() == {}


def test_tracing_reports_live_rows_of_known_partition(connection, kv):
    insert = connection.prepare(f"INSERT INTO {kv}.kv (p, c, v) VALUES (?, ?, ?)")
    for i in range(12):
        connection.execute(insert, (200, i, "t"))
    select = connection.prepare(f"SELECT * FROM {kv}.kv WHERE p = ?")
    rows, trace = traced(connection, select, (200,))
    assert len(rows) == 12
    assert trace.rows_read == 12
    assert trace.tombstones_read == 0


def test_admin_chosen_from_server(admin, connection):
    assert connection.server_kind() == "cassandra"
    assert admin.name == "cassandra"
    assert admin.server_version().startswith("5.0")


def test_a_nudge_drops_a_fully_expired_twcs_sstable_without_a_flush(connection, admin, scratch_keyspace):
    """A fully expired TWCS SSTable goes only when the strategy is asked for its next task; no
    flush follows here, so without the nudge it would wait for the node's own poll."""
    import time

    connection.execute(f"CREATE TABLE {scratch_keyspace}.twcs (p int, c int, v text, PRIMARY KEY (p, c)) "
                       "WITH gc_grace_seconds = 0 AND compaction = {'class': 'TimeWindowCompactionStrategy', "
                       "'compaction_window_unit': 'HOURS', 'compaction_window_size': '1', "
                       "'expired_sstable_check_frequency_seconds': '1'}")
    connection.wait_schema_agreement()
    insert = connection.prepare(f"INSERT INTO {scratch_keyspace}.twcs (p, c, v) VALUES (?, ?, ?) USING TTL 2")
    for i in range(20):
        connection.execute(insert, (1, i, "x" * 50))
    admin.flush(scratch_keyspace, "twcs")
    assert admin.table_stats(scratch_keyspace, "twcs").sstable_count == 1
    time.sleep(3.5)  # the TTL and one expired-check period past
    admin.nudge_compactions(scratch_keyspace, "twcs")
    deadline = time.monotonic() + 20
    while admin.table_stats(scratch_keyspace, "twcs").sstable_count and time.monotonic() < deadline:
        time.sleep(0.2)
    assert admin.table_stats(scratch_keyspace, "twcs").sstable_count == 0
