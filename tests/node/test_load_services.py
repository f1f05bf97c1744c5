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
from concurrent.futures import ThreadPoolExecutor
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


# The three runs go side by side, each in a keyspace and results folder of its own: their tests read
# services and audits, never a speed or a verdict, so the three take about the longest one's time.
def _runs(tmp: Path) -> dict[str, tuple[str, list[str], dict[str, str]]]:
    """name -> (keyspace prefix, `lab` arguments, environment)."""
    toml = tmp / "lab.toml"  # docs/services.md's form: [cluster] beside [services]
    toml.write_text('[cluster]\n\n[services]\nhot_window = "redis"\n')
    return {
        "kafka": ("loadkafka", ["load", "--profile", "send_only", "--rate", "15", "--duration", "3s", "--warmup", "1s",
                                "--seed-size", "tiny", "--outbox", "kafka", "--allow-loader-bound"], {}),
        "env_toml": ("loadhot", ["load", "--profile", "send_only", "--users", "2", "--duration", "2s", "--seed-size",
                                 "tiny", "--config", str(toml), "--allow-loader-bound"], {"LAB_OUTBOX": "kafka"}),
        "soak": ("soakkafka", ["soak", "--duration", "3s", "--audit-every", "1.5s", "--threads", "3",
                               "--conversations", "3", "--seed", "5", "--outbox", "kafka"], {}),
    }


def _run(connection, prefix: str, args: list[str], env: dict[str, str], results: Path) -> subprocess.CompletedProcess:
    with scratch_keyspace(connection, prefix, create=False) as keyspace:
        return _lab([*args, "--results", str(results)], keyspace, env=env)


@pytest.fixture(scope="module")
def runs(cluster_config, connection, kafka_services, redis_services, tmp_path_factory) -> dict:
    """name -> (the finished `lab` process, its results folder)."""
    tmp = tmp_path_factory.mktemp("services")
    planned = _runs(tmp)
    for name in planned:
        (tmp / name).mkdir()
    with ThreadPoolExecutor(len(planned)) as pool:
        futures = {name: pool.submit(_run, connection, prefix, args, env, tmp / name / "results")
                   for name, (prefix, args, env) in planned.items()}
        out = {name: (f.result(), tmp / name / "results") for name, f in futures.items()}
    yield out
    for name, (_proc, results) in out.items():
        _drop_state(cluster_config, results, "soak" if name == "soak" else "load")


def test_lab_load_on_the_kafka_outbox_audits_the_log(runs):
    proc, results = runs["kafka"]  # services, not the verdict
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


def test_lab_load_takes_the_services_from_the_environment_and_the_toml_file(runs):
    """LAB_OUTBOX / LAB_HOT_WINDOW and the [services] table, as `lab bench store` reads them; the hot
    window is archiver mode's, so the run is in archiver mode and its audit reads through the window."""
    proc, results = runs["env_toml"]  # services, not the verdict
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = read_json(next(results.glob("*/load/summary.json")))
    assert (s["services"]["outbox"], s["services"]["hot_window"], s["services"]["archiver_mode"]) == \
        ("kafka", "redis", True)
    assert s["audit"]["ok"] and s["audit"]["acked"] > 0
    assert "hot window redis" in proc.stdout


def test_lab_soak_on_the_kafka_outbox(runs):
    proc, results = runs["soak"]
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    s = json.loads(next(results.glob("*/soak/summary.json")).read_text())
    assert s["services"]["outbox"] == "kafka" and s["environment"]["services"]["outbox"] == "kafka"
    assert s["ok"] and s["acked"] > 0 and (s["lost"], s["duplicated"]) == (0, 0)
    assert s["log"]["outbox"] == "kafka" and s["log"]["missing"] == 0 and s["log"]["checked"] == s["acked"]


def test_an_unknown_outbox_is_refused_before_anything_is_made(tmp_path):
    proc = _lab(["load", "--rate", "5", "--outbox", "carrier-pigeon", "--results", str(tmp_path)], "unused")
    assert proc.returncode == 2 and "outbox must be one of" in proc.stderr
    assert not any(tmp_path.iterdir())
