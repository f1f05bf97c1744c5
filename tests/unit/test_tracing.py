"""The trace parsers read both servers' real trace texts (pure).

Cassandra's texts are the ``cassandra-all`` 5.0.9 format strings (``ReadCommand``,
``SinglePartitionReadCommand``); Scylla's are its format strings from
``tests/fixtures/scylla/traces.json`` filled with numbers."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.cluster.dialect import dialect_named
from lab.cluster.tracing import summarize

FIXTURE = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "scylla" / "traces.json").read_text())
FORMATS = {name: f["format"] for name, f in FIXTURE["formats"].items()}


def fill(fmt: str, *values: object) -> str:
    assert fmt.count("{}") == len(values), (fmt, values)
    return fmt.replace("{}", "{!s}").format(*values)


def test_cassandra_texts():
    events = ["Merged data from memtables and 2 sstables", "Read 7 live rows and 3 tombstone cells",
              "Read 1 live rows and 0 tombstone cells for query SELECT * FROM ks.t WHERE p = 1 LIMIT 5000"]
    c = summarize(events, dialect=dialect_named("cassandra"))
    assert (c.rows_read, c.tombstones_read, c.sstables_touched) == (8, 3, 2)
    assert c.events == tuple(events)


def test_scylla_single_partition_page_counts_dead_cells():
    # partitions (total, live, dead), static rows, clustering rows, range tombstones, cells (total, live, dead)
    page = fill(FORMATS["page_stats_single_partition"], 1, 1, 0, 0, 0, 0, 9, 9, 2, 1, 60, 54, 6)
    key = fill(FORMATS["reading_key"], "{key: pk{000400000001}, token: -4069959284402364209}",
               "/var/lib/scylla/data/ks/t-5e3b/me-3gp2_0xrk_1s2nk2bfcxqm5b1c8u-big-Data.db")
    s = summarize([key, key, page], dialect=dialect_named("scylla"))
    assert s.rows_read == 9
    assert s.tombstones_read == 2 + 1 + 6  # dead rows + range tombstones + dead cells (null-bound columns)
    assert s.sstables_touched == 1  # the same SSTable named twice


def test_scylla_range_scan_page_and_replicas_add_up():
    scan = fill(FORMATS["page_stats_range_scan"], 3, 2, 1, 0, 0, 0, 40, 38, 2, 0)
    other = fill(FORMATS["page_stats_range_scan"], 2, 2, 0, 1, 1, 0, 10, 10, 0, 4)
    ranges = [fill(FORMATS["reading_partition_range"], "{(-inf, +inf)}", f"/data/ks/t-1/me-{i}-big-Data.db")
              for i in (1, 2)]
    s = summarize([scan, other, *ranges], dialect=dialect_named("scylla"))
    assert s.rows_read == 38 + 10 + 1  # clustering rows plus the live static row
    assert s.tombstones_read == (1 + 2) + 4  # dead partition + dead rows; range tombstones of the other page
    assert s.sstables_touched == 2


def test_each_dialect_reads_only_its_own_server():
    cassandra_text = "Read 7 live rows and 3 tombstone cells"
    scylla_text = fill(FORMATS["page_stats_range_scan"], 1, 1, 0, 0, 0, 0, 5, 5, 0, 0)
    assert not dialect_named("scylla").trace_counts([cassandra_text]).has_read_stats
    assert not dialect_named("cassandra").trace_counts([scylla_text]).has_read_stats


def test_trace_wait_covers_scylla_write_period():
    period = FIXTURE["write_period_seconds"]["value"]
    assert dialect_named("scylla").trace_settle_seconds > period
    assert dialect_named("cassandra").trace_settle_seconds < 1.0


@pytest.mark.parametrize("name", ["page_stats_single_partition", "page_stats_range_scan"])
def test_a_page_of_zeros_is_still_read_stats(name):
    zeros = fill(FORMATS[name], *([0] * FORMATS[name].count("{}")))
    counts = dialect_named("scylla").trace_counts([zeros])
    assert counts.has_read_stats and (counts.rows_read, counts.tombstones_read) == (0, 0)
