"""The persistent JMX helper behind the Cassandra admin adapter reads what nodetool reads."""
from __future__ import annotations

import json

import pytest

from lab.cluster.admin.cassandra import CassandraAdmin
from lab.errors import AdminError
from lab.cluster.admin.jmx import JmxShell

pytestmark = pytest.mark.node


@pytest.fixture(scope="module")
def cassandra_admin(admin):
    if not isinstance(admin, CassandraAdmin):
        pytest.skip("the JMX helper serves Cassandra nodes")
    return admin


@pytest.fixture(scope="module")
def table(connection, scratch_keyspace, cassandra_admin):
    connection.execute(f"CREATE TABLE {scratch_keyspace}.j (p int, c int, v text, PRIMARY KEY (p, c))")
    connection.wait_schema_agreement()
    insert = connection.prepare(f"INSERT INTO {scratch_keyspace}.j (p, c, v) VALUES (?, ?, ?)")
    for flush in range(2):
        for i in range(40):
            connection.execute(insert, (i % 4, i + 100 * flush, "v" * 200))
        cassandra_admin.flush(scratch_keyspace, "j")
    return scratch_keyspace, "j"


def test_helper_stats_equal_nodetool_tablestats(cassandra_admin, table):
    ks, t = table
    _, host, port, _ = cassandra_admin._live_targets()[0]
    shell = cassandra_admin._shell(host, port)
    assert shell is not None and shell.alive
    via_jmx = shell.stats(ks, t)
    raw = cassandra_admin._nodetool(host, port, "tablestats", "-F", "json", f"{ks}.{t}")
    tablestats = json.loads(raw[raw.index("{"):])[ks]["tables"][t]
    assert via_jmx["sstable_count"] == int(tablestats["sstable_count"]) == 2
    assert via_jmx["live_disk_bytes"] == int(tablestats["space_used_live"])
    assert via_jmx["total_disk_bytes"] == int(tablestats["space_used_total"])
    assert via_jmx["local_writes"] == int(tablestats["local_write_count"])
    assert via_jmx["partitions_estimate"] == int(tablestats["number_of_partitions_estimate"])
    stats = cassandra_admin.table_stats(ks, t)
    assert stats.sstable_count == 2 and stats.live_disk_bytes == via_jmx["live_disk_bytes"]


def test_compact_waits_until_files_match_and_compactions_settle(cassandra_admin, table):
    ks, t = table
    cassandra_admin.compact(ks, t)
    assert cassandra_admin.wait_for_compactions(timeout=60)
    assert cassandra_admin.compactions_running() == 0
    assert cassandra_admin.table_stats(ks, t).sstable_count == 1
    files = cassandra_admin.data_files(ks, t)
    assert files is None or len(files) == 1


def test_helper_errors_are_admin_errors_and_it_ends_with_its_stdin(cassandra_admin, lab_home):
    _, host, port, _ = cassandra_admin._live_targets()[0]
    shell = JmxShell(host, port, work_dir=lab_home / "jmxshell")
    with pytest.raises(AdminError):
        shell.stats("no_such_keyspace", "no_such_table")
    assert shell.request("ping") == {}
    shell.close()
    assert not shell.alive


def test_twcs_settles_after_the_check_a_flush_queued(cassandra_admin, connection, scratch_keyspace, table):
    """Four flushes into one window: the fourth makes a compaction due; once settled, it has run."""
    connection.execute(f"CREATE TABLE {scratch_keyspace}.tw (p int, c int, PRIMARY KEY (p, c)) WITH compaction = "
                       "{'class': 'TimeWindowCompactionStrategy', 'compaction_window_unit': 'DAYS', "
                       "'compaction_window_size': '1'}")
    connection.wait_schema_agreement()
    insert = connection.prepare(f"INSERT INTO {scratch_keyspace}.tw (p, c) VALUES (?, ?) USING TIMESTAMP ?")
    day_us = 86_400 * 1_000_000
    for i in range(4):
        connection.execute(insert, (1, i, 10 * day_us + i))  # one day window, long past
        cassandra_admin.flush(scratch_keyspace, "tw")
        assert cassandra_admin.wait_for_twcs_settled(scratch_keyspace, ["tw"], timeout=300)
        (check,) = cassandra_admin.twcs_checks(scratch_keyspace, "tw")
        assert check.settled and check.buckets == ((i + 1,) if i < 3 else (1,))
        assert cassandra_admin.table_stats(scratch_keyspace, "tw").sstable_count == (i + 1 if i < 3 else 1)
    with pytest.raises(AdminError, match="not a TWCS table"):
        cassandra_admin.wait_for_twcs_settled(*table[:1], [table[1]], timeout=300)  # size-tiered
