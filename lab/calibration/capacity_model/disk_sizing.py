"""Capacity arithmetic of design §7 (and §25.1), fed by the lab's measured constants.

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass

from lab.constants import Constants
from lab.errors import ValidationError

_DEFAULTS = Constants.appendix_b()

BYTES_PER_TB = 10**12
BYTES_PER_MB = 10**6
HOURS_PER_DAY = 24
SECONDS_PER_HOUR = 3600

# Half the disk stays free: TWCS/STCS compactions rewrite whole SSTables and need room for
# both copies while they run.
DEFAULT_TARGET_UTILIZATION = 0.5
# An assumption, not a measurement: average messages an *active* conversation receives per
# day. It decides how many seq_bucket partitions the same traffic spreads over.
DEFAULT_MESSAGES_PER_CONVERSATION_DAY = 20.0
DEFAULT_SHARDS_PER_NODE = 1  # Cassandra: 1; Scylla: one per core
DEFAULT_TIERS_MESSAGES_PER_DAY = (20_000_000, 100_000_000, 500_000_000)


def _positive(name: str, value: float, *, integer: bool = False) -> None:
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if not ok_type or isinstance(value, bool) or not value > 0 or (isinstance(value, float) and math.isinf(value)):
        raise ValidationError(f"{name} must be a positive {'int' if integer else 'number'}, got {value!r}",
                              field=name, value=value)


def resident_bytes(*, m_day: float = _DEFAULTS.capacity_messages_per_day,
                   b_row_bytes: float = _DEFAULTS.b_row_bytes,
                   lsm_space_amp: float = _DEFAULTS.lsm_space_amp,
                   replication_factor: int = _DEFAULTS.replication_factor,
                   retention_days: float = _DEFAULTS.capacity_retention_days) -> float:
    """Cluster-wide bytes on disk for message_record bodies at steady state (§7)."""
    for name, value in (("m_day", m_day), ("b_row_bytes", b_row_bytes), ("lsm_space_amp", lsm_space_amp),
                        ("retention_days", retention_days)):
        _positive(name, value)
    _positive("replication_factor", replication_factor, integer=True)
    return float(m_day) * b_row_bytes * lsm_space_amp * replication_factor * retention_days


def partition_bytes(bucket_width: int = _DEFAULTS.message_seq_bucket_width,
                    b_row_bytes: float = _DEFAULTS.b_row_bytes) -> float:
    """Upper bound of one seq_bucket partition: a full bucket of rows (§4.2, §7)."""
    _positive("bucket_width", bucket_width, integer=True)
    _positive("b_row_bytes", b_row_bytes)
    return float(bucket_width) * b_row_bytes


def twcs_windows_kept(retention_seconds: float, window_seconds: float) -> int:
    """SSTable windows a TWCS table holds at steady state: the expired-data horizon plus
    the window still being written."""
    _positive("retention_seconds", retention_seconds)
    _positive("window_seconds", window_seconds)
    return math.ceil(retention_seconds / window_seconds) + 1


@dataclass(frozen=True, kw_only=True)
class SizingProjection:
    """One production sizing, inputs included so a row of it stands on its own."""

    messages_per_day: float
    retention_days: float
    days_elapsed: float
    b_row_bytes: float
    lsm_space_amp: float
    replication_factor: int
    target_utilization: float
    messages_per_conversation_day: float
    shards_per_node: int
    resident_bytes: float
    resident_tb: float
    partition_bytes: float
    node_count: int | None
    disk_bytes_per_node: float | None
    usable_disk_bytes_per_node: float | None
    utilization: float | None
    nodes_needed: int | None
    active_conversations: int
    buckets_per_conversation: int
    partitions_total: int
    partitions_per_node: float | None
    message_record_sstables_per_node: int
    client_dedup_sstables_per_node: int

    def as_row(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def project_sizing(*, constants: Constants = _DEFAULTS,
                   messages_per_day: float | None = None,
                   node_count: int | None = None,
                   usable_disk_bytes_per_node: float | None = None,
                   target_utilization: float = DEFAULT_TARGET_UTILIZATION,
                   messages_per_conversation_day: float = DEFAULT_MESSAGES_PER_CONVERSATION_DAY,
                   days_elapsed: float | None = None,
                   shards_per_node: int = DEFAULT_SHARDS_PER_NODE) -> SizingProjection:
    """Project disk, partitions and SSTables per node from (measured) constants.

    Give ``node_count`` to get disk per node; give ``usable_disk_bytes_per_node`` to get the
    nodes needed at ``target_utilization`` (at least RF nodes); give both to get both.

    Partitions assume the same ``messages_per_day / messages_per_conversation_day``
    conversations are active every day, each filling buckets from seq 1 for
    ``days_elapsed`` days (default: the retention): buckets = seq // W + 1. A population
    that churns has more, smaller partitions; treat the number as a lower bound.
    """
    m_day = constants.capacity_messages_per_day if messages_per_day is None else messages_per_day
    retention_days = constants.capacity_retention_days
    days = retention_days if days_elapsed is None else days_elapsed
    _positive("days_elapsed", days)
    _positive("messages_per_conversation_day", messages_per_conversation_day)
    _positive("shards_per_node", shards_per_node, integer=True)
    if not isinstance(target_utilization, (int, float)) or not 0 < target_utilization <= 1:
        raise ValidationError(f"target_utilization must be in (0, 1], got {target_utilization!r}",
                              field="target_utilization", value=target_utilization)
    if node_count is None and usable_disk_bytes_per_node is None:
        raise ValidationError("give node_count, usable_disk_bytes_per_node, or both")
    rf = constants.replication_factor
    resident = resident_bytes(m_day=m_day, b_row_bytes=constants.b_row_bytes,
                              lsm_space_amp=constants.lsm_space_amp, replication_factor=rf,
                              retention_days=retention_days)

    nodes_needed = None
    if usable_disk_bytes_per_node is not None:
        _positive("usable_disk_bytes_per_node", usable_disk_bytes_per_node)
        nodes_needed = max(rf, math.ceil(resident / (usable_disk_bytes_per_node * target_utilization)))
    if node_count is not None:
        _positive("node_count", node_count, integer=True)
        if node_count < rf:
            raise ValidationError(f"node_count {node_count} is below the replication factor {rf}",
                                  field="node_count", value=node_count)
    nodes = node_count if node_count is not None else nodes_needed
    disk_per_node = resident / nodes if node_count is not None else None
    utilization = (disk_per_node / usable_disk_bytes_per_node
                   if disk_per_node is not None and usable_disk_bytes_per_node is not None else None)

    width = constants.message_seq_bucket_width
    active_conversations = math.ceil(m_day / messages_per_conversation_day)
    buckets_per_conversation = int(messages_per_conversation_day * min(days, retention_days)) // width + 1
    partitions_total = active_conversations * buckets_per_conversation

    record_windows = twcs_windows_kept(retention_days * HOURS_PER_DAY * SECONDS_PER_HOUR,
                                       constants.message_record_twcs_window_days * HOURS_PER_DAY * SECONDS_PER_HOUR)
    dedup_windows = twcs_windows_kept(constants.client_dedup_ttl_seconds,
                                      constants.client_dedup_twcs_window_hours * SECONDS_PER_HOUR)
    return SizingProjection(
        messages_per_day=m_day, retention_days=retention_days, days_elapsed=days,
        b_row_bytes=constants.b_row_bytes, lsm_space_amp=constants.lsm_space_amp, replication_factor=rf,
        target_utilization=target_utilization, messages_per_conversation_day=messages_per_conversation_day,
        shards_per_node=shards_per_node, resident_bytes=resident, resident_tb=resident / BYTES_PER_TB,
        partition_bytes=partition_bytes(width, constants.b_row_bytes),
        node_count=node_count, disk_bytes_per_node=disk_per_node,
        usable_disk_bytes_per_node=usable_disk_bytes_per_node, utilization=utilization,
        nodes_needed=nodes_needed, active_conversations=active_conversations,
        buckets_per_conversation=buckets_per_conversation, partitions_total=partitions_total,
        partitions_per_node=partitions_total * rf / nodes if nodes else None,
        message_record_sstables_per_node=record_windows * shards_per_node,
        client_dedup_sstables_per_node=dedup_windows * shards_per_node,
    )


def tier_rows(tiers: Iterable[float] = DEFAULT_TIERS_MESSAGES_PER_DAY, **options: object) -> list[dict[str, object]]:
    """One plain dict per traffic tier (messages/day), ready for ``pandas.DataFrame(rows)``.

    ``options`` go to :func:`project_sizing` (node_count or usable_disk_bytes_per_node is
    required there).
    """
    return [project_sizing(messages_per_day=tier, **options).as_row() for tier in tiers]  # type: ignore[arg-type]
