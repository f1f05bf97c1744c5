"""lab.cluster.row_factory: uuid_from_bytes (the driver's UUID cells), in both implementations (the Python
function and lab_native's compiled one), is the very uuid.UUID the constructor builds, for every 16 bytes,
and anything else returns or raises what the constructor does; neither leaks a reference; the repo venv
installs the compiled one and the driver's deserializers use it once installed; the row factory's rows are
the driver's named tuples. Pure: no node (tests/node/test_batch.py and the read paths' node tests read UUIDs
through it)."""
from __future__ import annotations

import copy
import importlib
import pickle
import random
import sys
import uuid
import weakref

import cassandra.cqltypes
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lab.cluster import row_factory
from lab.cluster.row_factory import install_uuid_deserializer, python_uuid_from_bytes, uuid_from_bytes

try:
    import lab_native
except ImportError:
    lab_native = None
COMPILED = getattr(lab_native, "uuid_from_bytes", None)
IMPLEMENTATIONS = [pytest.param(python_uuid_from_bytes, id="python"),
                   pytest.param(COMPILED, id="compiled", marks=pytest.mark.skipif(
                       COMPILED is None, reason="lab_native without uuid_from_bytes: `make venv` builds native/"))]
PROPERTY = settings(max_examples=300, deadline=None)
RANDOM_VALUES = 5000
LEAK_CALLS = 100_000
# another thread may hold a UUID (so a reference to SafeUUID.unknown and to the class) for a moment; a
# reference leaked per call would show as LEAK_CALLS
SHARED_REFCOUNT_SLACK = 1000


def assert_same_uuid(made, expected):
    """``made`` is ``expected`` in every respect a caller can see."""
    assert type(made) is uuid.UUID and not hasattr(made, "__dict__")
    assert type(made.int) is int and made.int == expected.int
    assert made.is_safe is expected.is_safe is uuid.SafeUUID.unknown
    assert made == expected and hash(made) == hash(expected) and not made != expected
    assert (str(made), repr(made), made.bytes, made.bytes_le, made.fields, made.hex, made.urn, made.version,
            made.variant, made.time, made.clock_seq, made.node) == (
        str(expected), repr(expected), expected.bytes, expected.bytes_le, expected.fields, expected.hex,
        expected.urn, expected.version, expected.variant, expected.time, expected.clock_seq, expected.node)
    assert made.__getstate__() == expected.__getstate__()
    assert made.__reduce_ex__(pickle.HIGHEST_PROTOCOL)[2] == expected.__reduce_ex__(pickle.HIGHEST_PROTOCOL)[2]
    assert weakref.ref(made)() is made


def outcome(make, value):
    """What ``make(bytes=value)`` gives: the UUID, or the error's type and message."""
    try:
        return make(bytes=value)
    except Exception as exc:  # the constructor's errors: ValueError, TypeError, AssertionError
        return type(exc), str(exc)


def assert_same_outcome(make, value):
    got, expected = outcome(make, value), outcome(uuid.UUID, value)
    if isinstance(expected, uuid.UUID):
        assert_same_uuid(got, expected)
    else:
        assert got == expected


@pytest.mark.parametrize("make", IMPLEMENTATIONS)
@pytest.mark.parametrize("value", [uuid.UUID(int=0), uuid.UUID(int=(1 << 128) - 1), uuid.uuid1(), uuid.uuid4(),
                                   uuid.uuid5(uuid.NAMESPACE_DNS, "lab"), *(uuid.UUID(int=random.Random(i).getrandbits(128))
                                                                           for i in range(20))])
def test_the_same_uuid_as_the_constructor(make, value):
    made, expected = make(bytes=value.bytes), uuid.UUID(bytes=value.bytes)
    assert_same_uuid(made, expected)
    assert sorted([made, uuid.UUID(int=1)]) == sorted([expected, uuid.UUID(int=1)])
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        back = pickle.loads(pickle.dumps(made, protocol))
        assert back == expected and back.is_safe is uuid.SafeUUID.unknown
    assert_same_uuid(copy.copy(made), expected)
    assert_same_uuid(copy.deepcopy(made), expected)
    assert {made: 1}[expected] == 1
    with pytest.raises(TypeError):  # immutable, as the constructor's
        made.int = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        made.is_safe = uuid.SafeUUID.safe  # type: ignore[misc]


@pytest.mark.parametrize("make", IMPLEMENTATIONS)
def test_thousands_of_random_values_field_for_field(make):
    rng = random.Random(20261202)
    for _ in range(RANDOM_VALUES):
        raw = rng.randbytes(16)
        made, expected = make(bytes=raw), uuid.UUID(bytes=raw)
        assert type(made) is uuid.UUID and made.int == expected.int and made.is_safe is expected.is_safe
        assert made == expected and hash(made) == hash(expected) and str(made) == str(expected)
        assert made.bytes == raw


