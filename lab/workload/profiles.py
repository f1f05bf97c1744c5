"""Workload profiles: what a message population looks like (``lab/workload/profiles/<name>.toml``,
package data, and yours in ``datasets/profiles/<name>.toml``, which win over a packaged profile
of the same name; every field documented in ``datasets/README.md``).

More: docs/load-internals.md.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lab.constants import Constants
from lab.errors import ConfigError, ValidationError
from lab.project import DATASETS_PROFILES_DIR, PROJECT_DIR
from lab.store import RetentionClass

_DEFAULTS = Constants.appendix_b()
_PROFILE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,63}$")

PROFILES_DIR = Path(__file__).with_name("profiles")      # packaged
USER_PROFILES_DIR = DATASETS_PROFILES_DIR                   # datasets/profiles/: yours, found first
PROFILE_DIRS = (USER_PROFILES_DIR, PROFILES_DIR)
SIZES = ("quick", "full")
RETENTION_ORDER = (RetentionClass.DEFAULT, RetentionClass.EPHEMERAL_24H, RetentionClass.COMPLIANCE_HOLD,
                   RetentionClass.TENANT_CUSTOM)


@dataclass(frozen=True, kw_only=True)
class ConversationShape:
    tenants: int = 4
    messages_per_conversation_mean: float = 40.0
    group_share: float = 0.25
    group_members_median: float = 24.0
    group_members_sigma: float = 1.1
    group_members_max: int = 1000
    activity_sigma: float = 1.0
    group_activity_exponent: float = 0.3
    r_avg_target: float = 22.0
    e2ee_direct_share: float = 0.15
    e2ee_group_share: float = 0.02
    devices_per_user_max: int = 3


@dataclass(frozen=True, kw_only=True)
class MessageMix:
    text: float = 0.78
    image: float = 0.12
    video: float = 0.03
    audio: float = 0.03
    file: float = 0.02
    custom: float = 0.02
    text_bytes_median: float = 48.0
    text_bytes_sigma: float = 1.0
    text_bytes_max: int = 4096
    caption_share: float = 0.25
    caption_bytes_median: float = 30.0
    thumbnail_bytes_median: float = 6000.0
    thumbnail_bytes_sigma: float = 0.6
    thumbnail_bytes_max: int = _DEFAULTS.media_thumbnail_max_bytes
    custom_bytes_median: float = 200.0
    mention_share: float = 0.06
    mention_all_share: float = 0.005
    mention_count_mean: float = 1.5
    reply_share: float = 0.08
    reply_distance_mean: float = 6.0

    def type_weights(self) -> np.ndarray:
        w = np.array([self.text, self.image, self.video, self.audio, self.file, self.custom], dtype=float)
        if (w < 0).any() or w.sum() <= 0:
            raise ConfigError("message type weights must be >= 0 and not all 0", weights=w.tolist())
        return w / w.sum()


@dataclass(frozen=True, kw_only=True)
class HoleModel:
    window: int = _DEFAULTS.seq_reservation_window
    crash_probability: float = 0.005
    repeat_probability: float = 0.35


@dataclass(frozen=True, kw_only=True)
class Profile:
    """One workload profile; see ``datasets/README.md`` for every field."""

    name: str
    description: str = ""
    sizes: Mapping[str, int] = field(default_factory=lambda: {"quick": 2000, "full": 200_000})
    start: str = "2026-09-01T00:00:00Z"
    days: float = 28.0
    conversations: ConversationShape = field(default_factory=ConversationShape)
    retention: Mapping[str, float] = field(default_factory=lambda: {"default": 1.0})
    messages: MessageMix = field(default_factory=MessageMix)
    holes: HoleModel = field(default_factory=HoleModel)
    source_sha256: str = ""

    @property
    def start_ms(self) -> int:
        return int(_dt.datetime.fromisoformat(self.start.replace("Z", "+00:00")).timestamp() * 1000)

    def retention_weights(self) -> np.ndarray:
        names = [r.name.lower() for r in RETENTION_ORDER]
        unknown = sorted(set(self.retention) - set(names))
        if unknown:
            raise ConfigError(f"profile {self.name}: unknown retention classes {unknown}", profile=self.name)
        w = np.array([float(self.retention.get(n, 0.0)) for n in names])
        if (w < 0).any() or w.sum() <= 0:
            raise ConfigError(f"profile {self.name}: retention weights must be >= 0 and not all 0")
        return w / w.sum()

    def size(self, size: str | int) -> int:
        if isinstance(size, str):
            if size not in self.sizes:
                raise ValidationError(f"profile {self.name} has no size {size!r} (has {sorted(self.sizes)})",
                                      size=size)
            return int(self.sizes[size])
        if not isinstance(size, (int, np.integer)) or isinstance(size, bool) or size < 1:
            raise ValidationError(f"size must be 'quick', 'full' or a positive int, got {size!r}", size=size)
        return int(size)


_AT_LEAST_ONE = ("tenants", "window")  # and every ``*_max``: counts and bounds of at least 1


def _number(value: Any, default: Any, key: str, where: str) -> float | int:
    """``value`` checked against its field: an integer where the default is one, else a finite
    number; >= 0; a share or probability in [0, 1]; a count or bound >= 1."""
    integer = isinstance(default, int) and not isinstance(default, bool)
    ok = isinstance(value, int if integer else (int, float)) and not isinstance(value, bool)
    if not ok or not np.isfinite(float(value)):
        raise ConfigError(f"{where} {key}: {value!r} is not {'an integer' if integer else 'a number'}",
                          field=key, value=value)
    low, high = (1, None) if key in _AT_LEAST_ONE or key.endswith("_max") or key.startswith("sizes.") else (0, None)
    if key.endswith("_share") or key.endswith("_probability"):
        high = 1
    if value < low or (high is not None and value > high):
        bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ConfigError(f"{where} {key}: {value!r} must be {bound}", field=key, value=value)
    return value if integer else float(value)


def _section(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: not a table", field=where)
    fields = {f.name: f.default for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"{where}: unknown keys {', '.join(unknown)}", keys=unknown)
    return cls(**{k: _number(v, fields[k], k, where) for k, v in data.items()})


def _table(data: Mapping[str, Any], key: str, default: Any, where: str) -> Any:
    value = data.pop(key, default)
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: [{key}] is not a table", field=key)
    return value


def profile_from_mapping(data: Mapping[str, Any], *, source_sha256: str = "", source: str = "") -> Profile:
    """A profile from its TOML's tables, every field checked (one ConfigError naming the field)."""
    data = dict(data)
    name = data.pop("name", None)
    where = f"{source}: profile {name!r}" if source else f"profile {name!r}"
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{where}: name is {'missing' if name is None else 'not a text'}: every profile needs "
                          "name = \"...\"", field="name")
    description = data.pop("description", "")
    if not isinstance(description, str):
        raise ConfigError(f"{where}: description is not a text", field="description")
    sizes = _table(data, "sizes", {"quick": 2000, "full": 200_000}, where)
    sizes = {k: _number(v, 1, f"sizes.{k}", where) for k, v in sizes.items()}
    time_ = _table(data, "time", {}, where)
    start = time_.get("start", "2026-09-01T00:00:00Z")
    try:
        _dt.datetime.fromisoformat(str(start).replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"{where} time.start: {start!r} is not an ISO-8601 time", field="time.start") from None
    retention = {k: _number(v, 1.0, f"retention.{k}", where)
                 for k, v in _table(data, "retention", {"default": 1.0}, where).items()}
    out = dict(
        name=name, description=description, sizes=sizes, start=str(start),
        days=float(_number(time_.get("days", 28.0), 28.0, "time.days", where)),
        conversations=_section(ConversationShape, data.pop("conversations", {}), f"{where} [conversations]"),
        retention=retention,
        messages=_section(MessageMix, data.pop("messages", {}), f"{where} [messages]"),
        holes=_section(HoleModel, data.pop("holes", {}), f"{where} [holes]"),
        source_sha256=source_sha256)
    if data:
        raise ConfigError(f"{where}: unknown sections {', '.join(sorted(data))}")
    profile = Profile(**out)
    profile.messages.type_weights()
    profile.retention_weights()
    return profile


