"""`lab bench load --profile` on the real node, a few seconds of the chat load: py-spy's files
for both views, the loader's samples by layer (every layer named, shares summing to 100%), the
driver's CPU per call judged against the chat goal, the scratch keyspace dropped. Structure
only; no speed is asserted."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from lab.bench.load_generator_report import CHAT_GOAL_BASELINE_CALLS_PER_CORE_SECOND, CHAT_GOAL_FACTOR
from lab.bench.loader_layers import DRIVER, LAYERS, STORE
from lab.cli import main

pytestmark = pytest.mark.node

FILES = ("chat.gil.txt", "chat.gil.svg", "chat.gil.top.md", "chat.txt", "chat.svg", "chat.top.md", "layers.md",
         "profile-load.json")


def test_profile_writes_flame_graphs_and_the_layer_table(connection, tmp_path):
    results = tmp_path / "results"
    out = CliRunner().invoke(main, ["bench", "load", "--quick", "--profile", "--profile-seconds", "2",
                                    "--concurrency", "4", "--home", str(tmp_path / "home"),
                                    "--results", str(results)])
    assert out.exit_code == 0, out.output
    [folder] = results.glob("*/bench/profile-load")
    assert all((folder / name).stat().st_size > 0 for name in FILES)
    assert not list(folder.glob("*.full.txt"))  # the full-path recordings are replaced by the short ones
    data = json.loads((folder / "profile-load.json").read_text())
    assert data["run"]["calls"] > 0 and data["run"]["cpu_ms_per_call"] > 0 and data["record_seconds"] == 2
    assert (folder.parents[1] / "load-chat-profile" / "summary.json").exists()  # the load's own folder
    layers_md = (folder / "layers.md").read_text()
    for view in ("gil", "threads"):
        table = data["layers"][view]
        assert list(table["samples"]) == list(LAYERS) and table["total"] == sum(table["samples"].values()) > 0
        assert sum(table["share"].values()) == pytest.approx(1.0)
        assert all(table["samples"][layer] > 0 for layer in (DRIVER, STORE))  # every call runs through both
    assert all(f"| {layer} |" in layers_md for layer in LAYERS) and layers_md.count("| layer | samples |") == 2
    assert "lab/cluster/connection.py" in data["call_sites"]  # every request goes through the session wrapper
    goal = data["goal"]
    assert goal["target_ms_per_call"] == pytest.approx(1000 / (CHAT_GOAL_FACTOR * CHAT_GOAL_BASELINE_CALLS_PER_CORE_SECOND))
    assert goal["driver_ms_per_call"] == pytest.approx(data["layers"]["gil"]["share"][DRIVER]
                                                      * data["run"]["cpu_ms_per_call"])
    assert goal["verdict"].startswith(("NOT reachable", "reachable only in principle"))
    assert (folder / "chat.gil.svg").read_text().startswith("<svg")
    assert "GIL holder by layer" in out.output and "every busy thread by layer" in out.output
    assert "share is of the worker's GIL-held time" in out.output
    names = {r.keyspace_name for r in connection.session.execute("SELECT keyspace_name FROM system_schema.keyspaces")}
    assert data["keyspace"].startswith("benchprof") and data["keyspace"] not in names