@pytest.mark.parametrize("make", IMPLEMENTATIONS)
@PROPERTY
@given(raw=st.binary(min_size=16, max_size=16))
def test_any_16_bytes_make_the_constructor_s_uuid(make, raw):
    made = make(bytes=raw)
    assert_same_uuid(made, uuid.UUID(bytes=raw))
    assert pickle.loads(pickle.dumps(made)) == made


@pytest.mark.parametrize("make", IMPLEMENTATIONS)
@PROPERTY
@given(raw=st.binary(max_size=40).filter(lambda b: len(b) != 16))
def test_any_other_length_fails_as_the_constructor_does(make, raw):
    assert_same_outcome(make, raw)


class _Bytes(bytes):
    pass


@pytest.mark.parametrize("make", IMPLEMENTATIONS)
@pytest.mark.parametrize("value", [b"", b"x" * 15, b"x" * 17, bytearray(15), bytearray(16), bytearray(17), "x" * 15,
                                   "x" * 16, None, 0, 16, memoryview(bytes(16)), list(range(16)), _Bytes(16),
                                   _Bytes(b"x" * 15)], ids=lambda value: f"{type(value).__name__}-{value!r:.20}")
def test_anything_but_16_bytes_returns_or_raises_what_the_constructor_does(make, value):
    assert_same_outcome(make, value)


@pytest.mark.parametrize("make", IMPLEMENTATIONS)
def test_the_keyword_only_signature(make):
    raw = bytes(16)
    with pytest.raises(TypeError):
        make(raw)
    with pytest.raises(TypeError):
        make()
    with pytest.raises(TypeError):
        make(bytes=raw, version=4)


@pytest.mark.parametrize("make", IMPLEMENTATIONS)
def test_no_reference_leaks(make):
    raw = random.Random(7).randbytes(16)  # this test's own object: nothing else touches its count
    short = b"\x01" * 15
    unknown, made_before = uuid.SafeUUID.unknown, make(bytes=raw)
    del made_before
    before = sys.getrefcount(raw), sys.getrefcount(short), sys.getrefcount(unknown), sys.getrefcount(uuid.UUID)
    for _ in range(LEAK_CALLS):
        make(bytes=raw)
    for _ in range(LEAK_CALLS // 10):  # the constructor's error path
        try:
            make(bytes=short)
        except ValueError:
            pass
    kept = [make(bytes=raw) for _ in range(1000)]
    assert sys.getrefcount(unknown) >= before[2] + len(kept) - SHARED_REFCOUNT_SLACK
    del kept
    after = sys.getrefcount(raw), sys.getrefcount(short), sys.getrefcount(unknown), sys.getrefcount(uuid.UUID)
    assert after[:2] == before[:2]
    assert abs(after[2] - before[2]) < SHARED_REFCOUNT_SLACK and abs(after[3] - before[3]) < SHARED_REFCOUNT_SLACK


def test_the_repo_venv_installs_the_compiled_one():
    """`make venv` builds native/: without it every UUID cell pays a Python frame."""
    assert COMPILED is not None, "lab_native has no uuid_from_bytes: run `make venv` (it builds native/)"
    assert lab_native.UUID_FAST_PATH is True, "lab_native refused this Python's uuid.UUID layout"
    assert row_factory.UUID_FROM_BYTES_PATH == "compiled" and uuid_from_bytes is COMPILED


@pytest.mark.skipif(COMPILED is None, reason="lab_native without uuid_from_bytes: `make venv` builds native/")
def test_the_compiled_one_refuses_any_other_class_layout():
    """The direct path writes two slots at offsets read from the class: only where the class has exactly
    uuid.UUID's slots on a plain object base (the layout this Python's uuid.UUID has)."""
    offsets = lab_native._uuid_slot_offsets

    class Same:
        __slots__ = ("int", "is_safe", "__weakref__")

    class NoWeakref:
        __slots__ = ("int", "is_safe")

    class OneMore:
        __slots__ = ("int", "is_safe", "__weakref__", "cached")

    class WithDict:
        __slots__ = ("int", "is_safe", "__weakref__", "__dict__")

    class Inherited(Same):
        __slots__ = ()

    class Base:
        __slots__ = ()

    class OnAnotherBase(Base):
        __slots__ = ("int", "is_safe", "__weakref__")

    class Overridden:
        __slots__ = ("int", "is_safe", "__weakref__")

    Overridden.int = property(lambda self: 0)  # type: ignore[assignment]
    assert offsets(uuid.UUID) is not None and offsets(Same) is not None
    assert len(set(offsets(uuid.UUID))) == 2
    for cls in (NoWeakref, OneMore, WithDict, Inherited, OnAnotherBase, Overridden, int, Base):
        assert offsets(cls) is None, cls


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