def _dirs(profiles_dir: Path | Sequence[Path] | None) -> tuple[Path, ...]:
    if profiles_dir is None:
        return PROFILE_DIRS
    return (Path(profiles_dir),) if isinstance(profiles_dir, (str, Path)) else tuple(Path(d) for d in profiles_dir)


def profile_names(profiles_dir: Path | Sequence[Path] | None = None) -> list[str]:
    """Every profile name: yours (``datasets/profiles/``) and the packaged ones."""
    return sorted({p.stem for d in _dirs(profiles_dir) for p in d.glob("*.toml")})


def profile_path(name_or_path: str | Path, profiles_dir: Path | Sequence[Path] | None = None) -> Path:
    """The file a profile name means: ``datasets/profiles/<name>.toml`` (yours) before
    ``lab/workload/profiles/<name>.toml`` (packaged); a ``.toml`` path as it is."""
    path = Path(name_or_path)
    if path.suffix == ".toml":
        return path
    if not _PROFILE_NAME.match(str(name_or_path)):
        raise ConfigError(f"{str(name_or_path)[:80]!r} is not a profile name (letters, digits, _ and -; a file "
                          "is given as a path ending in .toml)", profile=str(name_or_path))
    dirs = _dirs(profiles_dir)
    found = next((d / f"{name_or_path}.toml" for d in dirs if (d / f"{name_or_path}.toml").is_file()), None)
    if found is None:
        where = " or ".join(_shown(d) + "/" for d in dirs)
        raise ConfigError(f"no workload profile {str(name_or_path)!r} in {where} (known: "
                          f"{', '.join(profile_names(dirs))}); copy datasets/profiles/example_mix.toml to start one",
                          profile=str(name_or_path))
    return found


def _shown(path: Path) -> str:
    """A path as a user finds it: relative to the project folder when inside it."""
    try:
        return Path(path).resolve().relative_to(PROJECT_DIR).as_posix()
    except ValueError:
        return str(path)


def profile_source(name_or_path: str | Path, profiles_dir: Path | Sequence[Path] | None = None) -> str:
    """Where a profile comes from, as a user finds it (``datasets/profiles/my_mix.toml``)."""
    return _shown(profile_path(name_or_path, profiles_dir))


def load_profile(name_or_path: str | Path, profiles_dir: Path | Sequence[Path] | None = None) -> Profile:
    """A profile by name (yours in ``datasets/profiles/`` win over the packaged
    ``lab/workload/profiles/``) or by path."""
    path = profile_path(name_or_path, profiles_dir)
    try:
        raw = path.read_bytes()
        data = tomllib.loads(raw.decode())
    except FileNotFoundError:
        raise ConfigError(f"no workload profile file {path}", profile=str(name_or_path)) from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read profile {path}: {exc}", path=str(path)) from exc
    return profile_from_mapping(data, source_sha256=hashlib.sha256(raw).hexdigest(), source=_shown(path))
