"""Result files as JSON: written atomically, with one conversion of the lab's values to JSON.

More: docs/measure-internals.md.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from lab.errors import ValidationError


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON types."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(value.to_json() if hasattr(value, "to_json") else dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset, np.ndarray)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return None if math.isnan(v) or math.isinf(v) else v
    if isinstance(value, Path):
        return str(value)
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


Cast = Callable[[Any], Any]


def flatten(table: Any, name: str, values: Mapping[str, Cast | str | tuple[str, Cast]] | Iterable[str]) -> dict[str, Any]:
    """A table's rows as flat values: for every row (a DataFrame's records) and every value,
    ``name.format(value=<value>, **row)`` -> that row's column, converted.

    ``values`` maps a value's name to a cast (int, float, ...: the column of the same name),
    to a column name (converted by :func:`jsonable`), or to ``(column, cast)``; a plain list
    of columns converts each by :func:`jsonable` (numpy to plain, NaN to None). E.g.
    ``flatten(df, "{shape}_{method}_{value}", {"p50_ms": float, "entries": int})`` gives
    ``{"s1_group_500_grouped_p50_ms": 4.2, "s1_group_500_grouped_entries": 500, ...}``."""
    spec: dict[str, tuple[str, Cast]] = {}
    for value, how in (values.items() if isinstance(values, Mapping) else ((v, v) for v in values)):
        column, cast = how if isinstance(how, tuple) else (how, jsonable) if isinstance(how, str) else (value, how)
        spec[value] = (column, cast)
    out: dict[str, Any] = {}
    for row in table.to_dict("records"):
        for value, (column, cast) in spec.items():
            key = name.format(value=value, **row)
            if key in out:
                raise ValidationError(f"two rows give the value name {key!r}: is {name!r} missing a key column?",
                                      field="name", value=key)
            out[key] = cast(row[column])
    return out


def dumps(data: Any, *, indent: int | None = 2, sort_keys: bool = False) -> str:
    return json.dumps(jsonable(data), indent=indent, sort_keys=sort_keys) + "\n"


def write_json(path: Path | str, data: Any, *, indent: int | None = 2, sort_keys: bool = False) -> Path:
    """``data`` (through :func:`jsonable`) to ``path``, atomically."""
    return write_atomic(path, dumps(data, indent=indent, sort_keys=sort_keys).encode("utf-8"))


def write_atomic(path: Path | str, data: bytes) -> Path:
    """``data`` to ``path``, whole or not at all: a reader never sees half a file."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def read_json(path: Path | str) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))
