"""How every lab configuration is filled, defined once: flags > ``LAB_*`` variables > a table of
the TOML file > defaults. :mod:`lab.cluster.config` (``[cluster]``) and
:mod:`lab.cluster.services` (``[services]``) declare their fields and coerce their own values;
reading the file, layering the sources and refusing unknown keys are here.
"""
from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from lab.errors import ConfigError

ENV_PREFIX = "LAB_"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def read_table(toml_path: Path | str, table: str, *, whole_file_default: bool = False) -> dict[str, Any]:
    """The ``[table]`` of a TOML file; with ``whole_file_default`` a file without that table is
    read as the table itself (a bare ``lab.toml`` of cluster keys)."""
    try:
        data = tomllib.loads(Path(toml_path).read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file {toml_path} does not exist", path=str(toml_path)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {toml_path} is not valid TOML: {exc}", path=str(toml_path)) from None
    return dict(data.get(table, data if whole_file_default else {}))


def layered(known: Iterable[str], *, file_values: Mapping[str, Any], env: Mapping[str, str] | None,
            flags: Mapping[str, Any] | None, where: str, env_exclude: Iterable[str] = ()) -> dict[str, Any]:
    """The raw values of the known fields, each from its strongest source. Unknown keys in the
    file or the flags are errors naming ``where`` they came from; unknown ``LAB_*`` variables
    belong to other settings and are passed over, as are the fields in ``env_exclude``."""
    known = tuple(known)
    unknown = sorted(set(file_values) - set(known))
    if unknown:
        raise ConfigError(f"unknown keys in {where}: {', '.join(unknown)}; known: {', '.join(known)}",
                          keys=unknown)
    values = dict(file_values)
    skip = set(env_exclude)
    for key, raw in (env or {}).items():
        name = key[len(ENV_PREFIX):].lower() if key.startswith(ENV_PREFIX) else None
        if name in known and name not in skip:
            values[name] = raw
    for key, raw in (flags or {}).items():
        if raw is None:
            continue
        if key not in known:
            raise ConfigError(f"unknown setting {key!r} (known: {', '.join(known)})", field=key)
        values[key] = raw
    return values


def as_bool(value: Any) -> bool:
    """A bool from TOML, or a flag / variable spelt 1/0, true/false, yes/no, on/off."""
    if isinstance(value, bool):
        return value
    text = str(value).lower()
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise ValueError(value)


def as_int(value: Any) -> int:
    if isinstance(value, bool):  # TOML's true is no port number
        raise ValueError(value)
    return int(value)
