"""The one way in for a run folder's files: a colleague's run or a CI artefact is input.

Every JSON file of a run is read by :func:`read_run_json`; fields are taken with :class:`Fields`
(type-checked, named ``file: field``), figures with :func:`figure`, and a values file's parsing
runs under :func:`parse_run_values`; every path a run file names goes through :func:`inside`.
Any problem is one :class:`~lab.errors.BadRunFile` naming the file and the field.

More: docs/measure-internals.md.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lab.errors import BadRunFile, LabError

__all__ = ["Fields", "MAX_FIGURE", "MAX_RUN_FILE_BYTES", "check_name", "figure", "inside", "is_figure",
           "parse_run_values", "read_run_json"]

MAX_RUN_FILE_BYTES = 256 * 1024 * 1024   # a run file larger than this is not one the lab wrote
MAX_FIGURE = 1e9                         # no figure a run writes comes near it (ms, rates, cores, factors)
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_TYPE_WORDS = {dict: "a JSON object", list: "a list", str: "a string", bool: "true or false",
               int: "an integer", float: "a number"}


def _words(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(_TYPE_WORDS.get(k, k.__name__) for k in kinds if k is not type(None)) + (
        " or null" if type(None) in kinds else "")


def read_run_json(path: Path | str, *, expect: type = dict) -> Any:
    """The JSON in ``path`` whose top level is ``expect``; anything else is one BadRunFile."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_RUN_FILE_BYTES:
            raise BadRunFile(f"{path}: larger than {MAX_RUN_FILE_BYTES // 2**20} MiB: not a file the lab wrote",
                             file=str(path), field=None)
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)  # NaN is read as Python reads it; a typed field refuses it (Fields.get)
    except BadRunFile:
        raise
    except UnicodeDecodeError as exc:
        raise BadRunFile(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})", file=str(path),
                         field=None) from None
    except json.JSONDecodeError as exc:
        raise BadRunFile(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno} column {exc.colno})",
                         file=str(path), field=None) from None
    except (ValueError, RecursionError) as exc:  # a 5,000-digit integer, NaN, nesting too deep
        raise BadRunFile(f"{path}: not valid JSON ({str(exc).splitlines()[0][:120]})", file=str(path),
                         field=None) from None
    except OSError as exc:
        raise BadRunFile(f"{path}: cannot be read ({exc.strerror or exc})", file=str(path), field=None) from None
    if not isinstance(data, expect):
        raise BadRunFile(f"{path}: the file holds {_words(type(data))}, expected {_words(expect)}",
                         file=str(path), field=None)
    return data


def is_figure(value: Any, *, low: float = 0.0, inclusive: bool = False, high: float = MAX_FIGURE) -> bool:
    """``value`` is a finite number (not a bool) above ``low`` (or at it, ``inclusive``), at most ``high``."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            and (value >= low if inclusive else value > low) and value <= high)


def figure(value: Any, field: str, *, low: float = 0.0, inclusive: bool = False, high: float = MAX_FIGURE) -> float:
    """``value`` as a float when :func:`is_figure`, else a ValueError naming ``field`` (one line)."""
    if not is_figure(value, low=low, inclusive=inclusive, high=high):
        bounds = f"{'[' if inclusive else '('}{low:g}, {high:g}]"
        raise ValueError(f"{field}: {str(value)[:40]!r} is not a number in {bounds}")
    return float(value)


def parse_run_values(path: Path | str, values: Any, parse: Any) -> Any:
    """``parse(values)`` for the file at ``path``: a field of a kind or size the lab never writes
    (a string for a number, a list for an object, NaN, 1e308) is one BadRunFile naming the file,
    not a traceback of the parser. Errors of the lab's own tree pass unchanged."""
    try:
        return parse(values)
    except LabError:
        raise
    except (TypeError, ValueError, AttributeError, KeyError, OverflowError, IndexError) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0][:160]
        raise BadRunFile(f"{path}: not as the lab writes it ({first})", file=str(path), field=None) from None


class Fields:
    """Typed access to one file's fields: ``Fields(path).get(data, "notebooks", dict)``."""

    def __init__(self, file: Path | str) -> None:
        self.file = str(file)

    def fail(self, field: str, message: str) -> BadRunFile:
        return BadRunFile(f"{self.file}: {field}: {message}", file=self.file, field=field)

    def get(self, data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], *, where: str = "",
            required: bool = False, default: Any = None) -> Any:
        """``data[key]`` checked to be ``kind`` (a bool is not a number; NaN not a number);
        ``default`` when absent or null and not ``required``."""
        name = f"{where}.{key}" if where else key
        if not isinstance(data, Mapping):
            raise self.fail(where or "(top level)", f"is {_words(type(data))}, expected a JSON object")
        value = data.get(key)
        if value is None:
            if required:
                raise self.fail(name, "missing")
            return default
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if float in kinds and int not in kinds and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
        if ok and isinstance(value, float) and not math.isfinite(value):
            ok = False
        if not ok:
            raise self.fail(name, f"is {_words(type(value))}, expected {_words(kind)}")
        return value

    def name(self, value: Any, field: str) -> str:
        return check_name(value, file=self.file, field=field)


def check_name(value: Any, *, file: str, field: str) -> str:
    """``value`` as a name that is safe as one path component (letters, digits, ``_ . -``; no
    ``..``, no separator, not absolute), else BadRunFile."""
    if not isinstance(value, str) or not _NAME.match(value) or ".." in value:
        raise BadRunFile(f"{file}: {field}: {str(value)[:80]!r} is not a plain name (letters, digits, _ . -)",
                         file=file, field=field)
    return value


def inside(root: Path | str, path: Path | str, *, file: str = "", field: str = "") -> Path:
    """``path`` (relative to ``root``, or absolute) resolved, proven inside ``root``: no ``..``
    out of it and no symbolic link on the way. Else BadRunFile naming ``file`` and ``field``."""
    root = Path(root).resolve()
    candidate = Path(path) if Path(path).is_absolute() else root / path
    where = f"{file}: {field}: " if file or field else ""
    if ".." in Path(path).parts:
        raise BadRunFile(f"{where}{str(path)[:120]!r} leaves the run folder {root}", file=file, field=field)
    try:
        rel = candidate.relative_to(root)
    except ValueError:
        raise BadRunFile(f"{where}{str(path)[:120]!r} is outside the run folder {root}",
                         file=file, field=field) from None
    walk = root
    for part in rel.parts:
        walk = walk / part
        if walk.is_symlink():
            raise BadRunFile(f"{where}{str(path)[:120]!r} goes through a symbolic link ({walk})",
                             file=file, field=field)
    return candidate
