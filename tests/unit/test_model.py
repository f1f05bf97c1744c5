import pytest

from lab.errors import UnknownEnum, UnknownRetentionClass, ValidationError
from lab.store.rows.model import (
    DedupState,
    MessageState,
    MessageType,
    RetentionClass,
    parse_enum,
)

# The tinyint values are the on-disk format: this table is the contract, not a restatement.
EXPECTED = {
    MessageType: {"TEXT": 1, "IMAGE": 2, "VIDEO": 3, "AUDIO": 4, "FILE": 5, "CUSTOM": 6, "CONTROL": 7},
    MessageState: {"NORMAL": 0, "RECALLED": 1, "EDITED": 2, "DELETED": 3},
    DedupState: {"RESERVED": 0, "COMMITTED": 1},
    RetentionClass: {"DEFAULT": 0, "EPHEMERAL_24H": 1, "COMPLIANCE_HOLD": 2, "TENANT_CUSTOM": 3},
}


@pytest.mark.parametrize("enum_cls", list(EXPECTED))
def test_enum_values_are_the_stored_tinyints(enum_cls):
    assert {m.name: m.value for m in enum_cls} == EXPECTED[enum_cls]
    assert all(-128 <= m.value <= 127 for m in enum_cls)


@pytest.mark.parametrize("value", [MessageType.IMAGE, 2, "IMAGE", "image", "Image", " image "])
def test_parse_enum_accepts_member_int_and_name(value):
    assert parse_enum(MessageType, value) is MessageType.IMAGE


@pytest.mark.parametrize("value", [0, 8, -1, "photo", "", "2", None, 2.0, True, False, b"TEXT"])
def test_parse_enum_rejects_values_outside_the_set(value):
    with pytest.raises(UnknownEnum) as info:
        parse_enum(MessageType, value)
    assert info.value.enum == "MessageType"
    assert info.value.value == value


def test_parse_enum_rejects_another_enums_member_even_with_a_valid_int():
    with pytest.raises(UnknownEnum):
        parse_enum(MessageType, MessageState.EDITED)  # == 2 == IMAGE


def test_retention_class_has_its_own_error():
    assert parse_enum(RetentionClass, "compliance_hold") is RetentionClass.COMPLIANCE_HOLD
    with pytest.raises(UnknownRetentionClass):
        parse_enum(RetentionClass, "forever")
    with pytest.raises(UnknownRetentionClass):
        parse_enum(RetentionClass, 4)


def test_unknown_enum_is_a_validation_error():
    with pytest.raises(ValidationError):
        parse_enum(DedupState, 2)
    with pytest.raises(ValueError):  # ValidationError is also a ValueError for plain callers
        parse_enum(DedupState, "pending")
