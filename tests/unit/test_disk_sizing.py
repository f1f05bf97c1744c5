import math

import pytest

from lab.calibration.capacity_model.disk_sizing import (
    SizingProjection,
    partition_bytes,
    project_sizing,
    resident_bytes,
    tier_rows,
    twcs_windows_kept,
)
from lab.constants import load_constants
from lab.errors import ValidationError

TB = 1e12


def test_starter_tier_is_15_8_tb():
    explicit = resident_bytes(m_day=2e7, b_row_bytes=600, lsm_space_amp=1.2, replication_factor=3,
                              retention_days=365)
    assert explicit == pytest.approx(1.5768e13, rel=1e-12)
    assert round(explicit / TB, 1) == 15.8
    assert resident_bytes() == pytest.approx(explicit, rel=1e-12)  # defaults are appendix B


def test_resident_bytes_is_linear_in_each_factor():
    base = dict(m_day=2e7, b_row_bytes=600, lsm_space_amp=1.2, replication_factor=3, retention_days=365)
    for name, factor in (("m_day", 5), ("b_row_bytes", 2), ("lsm_space_amp", 1.5), ("replication_factor", 2),
                         ("retention_days", 0.5)):
        scaled = dict(base, **{name: base[name] * factor if name != "replication_factor" else base[name] * factor})
        assert resident_bytes(**scaled) == pytest.approx(resident_bytes(**base) * factor)


@pytest.mark.parametrize("kwargs", [{"m_day": 0}, {"b_row_bytes": -1}, {"replication_factor": 2.5},
                                    {"replication_factor": True}, {"retention_days": float("inf")},
                                    {"lsm_space_amp": "1.2"}])
def test_resident_bytes_rejects_bad_inputs(kwargs):
    with pytest.raises(ValidationError):
        resident_bytes(**kwargs)


def test_partition_is_2_4_mb():
    assert partition_bytes(4096, 600) == 2_457_600
    assert round(partition_bytes() / 1e6, 1) == 2.5  # design's "≈2.4 MB" truncates 2.4576
    assert math.floor(partition_bytes() / 1e5) / 10 == 2.4
    with pytest.raises(ValidationError):
        partition_bytes(4096.0, 600)


def test_twcs_windows_kept():
    day = 86_400
    assert twcs_windows_kept(365 * day, 7 * day) == 54   # ceil(52.14) + 1
    assert twcs_windows_kept(364 * day, 7 * day) == 53   # exactly 52 windows + 1
    assert twcs_windows_kept(7200, 6 * 3600) == 2        # client_dedup: 2 h TTL in 6 h windows


def test_projection_disk_per_node_and_nodes_needed():
    p = project_sizing(node_count=12, usable_disk_bytes_per_node=4 * TB)
    assert isinstance(p, SizingProjection)
    assert p.resident_tb == pytest.approx(15.768)
    assert p.disk_bytes_per_node == pytest.approx(1.5768e13 / 12)
    assert p.utilization == pytest.approx(1.5768e13 / 12 / (4 * TB))
    assert p.nodes_needed == 8  # ceil(15.768 / (4 x 0.5))
    assert project_sizing(usable_disk_bytes_per_node=4 * TB, target_utilization=0.8).nodes_needed == 5
    assert project_sizing(usable_disk_bytes_per_node=4 * TB).node_count is None


def test_nodes_needed_is_at_least_the_replication_factor():
    assert project_sizing(messages_per_day=1000, usable_disk_bytes_per_node=10 * TB).nodes_needed == 3


def test_partitions_per_node():
    p = project_sizing(node_count=12, messages_per_conversation_day=20)
    assert p.active_conversations == 1_000_000
    assert p.buckets_per_conversation == 2          # 7300 seqs -> buckets 0 and 1
    assert p.partitions_total == 2_000_000
    assert p.partitions_per_node == pytest.approx(2_000_000 * 3 / 12)
    big_groups = project_sizing(node_count=12, messages_per_conversation_day=10_000)
    assert big_groups.buckets_per_conversation == 3_650_000 // 4096 + 1
    early = project_sizing(node_count=12, messages_per_conversation_day=20, days_elapsed=30)
    assert early.buckets_per_conversation == 1


def test_sstables_per_node_scale_with_shards_and_window():
    assert project_sizing(node_count=3).message_record_sstables_per_node == 54
    p = project_sizing(node_count=3, shards_per_node=8)
    assert p.message_record_sstables_per_node == 54 * 8
    assert p.client_dedup_sstables_per_node == 2 * 8
    one_day = project_sizing(node_count=3, constants=load_constants().replace(message_record_twcs_window_days=1))
    assert one_day.message_record_sstables_per_node == 366


def test_projection_uses_measured_constants():
    measured = load_constants().replace(b_row_bytes=300, lsm_space_amp=1.5)
    p = project_sizing(constants=measured, node_count=6)
    assert p.resident_bytes == pytest.approx(2e7 * 300 * 1.5 * 3 * 365)
    assert p.partition_bytes == 4096 * 300


@pytest.mark.parametrize("kwargs", [{}, {"node_count": 2}, {"node_count": 3.0},
                                    {"node_count": 3, "target_utilization": 0},
                                    {"node_count": 3, "target_utilization": 1.5},
                                    {"node_count": 3, "messages_per_conversation_day": 0},
                                    {"usable_disk_bytes_per_node": -1}])
def test_projection_rejects_bad_inputs(kwargs):
    with pytest.raises(ValidationError):
        project_sizing(**kwargs)


def test_tier_rows_feed_a_dataframe():
    rows = tier_rows(usable_disk_bytes_per_node=8 * TB)
    assert [r["messages_per_day"] for r in rows] == [20_000_000, 100_000_000, 500_000_000]
    assert [r["resident_tb"] for r in rows] == pytest.approx([15.768, 78.84, 394.2])
    assert [r["nodes_needed"] for r in rows] == [4, 20, 99]
    assert all(isinstance(r, dict) for r in rows)
    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame(rows)
    assert list(frame["resident_tb"].round(1)) == [15.8, 78.8, 394.2]
