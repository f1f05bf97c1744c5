"""Every `lab` command is registered, has --help and is documented."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from lab.bench.store import BenchParams, run_bench
from lab.cli import main

TINY = BenchParams(send_ops=16, send_block=8, send_warmup=4, send_concurrency=2, send_conversations=4,
                   body_bytes=64, history_messages=12, history_limit=10, history_ops=6, history_warmup=2,
                   group_backlog=30, dm_count=3, dm_backlog=2, group_repeats=3, group_warmup=1, dm_repeats=4, dm_warmup=1, flush=False)
READS = ("point_read", "range_read", "in_read")


@pytest.fixture(scope="module")
def bench(cluster_config, tmp_path_factory):
    result = run_bench(cluster_config, TINY, results=tmp_path_factory.mktemp("results"))
    return result, json.loads(result.json_path.read_text())


def test_cli_command_is_registered():
    out = CliRunner().invoke(main, ["bench", "store", "--help"])
    assert out.exit_code == 0 and "--quick" in out.output and "--contact-points" in out.output
