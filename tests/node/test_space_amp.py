"""lsm_space_amp on the real node (issue 23 item 1): the bytes on disk are the node's own files,
the live bytes the twin's one compacted SSTable, and expired rows that share a TWCS window with
rows that never expire stay on disk (so disk > live)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from lab.calibration.experiments import space_amp
from lab.calibration.experiments.common import open_testbed, scratch_name, scratch_store
from lab.cluster.admin.disk import disk_bytes
from lab.constants import load_constants
from lab.results.scratch import drop_keyspace
from lab.store import table_specs
from lab.workload import generate, to_message

# every row expires after 1 simulated day or never: the steady state starts at day 1 + 7 + 1 + 1
PARAMS = space_amp.Params(profile="text_only", retention={"ephemeral_24h": 0.5, "compliance_hold": 0.5},
                          scenarios=("profile",), rows_per_day=25, seconds_per_day=2.0, days=13, replicates=2,
                          max_batches=1,
                          target_rel_half_width=0.5, keep_keyspaces=True, show_progress=False)


def _files_of(testbed, keyspace: str, table: str) -> dict[str, int]:
    """Each node's table folder summed by hand: os.walk over the node's data folder."""
    out = {}
    for address, folders in testbed.admin.table_directories(keyspace, table).items():
        total = 0
        for folder in folders:
            for name in os.listdir(folder):
                path = Path(folder) / name
                if path.is_file():
                    total += path.stat().st_size
        out[address] = total
    return out


def test_disk_bytes_are_every_file_of_the_table_on_each_node(cluster_config):
    constants = load_constants()
    record = (table_specs(constants)["message_record"], ())
    with open_testbed(cluster_config) as testbed, \
            scratch_store(testbed, scratch_name("disk"), constants=constants, tables=[record]) as store:
        ks = store.keyspace
        if testbed.admin.table_directories(ks, "message_record") is None:
            pytest.skip("the nodes' data folders are not local")
        messages = generate("chat_mix", size=200, seed=3).messages
        items = [s for row in messages.to_dict("records") for s in
                 store.seeding.statements(to_message(row, seed=3), ttl_seconds=0, index=False)]
        testbed.connection.execute_concurrent(items, concurrency=32)
        testbed.admin.flush(ks)
        one = disk_bytes(testbed.admin, ks, "message_record")
        stats = testbed.admin.table_stats(ks, "message_record")
        assert one.source == "files" and one.total > 200 * 100
        assert dict(one.per_node) == _files_of(testbed, ks, "message_record")
        # the node's own account agrees: every component of every SSTable
        assert one.per_node == {str(n["node"]): int(n["total_disk_bytes"]) for n in stats.per_node}
        data = sum(f.stat().st_size for f in testbed.admin.data_files(ks, "message_record"))
        assert one.total > data  # Index, Filter, Statistics, ... on top of Data.db
        # the same rows written again make a second SSTable of the same size: twice the bytes on disk
        testbed.connection.execute_concurrent(items, concurrency=32)
        testbed.admin.flush(ks)
        two = disk_bytes(testbed.admin, ks, "message_record")
        assert testbed.admin.table_stats(ks, "message_record").sstable_count == 2 * len(one.per_node)
        assert two.total == pytest.approx(2 * one.total, rel=0.02)


@pytest.fixture(scope="module")
def result(cluster_config):
    with open_testbed(cluster_config) as testbed:
        r = space_amp.run(testbed, PARAMS, constants=load_constants())
    yield r
    with open_testbed(cluster_config) as testbed:
        for pair in r.keyspaces:
            for ks in pair:
                drop_keyspace(testbed.connection, ks)


def test_space_amp_reads_the_node_files_against_a_compacted_twin(cluster_config, result):
    v = result.values()
    s = result.series
    assert result.steady_start_day == 10 and result.steady_reached and v["days"] == 13
    assert list(s.columns[:3]) == ["batch", "step", "sim_day"]
    assert s.groupby(["replicate", "table"]).sim_day.apply(lambda d: d.is_monotonic_increasing).all()
    assert (s.peak_bytes >= s.disk_bytes).all() and (s.source == "files").all()
    last = s[s.step == s.step.max()]
    with open_testbed(cluster_config) as testbed:
        for r, (main, twin) in enumerate(result.keyspaces):
            for table in space_amp.TABLES:
                recorded = last[(last.replicate == r) & (last.table == table)].set_index("node")
                # bytes on disk: the node's files, still as recorded (nothing wrote since)
                assert recorded.disk_bytes.to_dict() == _files_of(testbed, main, table)
                # live bytes: the twin's one SSTable, as the admin adapter and the files say
                twin_stats = testbed.admin.table_stats(twin, table)
                assert twin_stats.sstable_count == len(recorded)
                assert recorded.live_bytes.to_dict() == {str(n["node"]): int(n["live_disk_bytes"])
                                                         for n in twin_stats.per_node}
                assert recorded.live_bytes.to_dict() == _files_of(testbed, twin, table)


def test_expired_rows_sharing_a_window_with_rows_that_never_expire_stay_on_disk(result):
    v = result.values()
    reps = result.per_replicate.set_index("table")
    # half the rows expire after a day, the other half never: no window is ever fully expired
    assert (reps.loc["message_record"].steady > 1.2).all()
    # two replicates: a mean and no interval (fewer than five rounds), said so in the conclusion
    assert v["lsm_space_amp"] > 1.2 and v["lsm_space_amp_ci_low"] is None and v["lsm_space_amp_ci_high"] is None
    assert v["lsm_space_amp_peak"] >= v["lsm_space_amp"]
    assert v["never_expiring_share"] == pytest.approx(0.5)
    # the twin holds only what is live: by the end, far less than all the rows written
    s = result.series
    end = s[(s.step == s.step.max()) & (s.table == "message_record")]
    assert (end.disk_bytes > 1.2 * end.live_bytes).all()
    prec = v["lsm_space_amp_precision"]
    assert prec["target_rel_half_width"] == 0.5 and prec["steps"] == 1 and prec["too_few_rounds"]
    halves = v["lsm_space_amp_halves"]  # None when a loaded machine left one step in the steady interval
    assert halves is None or (halves["first"] > 1 and halves["second"] > 1)
    text = space_amp.conclusion(result)
    assert "message_record" in text and "no interval: fewer than 5 replicates" in text
    assert v["conversation_head_bytes_per_conversation"] > 50
