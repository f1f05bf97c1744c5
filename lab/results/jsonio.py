"""Result files as JSON: written atomically, with one conversion of the lab's values to JSON.

:func:`write_json` writes a temporary file beside the target and renames it over the target
(``os.replace`` is atomic on POSIX): a reader, a crash or a second writer never leaves half a
file. :func:`jsonable` is the one conversion: results with ``to_json()``, dataclasses,
numpy scalars and arrays, paths, tuples; NaN becomes null (JSON has no NaN).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np


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


def dumps(data: Any, *, indent: int | None = 2, sort_keys: bool = False) -> str:
    return json.dumps(jsonable(data), indent=indent, sort_keys=sort_keys) + "\n"


def write_json(path: Path | str, data: Any, *, indent: int | None = 2, sort_keys: bool = False) -> Path:
    """``data`` (through :func:`jsonable`) to ``path``, atomically."""
    path = Path(path)
    text = dumps(data, indent=indent, sort_keys=sort_keys)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def read_json(path: Path | str) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))
