"""The row factory of the lab's sessions: the driver's named tuples, one class per column list.

More: docs/cluster-internals.md.
"""
from __future__ import annotations

import functools
import uuid
from collections import namedtuple
from collections.abc import Callable, Sequence
from typing import Any

from cassandra.query import _clean_column_name, named_tuple_factory

__all__ = ["ROW_CLASS_CACHE_ENTRIES", "UUID_FROM_BYTES_PATH", "cached_named_tuple_factory", "install_uuid_deserializer",
           "python_uuid_from_bytes", "uuid_from_bytes"]

# distinct column lists a process selects; far above the lab's few dozen statements
ROW_CLASS_CACHE_ENTRIES = 4096


@functools.lru_cache(maxsize=ROW_CLASS_CACHE_ENTRIES)
def _row_maker(colnames: tuple[str, ...]) -> Any:
    """``tuple.__new__`` bound to the column list's row class: what ``Row._make`` does without its
    Python frame per row (7.8% of a grouped 500-row read's GIL samples; the driver gives every row
    exactly its columns, so ``_make``'s length check never fires), or None."""
    try:
        row_class = namedtuple("Row", [_clean_column_name(name) for name in colnames])
    except Exception:  # names namedtuple refuses: the driver's own factory sanitises them (and warns)
        return None
    return functools.partial(tuple.__new__, row_class)


def cached_named_tuple_factory(colnames: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[Any]:
    """Rows as named tuples, exactly what the driver's ``named_tuple_factory`` returns."""
    make = _row_maker(tuple(colnames))
    if make is None:
        return named_tuple_factory(colnames, rows)
    return list(map(make, rows))


_UUID, _SAFE_UNKNOWN, _BYTES = uuid.UUID, uuid.SafeUUID.unknown, bytes
_new, _set, _from_bytes = object.__new__, object.__setattr__, int.from_bytes
_UUID_BYTES = 16


def python_uuid_from_bytes(*, bytes: bytes) -> uuid.UUID:  # noqa: A002 (the driver calls it with bytes=)
    """``uuid.UUID(bytes=bytes)`` without the general constructor for 16 bytes; anything else (another
    length, not exactly bytes) takes the constructor, and its value or error."""
    if type(bytes) is not _BYTES or len(bytes) != _UUID_BYTES:
        return _UUID(bytes=bytes)
    value = _new(_UUID)
    _set(value, "int", _from_bytes(bytes, "big"))
    _set(value, "is_safe", _SAFE_UNKNOWN)
    return value


try:  # the same function compiled (native/, installed by `make venv`): no Python frame per cell
    from lab_native import UUID_FAST_PATH as _NATIVE_FAST
    from lab_native import uuid_from_bytes as _native_uuid_from_bytes
except ImportError:  # a venv without native/ (or a build of it from before the function)
    _NATIVE_FAST, _native_uuid_from_bytes = False, None
# the compiled one only where it reads uuid.UUID's slots: on another layout it turns its direct path off
# and only calls the constructor, slower than the Python function
uuid_from_bytes: Callable[..., uuid.UUID] = (_native_uuid_from_bytes if _NATIVE_FAST and _native_uuid_from_bytes
                                             else python_uuid_from_bytes)
# which one this process installs: "compiled" or "python"
UUID_FROM_BYTES_PATH = "compiled" if uuid_from_bytes is not python_uuid_from_bytes else "python"


def install_uuid_deserializer() -> None:
    """The driver's deserializers (compiled and pure) build UUID cells with ``uuid_from_bytes``:
    their module's ``UUID`` name, which they use for nothing else. Idempotent."""
    import cassandra.cqltypes
    modules: list = [cassandra.cqltypes]
    try:
        import cassandra.deserializers
        modules.append(cassandra.deserializers)
    except ImportError:  # a driver built without its Cython extensions
        pass
    for module in modules:
        if getattr(module, "UUID", None) is _UUID:
            module.UUID = uuid_from_bytes
