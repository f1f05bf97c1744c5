"""Appendix B constants, read from the versioned data file ``appendix_b.toml``: their one source.

:class:`Constants` has no defaults of its own, so the file and the code cannot disagree.
``load_constants(path)`` reads a file; ``Constants.appendix_b()`` is the repo's file read once per
process (the modules' default arguments). The store takes its limits from a :class:`Constants`
object; ``lab calibrate --propose`` proposes changes to the file, never to code.
"""
from __future__ import annotations

import dataclasses
import functools
import tomllib
import typing
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
    """Typed view of appendix B. Field names are the keys of ``appendix_b.toml``; the units
    are the file's (``unit`` of each entry)."""

    message_seq_bucket_width: int
    history_max_empty_bucket_scan: int
    batch_read_in_list_limit: int
    batch_read_range_min_density: float
    client_dedup_ttl_seconds: int
    media_thumbnail_max_bytes: int
    payload_max_bytes: int
    default_retention_days: int
    ephemeral_ttl_seconds: int
    seq_reservation_window: int
    body_lru_entries: int
    dek_cache_ttl_seconds: int
    b_row_bytes: float
    lsm_space_amp: float
    replication_factor: int
    message_record_twcs_window_days: int
    client_dedup_twcs_window_hours: int
    message_record_gc_grace_seconds: int
    client_dedup_gc_grace_seconds: int
    capacity_messages_per_day: int
    capacity_retention_days: int
    history_hot_window_days: int

    def replace(self, **changes: float | int) -> Constants:
        return dataclasses.replace(self, **changes)

    @classmethod
    def appendix_b(cls) -> Constants:
        """The repository's ``appendix_b.toml``, read once per process."""
        return _appendix_b()


def read_entries(path: Path = APPENDIX_B_PATH) -> dict[str, Constant]:
    """All entries of the constants file, with unit, section and doc."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read constants file {path}: {exc}", path=str(path)) from exc
    entries = {}
    for name, body in data.get("constants", {}).items():
        if not isinstance(body, dict) or "value" not in body:
            raise ConfigError(f"constant {name} in {path} has no value", path=str(path), constant=name)
        entries[name] = Constant(name=name, value=body["value"], unit=body.get("unit", ""),
                                 section=body.get("section", ""), doc=body.get("doc", ""))
    return entries


def _typed(name: str, value: object, kind: type, path: Path) -> float | int:
    """``value`` as the field's type: an int field takes an integral number, a float field any number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"constant {name} in {path} must be a number, got {value!r}", path=str(path),
                          constant=name, value=value)
    if kind is int:
        if not float(value).is_integer():
            raise ConfigError(f"constant {name} in {path} must be an integer, got {value!r}", path=str(path),
                              constant=name, value=value)
        return int(value)
    return float(value)


def load_constants(path: Path = APPENDIX_B_PATH) -> Constants:
    """Every appendix-B constant from ``path``: an unknown or a missing one is an error."""
    entries = read_entries(path)
    kinds = typing.get_type_hints(Constants)
    fields = [f.name for f in dataclasses.fields(Constants)]
    unknown = sorted(set(entries) - set(fields))
    if unknown:
        raise ConfigError(f"unknown constants in {path}: {', '.join(unknown)}", path=str(path), constants=unknown)
    missing = [n for n in fields if n not in entries]
    if missing:
        raise ConfigError(f"constants missing from {path}: {', '.join(missing)}", path=str(path), constants=missing)
    return Constants(**{n: _typed(n, entries[n].value, kinds[n], Path(path)) for n in fields})


@functools.cache
def _appendix_b() -> Constants:
    return load_constants(APPENDIX_B_PATH)
