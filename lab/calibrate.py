"""Calibration runs: measure on the cluster in front of the lab, write one report.

A run folder holds ``calibration.json`` (the machine-readable contract: ``constants.<name>``
with current / measured / recommended / unit) and ``report.html``.
"""
from __future__ import annotations

import html
import json
import statistics
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import ClusterConfig
from .runs import git_commit, machine, new_run_dir

ROUND_TRIPS_QUICK = 200
ROUND_TRIPS_FULL = 2000


@dataclass(frozen=True, kw_only=True)
class CalibrationResult:
    run_dir: Path
    calibration: dict[str, Any]

    @property
    def report_path(self) -> Path:
        return self.run_dir / "report.html"


def measure_round_trip(conn: Any, keyspace: str, n: int) -> dict[str, float]:
    """Write then read ``n`` small rows one at a time; latencies in microseconds."""
    conn.execute(f"CREATE TABLE IF NOT EXISTS {keyspace}.lab_round_trip (k uuid PRIMARY KEY, v blob)")
    conn.wait_schema_agreement()
    insert = conn.prepare(f"INSERT INTO {keyspace}.lab_round_trip (k, v) VALUES (?, ?)")
    select = conn.prepare(f"SELECT v FROM {keyspace}.lab_round_trip WHERE k = ?", key_columns=("k",))
    keys = [uuid.uuid4() for _ in range(n)]
    writes, reads = [], []
    for k in keys:
        t0 = time.perf_counter_ns()
        conn.execute(insert, (k, b"x" * 100))
        writes.append((time.perf_counter_ns() - t0) / 1000)
    for k in keys:
        t0 = time.perf_counter_ns()
        row = conn.execute(select, (k,)).one()
        reads.append((time.perf_counter_ns() - t0) / 1000)
        if row is None:
            raise AssertionError(f"round trip lost key {k}")

    def pct(xs: list[float], q: float) -> float:
        return sorted(xs)[min(len(xs) - 1, int(q * len(xs)))]

    return {"n": n, "write_p50_us": statistics.median(writes), "write_p99_us": pct(writes, 0.99),
            "read_p50_us": statistics.median(reads), "read_p99_us": pct(reads, 0.99)}


def environment(conn: Any, config: ClusterConfig, parameters: dict[str, Any]) -> dict[str, Any]:
    from .node import EmbeddedCluster, NodeOptions

    state = EmbeddedCluster(NodeOptions(home=config.lab_home)).read_state()
    embedded = state is not None and set(config.contact_points) & set(state.contact_points)
    return {
        "server": conn.server_kind(), "server_version": conn.server_version(),
        "nodes": len(conn.hosts()), "replication_factor": config.replication_factor,
        "embedded": bool(embedded),
        "node_startup_seconds": state.startup_seconds if embedded else None,
        "jar_resolution_seconds": state.resolve_seconds if embedded else None,
        "machine": machine(), "git_commit": git_commit(), "cluster": config.redacted(),
        "parameters": parameters,
    }


def run_calibration(config: ClusterConfig, *, quick: bool = True, results: Path = Path("results"),
                    progress: Any = None) -> CalibrationResult:
    from .connection import connect

    run_dir = new_run_dir(results)
    parameters = {"mode": "quick" if quick else "full"}
    with connect(config) as conn:
        conn.execute(f"CREATE KEYSPACE IF NOT EXISTS {config.keyspace} WITH replication = "
                     f"{json.dumps(config.replication_map()).replace(chr(34), chr(39))}")
        env = environment(conn, config, parameters)
        round_trip = measure_round_trip(conn, config.keyspace, ROUND_TRIPS_QUICK if quick else ROUND_TRIPS_FULL)
    calibration = {"run_id": run_dir.name, "environment": env, "measurements": {"round_trip": round_trip},
                   "constants": {}}
    (run_dir / "calibration.json").write_text(json.dumps(calibration, indent=2, default=str))
    (run_dir / "environment.json").write_text(json.dumps(env, indent=2, default=str))
    (run_dir / "report.html").write_text(_render(calibration))
    return CalibrationResult(run_dir=run_dir, calibration=calibration)


def _render(cal: dict[str, Any]) -> str:
    env = cal["environment"]
    rt = cal["measurements"]["round_trip"]
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
                   for k, v in env.items() if k not in ("cluster", "machine", "parameters"))
    rt_rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{v:.1f}</td></tr>" for k, v in rt.items())
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>Calibration {cal['run_id']}</title>"
            "<style>body{font-family:sans-serif;margin:2em}td,th{padding:4px 10px;text-align:left}"
            "table{border-collapse:collapse}tr:nth-child(even){background:#f4f4f4}</style></head><body>"
            f"<h1>Calibration run {html.escape(cal['run_id'])}</h1><h2>Environment</h2><table>{rows}</table>"
            f"<h2>Write/read round trip (µs)</h2><table>{rt_rows}</table></body></html>")
