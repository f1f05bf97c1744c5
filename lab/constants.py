"""Appendix B constants, read from the versioned data file ``appendix_b.toml``.

The store takes its limits from a :class:`Constants` object so that a changed constant
changes behaviour; ``load_constants()`` reads the repo's file (or another path).
"""
from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass
from pathlib import Path

from lab.errors import ConfigError

APPENDIX_B_PATH = Path(__file__).with_name("appendix_b.toml")


@dataclass(frozen=True, kw_only=True)
class Constant:
    name: str
    value: float | int
    unit: str
    section: str
    doc: str


@dataclass(frozen=True, kw_only=True)
class Constants:
    """Typed view of appendix B. Field names match the keys of ``appendix_b.toml``."""

    message_seq_bucket_width: int = 4096
    history_max_empty_bucket_scan: int = 8
    batch_read_in_list_limit: int = 100
    batch_read_range_min_density: float = 0.5
    client_dedup_ttl_seconds: int = 7200
    media_thumbnail_max_bytes: int = 32768
    payload_max_bytes: int = 65536
    default_retention_days: int = 30
    ephemeral_ttl_seconds: int = 86400
    seq_reservation_window: int = 4096
    body_lru_entries: int = 10000
    dek_cache_ttl_seconds: int = 300
    b_row_bytes: float = 600
    lsm_space_amp: float = 1.2
    replication_factor: int = 3
    message_record_twcs_window_days: int = 7
    client_dedup_twcs_window_hours: int = 6
    message_record_gc_grace_seconds: int = 86400
    client_dedup_gc_grace_seconds: int = 3600
    capacity_messages_per_day: int = 20_000_000
    capacity_retention_days: int = 365
    history_hot_window_days: int = 7

    def replace(self, **changes: float | int) -> Constants:
        return dataclasses.replace(self, **changes)


def read_entries(path: Path = APPENDIX_B_PATH) -> dict[str, Constant]:
    """All entries of the constants file, with unit, section and doc."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read constants file {path}: {exc}", path=str(path)) from exc
    entries = {}
    for name, body in data.get("constants", {}).items():
        entries[name] = Constant(name=name, value=body["value"], unit=body.get("unit", ""),
                                 section=body.get("section", ""), doc=body.get("doc", ""))
    return entries


def load_constants(path: Path = APPENDIX_B_PATH) -> Constants:
    entries = read_entries(path)
    known = {f.name: f for f in dataclasses.fields(Constants)}
    unknown = sorted(set(entries) - set(known))
    if unknown:
        raise ConfigError(f"unknown constants in {path}: {', '.join(unknown)}", path=str(path))
    values = {}
    for name, entry in entries.items():
        default = known[name].default
        values[name] = type(default)(entry.value) if isinstance(default, int) and float(entry.value).is_integer() else entry.value
    return Constants(**values)
