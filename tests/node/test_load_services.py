"""`lab load` and `lab soak` on the design's real parts: the Kafka outbox on the
embedded broker and archiver mode's Redis hot window, chosen by the same settings as `lab bench
store` (flags, LAB_*, the TOML file's [services] table), named in the environment block and the
summary, and audited: every acked send read back once and, on the Kafka outbox, found once in the
log. Short runs on the shared servers; nothing about speed is asserted."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lab.results.jsonio import read_json
from lab.results.scratch import scratch_keyspace

pytestmark = pytest.mark.node
ROOT = Path(__file__).resolve().parents[2]


def _lab(args: list[str], keyspace: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lab.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "LAB_KEYSPACE": keyspace, **(env or {})})


def _drop_state(cluster_config, results: Path, kind: str) -> None:
    for run_dir in results.iterdir():
        shutil.rmtree(Path(cluster_config.lab_home) / f"{kind}-state" / f"{run_dir.name}-load", ignore_errors=True)
        shutil.rmtree(Path(cluster_config.lab_home) / f"{kind}-state" / run_dir.name, ignore_errors=True)


def test_lab_load_on_the_kafka_outbox_audits_the_log(cluster_config, connection, kafka_services, tmp_path):
    results = tmp_path / "results"
    with scratch_keyspace(connection, "loadkafka", create=False) as keyspace:
        proc = _lab(["load", "--profile", "send_only", "--rate", "15", "--duration", "3s", "--warmup", "1s",
                     "--seed-size", "tiny", "--outbox", "kafka", "--allow-loader-bound",
                     "--results", str(results)], keyspace)  # services, not the verdict
    assert proc.returncode == 0, proc.stderr[-3000:]
    [summary_path] = results.glob("*/load/summary.json")
    s = read_json(summary_path)
    assert s["services"]["outbox"] == "kafka" and s["services"]["hot_window"] == "off"
    assert s["parameters"]["environment"]["services"]["outbox"] == "kafka"
    audit = s["audit"]
    assert audit["ok"] and audit["lost"] == 0 and audit["duplicates"] == 0
    assert audit["log"]["outbox"] == "kafka"
    assert audit["log"]["checked"] == audit["acked"] > 0 and audit["log"]["missing"] == 0
    assert audit["log"]["duplicated"] == 0
    assert "outbox kafka" in proc.stdout
    _drop_state(cluster_config, results, "load")


def test_lab_load_takes_the_services_from_the_environment_and_the_toml_file(cluster_config, connection,
                                                                             kafka_services, redis_services,
                                                                             tmp_path):
    """LAB_OUTBOX / LAB_HOT_WINDOW and the [services] table, as `lab bench store` reads them; the hot
    window is archiver mode's, so the run is in archiver mode and its audit reads through the window."""
    toml = tmp_path / "lab.toml"
    toml.write_text('[cluster]\n\n[services]\nhot_window = "redis"\n')  # docs/services.md's form: [cluster] beside [services]
    results = tmp_path / "results"
    with scratch_keyspace(connection, "loadhot", create=False) as keyspace:
        proc = _lab(["load", "--profile", "send_only", "--users", "2", "--duration", "2s", "--seed-size", "tiny",
                     "--config", str(toml), "--allow-loader-bound", "--results", str(results)],
                    keyspace, env={"LAB_OUTBOX": "kafka"})  # services, not the verdict
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = read_json(next(results.glob("*/load/summary.json")))
    assert (s["services"]["outbox"], s["services"]["hot_window"], s["services"]["archiver_mode"]) == \
        ("kafka", "redis", True)
    assert s["audit"]["ok"] and s["audit"]["acked"] > 0
    assert "hot window redis" in proc.stdout
    _drop_state(cluster_config, results, "load")


def test_lab_soak_on_the_kafka_outbox(cluster_config, connection, kafka_services, tmp_path):
    results = tmp_path / "results"
    with scratch_keyspace(connection, "soakkafka", create=False) as keyspace:
        proc = _lab(["soak", "--duration", "3s", "--audit-every", "1.5s", "--threads", "3", "--conversations", "3",
                     "--seed", "5", "--outbox", "kafka", "--results", str(results)], keyspace)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    s = json.loads(next(results.glob("*/soak/summary.json")).read_text())
    assert s["services"]["outbox"] == "kafka" and s["environment"]["services"]["outbox"] == "kafka"
    assert s["ok"] and s["acked"] > 0 and (s["lost"], s["duplicated"]) == (0, 0)
    assert s["log"]["outbox"] == "kafka" and s["log"]["missing"] == 0 and s["log"]["checked"] == s["acked"]
    _drop_state(cluster_config, results, "soak")


def test_an_unknown_outbox_is_refused_before_anything_is_made(tmp_path):
    proc = _lab(["load", "--rate", "5", "--outbox", "carrier-pigeon", "--results", str(tmp_path)], "unused")
    assert proc.returncode == 2 and "outbox must be one of" in proc.stderr
    assert not any(tmp_path.iterdir())
