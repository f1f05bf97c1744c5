"""Run folders under results/, their environment facts and atomic JSON (no node)."""
from __future__ import annotations

import json
import math
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from lab.cluster.config import load_config
from lab.results.environment import environment
from lab.results.jsonio import jsonable, read_json, write_json
from lab.results.run_folders import new_run_dir
from lab.results.scratch import scratch_name


def test_runs_never_share_a_folder(tmp_path):
    with ThreadPoolExecutor(8) as pool:
        dirs = list(pool.map(lambda _: new_run_dir(tmp_path), range(64)))
    assert len(set(dirs)) == 64 and all(d.is_dir() for d in dirs)


@dataclass(frozen=True)
class _Result:
    value: float

    def to_json(self) -> dict:
        return {"value": self.value, "kind": "result"}


def test_jsonable_converts_the_labs_values():
    data = {"n": np.int64(3), "x": np.float32(0.5), "nan": math.nan, "ok": np.bool_(True), "path": Path("/a/b"),
            "tuple": (1, 2), "array": np.arange(2), "result": _Result(1.5), 7: "int key"}
    assert jsonable(data) == {"n": 3, "x": 0.5, "nan": None, "ok": True, "path": "/a/b", "tuple": [1, 2],
                              "array": [0, 1], "result": {"value": 1.5, "kind": "result"}, "7": "int key"}


def test_write_json_replaces_atomically(tmp_path):
    """Readers see the old file or the new one, never a part; no temporary file is left."""
    path = tmp_path / "summary.json"
    big = {"rows": list(range(50_000))}
    write_json(path, {"rows": []})
    seen: list[int] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            seen.append(len(json.loads(path.read_text())["rows"]))

    t = threading.Thread(target=reader)
    t.start()
    for _ in range(20):
        write_json(path, big)
        write_json(path, {"rows": []})
    stop.set()
    t.join()
    assert set(seen) <= {0, 50_000} and read_json(path) == {"rows": []}
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]


@pytest.mark.spawns
def test_environment_without_a_connection_masks_secrets(tmp_path):
    config = load_config(flags={"lab_home": str(tmp_path), "username": "lab", "password": "s3cret"}, env={})
    env = environment(config, note="x").to_json()
    assert env["cluster"]["password"] == "***" and "s3cret" not in json.dumps(env)
    assert env["server"] is None and env["machine"]["cpus"] >= 1 and env["embedded"] is False
    assert env["replication_factor"] == config.replication_factor and env["note"] == "x"
    assert "git_commit" in env and "loadavg_at_start" in env


def test_scratch_names_are_fresh_identifiers():
    names = {scratch_name("bench") for _ in range(100)}
    assert len(names) == 100 and all(n.startswith("bench_") and n.replace("_", "").isalnum() for n in names)
