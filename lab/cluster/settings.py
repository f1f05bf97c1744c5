"""How every lab configuration is filled, defined once: flags > ``LAB_*`` variables > a table of
the TOML file > defaults. :mod:`lab.cluster.config` (``[cluster]``) and
:mod:`lab.cluster.services` (``[services]``) declare their fields and coerce their own values;
reading the file, layering the sources, refusing unknown sections and keys (with a "did you
mean" hint) and naming the source of a bad value (:func:`blame`: ``LAB_PORT=abc: ...``) are here.
"""
from __future__ import annotations

import difflib
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from lab.errors import ConfigError

ENV_PREFIX = "LAB_"
SECTIONS = ("cluster", "services")  # the tables a lab configuration file may hold
_SECRET_WORDS = ("password", "secret", "passphrase")
_MASK = "***"
_FLAG_NAMES = {"rtt_us": "--rtt"}  # flags not spelt as their field (the field carries its unit, the flag takes any)
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def _hint(name: str, known: Iterable[str], fmt: str = "{}") -> str:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {fmt.format(close[0])}?)" if close else ""


def read_table(toml_path: Path | str, table: str, *, whole_file_default: bool = False,
               fields: Iterable[str] = ()) -> dict[str, Any]:
    """The ``[table]`` of a TOML file; with ``whole_file_default`` a file without that table is
    read as the table itself (a bare ``lab.toml`` of cluster keys, whose ``fields`` may be
    inline tables). A table that is no section of :data:`SECTIONS` is an error."""
    try:
        data = tomllib.loads(Path(toml_path).read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file {toml_path} does not exist", path=str(toml_path)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {toml_path} is not valid TOML: {exc}", path=str(toml_path)) from None
    bare = whole_file_default and table not in data
    values = set(fields) if bare else set()
    for name, value in data.items():
        if isinstance(value, Mapping) and name not in SECTIONS and name not in values:
            known = ", ".join(f"[{s}]" for s in SECTIONS)
            raise ConfigError(f"unknown section [{name}] in {toml_path}{_hint(name, SECTIONS, '[{}]')}; known "
                              f"sections: {known}", section=name, path=str(toml_path))
    if bare:
        return {k: v for k, v in data.items() if k not in SECTIONS}
    return dict(data.get(table, {}))


def layered(known: Iterable[str], *, file_values: Mapping[str, Any], env: Mapping[str, str] | None,
            flags: Mapping[str, Any] | None, where: str, env_exclude: Iterable[str] = ()) -> dict[str, Any]:
    """The raw values of the known fields, each from its strongest source. Unknown keys in the
    file or the flags are errors naming ``where`` they came from; unknown ``LAB_*`` variables
    belong to other settings and are passed over, as are the fields in ``env_exclude``."""
    known = tuple(known)
    unknown = sorted(set(file_values) - set(known))
    if unknown:
        named = ", ".join(f"{k}{_hint(k, known)}" for k in unknown)
        raise ConfigError(f"unknown keys in {where}: {named}; known: {', '.join(known)}", keys=unknown)
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


def source_of(key: str, *, file_values: Mapping[str, Any], env: Mapping[str, str] | None,
              flags: Mapping[str, Any] | None, where: str) -> tuple[str, str] | None:
    """(where the value of ``key`` came from, as the user wrote it) by the precedence of
    :func:`layered`: ``("LAB_PORT", "LAB_PORT=abc")``; None for a default. A secret's value
    is never shown."""
    secret = any(word in key for word in _SECRET_WORDS)
    shown = (lambda v: _MASK) if secret else (lambda v: v)
    if flags and flags.get(key) is not None:
        flag = _FLAG_NAMES.get(key, "--" + key.replace("_", "-"))
        return flag, f"{flag} {shown(flags[key])}"
    var = ENV_PREFIX + key.upper()
    if env and var in env:
        return var, f"{var}={shown(env[var])}"
    if key in file_values:
        return where, f"{key} = {shown(repr(file_values[key]))} in {where}"
    return None


def blame(exc: ConfigError, *, file_values: Mapping[str, Any], env: Mapping[str, str] | None,
          flags: Mapping[str, Any] | None, where: str) -> ConfigError:
    """``exc`` (about one field) with the place its value came from put first:
    "LAB_PORT=abc: port must be a whole number"; ``exc`` itself when the field came from a default."""
    field = exc.facts.get("field")
    source = source_of(field, file_values=file_values, env=env, flags=flags, where=where) if field else None
    if source is None:
        return exc
    named = ConfigError(f"{source[1]}: {exc}", **{**exc.facts, "source": source[0]})
    named.__cause__ = exc.__cause__
    return named


_EXPECTED = {"int": "a whole number", "float": "a number", "bool": "true or false (1/0, yes/no, on/off)",
             "Path": "a path", "Path | None": "a path", "str": "a string", "str | None": "a string"}


def expected(type_name: Any) -> str:
    """What a field of the declared type ``type_name`` must be, in words."""
    name = getattr(type_name, "__name__", str(type_name))
    return _EXPECTED.get(name, name)


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
