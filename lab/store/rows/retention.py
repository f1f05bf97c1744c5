"""From retention_class to a per-row ``USING TTL`` (design §2.1, §3).

More: docs/store-internals.md.
"""
from __future__ import annotations

import numbers
import tomllib
import types
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from lab.constants import Constants
from lab.errors import ConfigError, ValidationError
from lab.store.rows.ids import parse_uuid
from lab.store.rows.model import RetentionClass, parse_enum

__all__ = ["CASSANDRA_MAX_TTL_SECONDS", "NO_TTL", "RetentionClass", "RetentionPolicy",
           "parse_retention_class"]

_DEFAULTS = Constants.appendix_b()

SECONDS_PER_DAY = 86_400
NO_TTL = 0  # CQL's "USING TTL 0": the row never expires
CASSANDRA_MAX_TTL_SECONDS = 630_720_000  # 20 years; the server rejects anything larger


def parse_retention_class(value: object) -> RetentionClass:
    """From a member, its tinyint, or a name such as "ephemeral_24h"."""
    return parse_enum(RetentionClass, value)


def _check_ttl(value: object, *, what: str) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise ValidationError(f"{what} must be an int number of seconds, got {value!r}", field=what, value=value)
    value = int(value)
    if not 1 <= value <= CASSANDRA_MAX_TTL_SECONDS:
        raise ValidationError(f"{what}={value} s is outside 1..{CASSANDRA_MAX_TTL_SECONDS} "
                              "(Cassandra's maximum TTL)", field=what, value=value)
    return value


def _tenant_ttls(mapping: Mapping[uuid.UUID | str, int], *, what: str) -> Mapping[uuid.UUID, int]:
    if not isinstance(mapping, Mapping):
        raise ValidationError(f"{what} must be a mapping tenant_id -> seconds", field=what)
    checked = {parse_uuid(tenant): _check_ttl(ttl, what=f"{what}[{tenant}]") for tenant, ttl in mapping.items()}
    return types.MappingProxyType(checked)


@dataclass(frozen=True, kw_only=True)
class RetentionPolicy:
    """The lab's tenant -> TTL mapping (design §9 leaves its source open; the lab owns it)."""

    default_days: int = _DEFAULTS.default_retention_days
    ephemeral_ttl_seconds: int = _DEFAULTS.ephemeral_ttl_seconds
    tenant_default_ttl_seconds: Mapping[uuid.UUID, int] = field(default_factory=dict)
    tenant_custom_ttl_seconds: Mapping[uuid.UUID, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.default_days, numbers.Integral) or isinstance(self.default_days, bool):
            raise ValidationError(f"default_days must be an int, got {self.default_days!r}",
                                  field="default_days", value=self.default_days)
        _check_ttl(int(self.default_days) * SECONDS_PER_DAY, what="default_days * 86400")
        _check_ttl(self.ephemeral_ttl_seconds, what="ephemeral_ttl_seconds")
        # Read-only copies: a caller mutating its dict afterwards must not change TTLs.
        for name in ("tenant_default_ttl_seconds", "tenant_custom_ttl_seconds"):
            object.__setattr__(self, name, _tenant_ttls(getattr(self, name), what=name))

    @classmethod
    def from_constants(cls, constants: Constants, **overrides: object) -> RetentionPolicy:
        return cls(default_days=constants.default_retention_days,
                   ephemeral_ttl_seconds=constants.ephemeral_ttl_seconds, **overrides)  # type: ignore[arg-type]

    @classmethod
    def from_mapping(cls, data: Mapping[str, object], *, constants: Constants = _DEFAULTS) -> RetentionPolicy:
        """From a parsed config, e.g. the TOML the CLI loads::

            default_days = 30                 # optional, else appendix B
            ephemeral_ttl_seconds = 86400     # optional, else appendix B
            [tenant_default_ttl_seconds]      # tenant -> seconds, overrides default_days
            "6f1c...-..." = 7776000
            [tenant_custom_ttl_seconds]       # tenant -> seconds for tenant_custom
            "6f1c...-..." = 31536000
        """
        known = {"default_days", "ephemeral_ttl_seconds", "tenant_default_ttl_seconds", "tenant_custom_ttl_seconds"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown retention settings: {', '.join(unknown)}", keys=unknown)
        values = {"default_days": constants.default_retention_days,
                  "ephemeral_ttl_seconds": constants.ephemeral_ttl_seconds}
        values.update(data)
        return cls(**values)  # type: ignore[arg-type]

    @classmethod
    def from_toml(cls, path: Path | str, *, constants: Constants = _DEFAULTS) -> RetentionPolicy:
        try:
            data = tomllib.loads(Path(path).read_text())
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read retention file {path}: {exc}", path=str(path)) from exc
        return cls.from_mapping(data, constants=constants)

    def ttl_seconds(self, retention_class: RetentionClass | int | str, tenant_id: uuid.UUID | str) -> int:
        """Full-period TTL for a row written now; 0 means no TTL."""
        retention_class = parse_retention_class(retention_class)
        tenant_id = parse_uuid(tenant_id)
        if retention_class is RetentionClass.DEFAULT:
            return self.tenant_default_ttl_seconds.get(tenant_id, self.default_days * SECONDS_PER_DAY)
        if retention_class is RetentionClass.EPHEMERAL_24H:
            return self.ephemeral_ttl_seconds
        if retention_class is RetentionClass.TENANT_CUSTOM:
            return self.tenant_custom_ttl_seconds.get(tenant_id, NO_TTL)
        return NO_TTL  # COMPLIANCE_HOLD

    def remaining_ttl_seconds(self, retention_class: RetentionClass | int | str, tenant_id: uuid.UUID | str,
                              *, created_at_ms: int, now_ms: int) -> int | None:
        """TTL for a late/archive write: ``created_at + period - now``, rounded up.

        Returns 0 for classes without TTL and ``None`` when the row has already expired:
        the caller must skip that write (``USING TTL 0`` would keep it forever).
        A created_at ahead of ``now`` (clock skew) is capped at the full period, so no row
        ever lives longer than its class allows from the moment it is written.
        """
        for name, value in (("created_at_ms", created_at_ms), ("now_ms", now_ms)):
            if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 0:
                raise ValidationError(f"{name} must be a non-negative int, got {value!r}", field=name, value=value)
        period = self.ttl_seconds(retention_class, tenant_id)
        if period == NO_TTL:
            return NO_TTL
        remaining_ms = int(created_at_ms) + period * 1000 - int(now_ms)
        if remaining_ms <= 0:
            return None
        return min(period, -(-remaining_ms // 1000))  # integer ceil: floats lose ms at 2**53
