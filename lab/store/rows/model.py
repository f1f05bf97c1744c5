"""The store's enumerations, stored as CQL ``tinyint``.

Values are part of the on-disk format: never renumber a member, only add. ``parse_enum``
is the one gate between outside input (CLI flags, TOML, rows read back) and these types,
so an unknown value is rejected before anything is written.
"""
from __future__ import annotations

import enum
import numbers
from typing import TypeVar

from lab.errors import UnknownEnum, UnknownRetentionClass, ValidationError


class MessageType(enum.IntEnum):
    TEXT = 1
    IMAGE = 2
    VIDEO = 3
    AUDIO = 4
    FILE = 5
    CUSTOM = 6
    CONTROL = 7  # recall/edit events carry their own conversation_seq (§5.3)


class MessageState(enum.IntEnum):
    NORMAL = 0
    RECALLED = 1  # a rendering flag only: the row stays until TTL or crypto-erasure (§5.3)
    EDITED = 2
    DELETED = 3


class DedupState(enum.IntEnum):
    RESERVED = 0
    COMMITTED = 1  # only COMMITTED lets a retry replay SEND_ACK (§5.1)


class RetentionClass(enum.IntEnum):
    """§2.1's set; the policy that turns it into a TTL lives in :mod:`lab.store.rows.retention`.

    Defined here with the other tinyint enums so row types can use it without importing
    the policy module.
    """

    DEFAULT = 0
    EPHEMERAL_24H = 1
    COMPLIANCE_HOLD = 2
    TENANT_CUSTOM = 3


E = TypeVar("E", bound=enum.IntEnum)

# RetentionClass has its own error because the design fixes that set (§0) and the CLI
# reports it by name; every other enum shares UnknownEnum.
_ERRORS: dict[type[enum.IntEnum], type[ValidationError]] = {RetentionClass: UnknownRetentionClass}


def parse_enum(enum_cls: type[E], value: object) -> E:
    """A member of ``enum_cls`` from a member, its int value, or its name (any case)."""
    error = _ERRORS.get(enum_cls, UnknownEnum)
    if isinstance(value, enum_cls):
        return value
    if isinstance(value, enum.Enum):
        # Another enum's member is an int too; accepting it would store MessageState.EDITED
        # as MessageType.IMAGE.
        raise error(f"{value!r} is not a {enum_cls.__name__}", enum=enum_cls.__name__, value=value)
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        try:
            return enum_cls(int(value))
        except ValueError:
            pass
    elif isinstance(value, str):
        member = enum_cls.__members__.get(value.strip().upper())
        if member is not None:
            return member
    allowed = ", ".join(f"{m.name.lower()}={m.value}" for m in enum_cls)
    raise error(f"unknown {enum_cls.__name__} {value!r} (allowed: {allowed})",
                enum=enum_cls.__name__, value=value)
