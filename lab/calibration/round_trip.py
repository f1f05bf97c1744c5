"""The lab's own write/read round trip: how fast the cluster in front of the lab answers small
requests one at a time, recorded once per calibration run beside the environment.

``measure_round_trip(conn, keyspace, n)`` writes then reads ``n`` rows of
:data:`ROUND_TRIP_PAYLOAD_BYTES` in a scratch keyspace, latencies in microseconds (HdrHistogram).
"""
from __future__ import annotations

import uuid
from typing import Any

from lab.calibration.contract import RoundTrip
from lab.errors import CalibrationError
from lab.measure import Stopwatch, summarize_histogram, timed
from lab.measure.hdr import OpStats, latencies_us

ROUND_TRIPS_QUICK = 200
ROUND_TRIPS_FULL = 2000
ROUND_TRIP_PAYLOAD_BYTES = 100
ROUND_TRIP_KEYSPACE_PREFIX = "lab_round_trip"


def measure_round_trip(conn: Any, keyspace: str, n: int) -> RoundTrip:
    """Write then read ``n`` small rows one at a time; latencies in microseconds (HdrHistogram)."""
    conn.execute(f"CREATE TABLE IF NOT EXISTS {keyspace}.lab_round_trip (k uuid PRIMARY KEY, v blob)")
    conn.wait_schema_agreement()
    insert = conn.prepare(f"INSERT INTO {keyspace}.lab_round_trip (k, v) VALUES (?, ?)")
    select = conn.prepare(f"SELECT v FROM {keyspace}.lab_round_trip WHERE k = ?", key_columns=("k",))
    keys = [uuid.uuid4() for _ in range(n)]
    writes, reads = OpStats(), OpStats()
    watch = Stopwatch()
    for k in keys:
        _, t = timed(lambda: conn.execute(insert, (k, b"x" * ROUND_TRIP_PAYLOAD_BYTES)))
        writes.record(latencies_us(started_ns=t.started_ns, ended_ns=t.ended_ns)[0])
    for k in keys:
        row, t = timed(lambda: conn.execute(select, (k,)).one())
        reads.record(latencies_us(started_ns=t.started_ns, ended_ns=t.ended_ns)[0])
        if row is None:
            raise CalibrationError(f"round trip lost key {k}", keyspace=keyspace)
    w, r = summarize_histogram(writes.service), summarize_histogram(reads.service)
    return RoundTrip(n=n, write_p50_us=w.p50, write_p99_us=w.p99, read_p50_us=r.p50, read_p99_us=r.p99,
                     seconds=watch.seconds(2))
