"""The trace parsers read both servers' real trace texts (pure)."""
from __future__ import annotations

from lab.cluster.tracing import summarize


def test_trace_parsers_read_both_servers():
    cassandra = ["Merged data from memtables and 2 sstables", "Read 7 live rows and 3 tombstone cells"]
    scylla = ["Reading key {key: pk{0004}} from sstable /var/lib/scylla/data/ks/t-1/me-1-big-Data.db",
              "Page stats: 1 partition(s), 0 static row(s) (0 live, 0 dead), 9 clustering row(s) "
              "(9 live, 2 dead) and 1 range tombstone(s)"]
    c = summarize(cassandra)
    s = summarize(scylla)
    assert (c.rows_read, c.tombstones_read, c.sstables_touched) == (7, 3, 2)
    assert (s.rows_read, s.tombstones_read, s.sstables_touched) == (9, 3, 1)
