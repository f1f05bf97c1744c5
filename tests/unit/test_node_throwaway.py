"""A throwaway node (what `make test` starts) leaves schema changes in the commit log and never
fsyncs; any other node flushes them at each change and fsyncs, Cassandra's default
(docs/embedded-node.md, "The test settings")."""
from __future__ import annotations

import re
from pathlib import Path

from lab.cluster.embedded.node import NO_FSYNC_FLAG, NO_SCHEMA_FLUSH_FLAG, EmbeddedCluster, NodeOptions

ROOT = Path(__file__).resolve().parents[2]


def _command(home: Path, **kw) -> list[str]:
    return EmbeddedCluster(NodeOptions(home=home, **kw)).java_command("java", home / "nodes" / "node1", 7199)


def test_only_a_throwaway_node_leaves_schema_changes_unflushed(tmp_path):
    assert not any("flush_local_schema_changes" in arg for arg in _command(tmp_path))
    throwaway = _command(tmp_path, throwaway=True)
    assert NO_SCHEMA_FLUSH_FLAG in throwaway and throwaway.index(NO_SCHEMA_FLUSH_FLAG) < throwaway.index("-cp")


def test_only_a_throwaway_node_skips_fsync(tmp_path):
    assert not any("skip_sync" in arg for arg in _command(tmp_path))
    throwaway = _command(tmp_path, throwaway=True)
    assert NO_FSYNC_FLAG == "-Dcassandra.skip_sync=true"  # the property Cassandra's SyncUtil reads
    assert NO_FSYNC_FLAG in throwaway and throwaway.index(NO_FSYNC_FLAG) < throwaway.index("-cp")


def test_make_test_starts_a_throwaway_node_and_the_cli_offers_it():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^test: NODE_FLAGS = --throwaway$", makefile, re.M)
    assert re.search(r"^\t\$\(BIN\)/lab node start --home \$\(LAB_HOME\) \$\(NODE_FLAGS\)$", makefile, re.M)
    assert not re.search(r"^(report|node): NODE_FLAGS", makefile, re.M)  # only the suite's node
    from lab.cli.node_commands import node_start

    assert [p.opts for p in node_start.params if p.name == "throwaway"] == [["--throwaway"]]
