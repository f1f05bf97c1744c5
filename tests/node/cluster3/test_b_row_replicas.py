"""b_row counts one replica on any cluster: a 3-node RF 3 measurement agrees with the single
node's, so the capacity formula's RF is the only replication factor ever applied.

The same dataset (profile, seed, rows) is measured by the b_row experiment on the shared single
node (RF 1) and on the folder's 3-node cluster at RF 3 (writes at ALL, so every replica holds
every row before the flush). The admin adapter sums live bytes over the three nodes and divides
by the three copies of each row: b_row must agree within 2% per table, while the raw sum is about
three times it. Fed to the capacity notebook, the 3-node b_row then gives the single-node
resident figure: the formula's RF is the only replication factor applied.
"""
from __future__ import annotations

import json

import pytest

from lab.calibration.experiments import b_row, capacity
from lab.calibration.experiments.common import open_testbed
from lab.constants import load_constants

PARAMS = b_row.Params(rows=400, min_repeats=1, max_repeats=1, seed=11, partition_rows=0, compressions=("lz4",),
                      fit_mixes=(), held_out=None, show_progress=False)
TOLERANCE = 0.02
FIGURES: dict[str, dict] = {}


@pytest.fixture(scope="module")
def constants():
    return load_constants()


@pytest.fixture(scope="module")
def single_node(cluster_config, constants):
    with open_testbed(cluster_config) as testbed:
        return b_row.run(testbed, PARAMS, constants=constants)


@pytest.fixture(scope="module")
def three_nodes(cluster3, cluster3_config, constants):
    with open_testbed(cluster3_config(write_consistency="ALL")) as testbed:
        assert len(testbed.connection.hosts()) == 3 and all(h.is_up for h in testbed.connection.hosts())
        return b_row.run(testbed, PARAMS, constants=constants)


@pytest.fixture(scope="module", autouse=True)
def b_row_report(report):
    yield
    if FIGURES:
        lines = ["| table | single node RF 1 (B/row) | 3 nodes RF 3, per replica (B/row) | difference | "
                 "3 nodes, summed over nodes (B/row) |", "|---|---|---|---|---|"]
        for table, f in FIGURES.items():
            lines.append(f"| {table} | {f['single']:.1f} | {f['three']:.1f} | {f['difference']:+.2%} | "
                         f"{f['summed']:.1f} |")
        report("b_row_replicas.md", "b_row per replica (1 node vs 3 nodes RF 3)", "\n".join(lines) + "\n")


def _per_table(result: b_row.Result) -> dict:
    return result.per_repeat.set_index("table")


def test_three_nodes_rf3_gives_the_single_node_b_row(single_node, three_nodes):
    one, three = _per_table(single_node), _per_table(three_nodes)
    assert (one.replicas == 1).all() and (three.replicas == 3).all()
    for table in b_row.TABLES:
        single, per_replica = float(one.loc[table, "b_row_bytes"]), float(three.loc[table, "b_row_bytes"])
        summed = float(three.loc[table, "live_disk_bytes"]) / PARAMS.rows
        FIGURES[table] = {"single": single, "three": per_replica, "summed": summed,
                          "difference": per_replica / single - 1}
        assert per_replica == pytest.approx(single, rel=TOLERANCE), table
        assert summed == pytest.approx(3 * per_replica, rel=1e-9)  # the raw sum counts every copy
        assert int(three.loc[table, "sstable_count"]) == 3  # one SSTable per node after the major compaction
    values = three_nodes.values()
    assert values["replicas_per_row"] == 3 and values["nodes"] == 3 and values["shards_per_node"] == 1


def test_capacity_applies_rf_once_to_the_3_node_b_row(single_node, three_nodes, constants, tmp_path):
    path = tmp_path / "values.json"
    path.write_text(json.dumps(three_nodes.values()))
    rf3 = constants.replace(replication_factor=3)
    measured = capacity.run(capacity.Params(b_row_values=str(path)), constants=rf3)
    single = capacity.run(capacity.Params(b_row_bytes=single_node.values()["b_row_bytes"]), constants=rf3)
    m = measured.sizing[measured.sizing.source == "measured"].iloc[0]
    s = single.sizing[single.sizing.source == "measured"].iloc[0]
    assert m.resident_bytes == pytest.approx(
        m.messages_per_day * three_nodes.values()["b_row_bytes"] * rf3.lsm_space_amp * 3 * rf3.capacity_retention_days,
        rel=1e-12)
    assert m.resident_bytes == pytest.approx(s.resident_bytes, rel=TOLERANCE)
    assert m.shards_per_node == 1
