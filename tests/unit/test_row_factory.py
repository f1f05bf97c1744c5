"""lab.cluster.row_factory: uuid_from_bytes (the driver's UUID cells) is the very
uuid.UUID the constructor builds, for every kind of UUID, and the driver's deserializers use it
once installed; the row factory's rows are the driver's named tuples. Pure: no node (tests/node/test_batch.py and the read paths' node tests read UUIDs
through it)."""
from __future__ import annotations

import importlib
import pickle
import random
import uuid

import cassandra.cqltypes
import pytest

from lab.cluster.row_factory import install_uuid_deserializer, uuid_from_bytes


@pytest.mark.parametrize("value", [uuid.UUID(int=0), uuid.UUID(int=(1 << 128) - 1), uuid.uuid1(), uuid.uuid4(),
                                   uuid.uuid5(uuid.NAMESPACE_DNS, "lab"), *(uuid.UUID(int=random.Random(i).getrandbits(128))
                                                                           for i in range(20))])
def test_the_same_uuid_as_the_constructor(value):
    made, expected = uuid_from_bytes(bytes=value.bytes), uuid.UUID(bytes=value.bytes)
    assert type(made) is uuid.UUID and made == expected and hash(made) == hash(expected)
    assert (str(made), made.version, made.variant, made.is_safe) == (str(expected), expected.version,
                                                                     expected.variant, expected.is_safe)
    assert sorted([made, uuid.UUID(int=1)]) == sorted([expected, uuid.UUID(int=1)])
    assert pickle.loads(pickle.dumps(made)) == expected
    with pytest.raises(TypeError):  # immutable, as the constructor's
        made.int = 5  # type: ignore[misc]


def test_anything_but_16_bytes_fails_as_the_constructor_does():
    for bad in (b"", b"x" * 15, b"x" * 17):
        with pytest.raises(ValueError):
            uuid_from_bytes(bytes=bad)


def test_the_driver_deserializes_with_it_once_installed():
    install_uuid_deserializer()
    install_uuid_deserializer()  # idempotent
    assert cassandra.cqltypes.UUID is uuid_from_bytes
    try:
        compiled = importlib.import_module("cassandra.deserializers")
    except ImportError:  # a driver built without its Cython extensions
        compiled = None
    assert compiled is None or compiled.UUID is uuid_from_bytes
    value = uuid.uuid4()
    for cql_type in (cassandra.cqltypes.UUIDType, cassandra.cqltypes.TimeUUIDType):
        got = cql_type.deserialize(value.bytes, 4)
        assert type(got) is uuid.UUID and got == value


def test_the_row_factory_gives_the_driver_s_named_tuples():
    """lab.cluster.row_factory.cached_named_tuple_factory: the rows the driver's named_tuple_factory
    builds (fields, values, equality), one class per column list."""
    from cassandra.query import named_tuple_factory

    from lab.cluster.row_factory import cached_named_tuple_factory

    columns, rows = ["a", "b_c", "d"], [(1, "x", None), (2, "y", b"z")]
    ours, driver = cached_named_tuple_factory(columns, rows), named_tuple_factory(columns, rows)
    assert ours == driver and [r._fields for r in ours] == [r._fields for r in driver]
    assert [r._asdict() for r in ours] == [r._asdict() for r in driver] and ours[1].b_c == "y"
    assert type(ours[0]) is type(cached_named_tuple_factory(columns, rows[:1])[0])
    assert cached_named_tuple_factory(columns, []) == []
