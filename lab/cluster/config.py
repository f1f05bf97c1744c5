"""One typed cluster configuration, filled by the CLI from flags, ``LAB_*`` variables or TOML.

Precedence: command-line flags > environment (``LAB_CONTACT_POINTS`` ...) > TOML file >
defaults. The library never reads the environment itself: the CLI passes ``os.environ`` in.
Secrets (password, key files' passphrases) are masked in ``repr`` and in ``redacted()``,
which is what results files record.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Mapping

from lab.cluster.settings import as_bool, as_int, blame, expected, layered, read_table
from lab.errors import ConfigError

DEFAULT_CONTACT_POINTS = ("127.0.0.1",)
DEFAULT_PORT = 9042
DEFAULT_KEYSPACE = "msglab"
DEFAULT_REQUEST_TIMEOUT_SECONDS = 20.0
DEFAULT_CONNECT_TIMEOUT_SECONDS = 10.0
DEFAULT_JMX_PORT = 7199
DEFAULT_SCYLLA_REST_PORT = 10000
DEFAULT_SCYLLA_PROMETHEUS_PORT = 9180
CONSISTENCY_LEVELS = ("ANY", "ONE", "TWO", "THREE", "QUORUM", "ALL", "LOCAL_QUORUM",
                      "EACH_QUORUM", "LOCAL_ONE")
SERIAL_CONSISTENCY_LEVELS = ("SERIAL", "LOCAL_SERIAL")
ADMIN_KINDS = ("auto", "cassandra", "scylla")
DIALECT_KINDS = ("auto", "cassandra", "scylla")
REPLICATION_CLASSES = ("SimpleStrategy", "NetworkTopologyStrategy")
_MASK = "***"


@dataclass(frozen=True, kw_only=True)
class ClusterConfig:
    """Where the cluster is and how the lab talks to it."""

    contact_points: tuple[str, ...] = DEFAULT_CONTACT_POINTS
    port: int = DEFAULT_PORT
    local_dc: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    tls_ca_file: Path | None = None
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    tls_verify_hostname: bool = False
    keyspace: str = DEFAULT_KEYSPACE
    replication_class: str = "SimpleStrategy"
    replication_factor: int = 1
    read_consistency: str = "LOCAL_QUORUM"
    write_consistency: str = "LOCAL_QUORUM"
    serial_consistency: str = "LOCAL_SERIAL"
    request_timeout_seconds: float = DEFAULT_REQUEST_TIMEOUT_SECONDS
    connect_timeout_seconds: float = DEFAULT_CONNECT_TIMEOUT_SECONDS
    admin: str = "auto"
    dialect: str = "auto"  # how the server's CQL and traces differ (lab.cluster.dialect); auto: ask it
    tablets: bool = False  # Scylla: the lab's keyspaces use tablets (off: vnodes, LWT on every version)
    # TCP_NODELAY on the driver's sockets: the Java, Go and Rust drivers' default; the Python driver
    # leaves Nagle on (docs/cluster-internals.md: what that did to the lab's latencies)
    tcp_nodelay: bool = True
    jmx_port: int = DEFAULT_JMX_PORT
    rest_port: int = DEFAULT_SCYLLA_REST_PORT
    # Scylla REST endpoint per node address, for installs whose API listens on 127.0.0.1
    # (reached through a tunnel): (("10.0.0.5", "127.0.0.1:10005"), ...); default: address:rest_port
    rest_addresses: tuple[tuple[str, str], ...] = ()
    prometheus_port: int = DEFAULT_SCYLLA_PROMETHEUS_PORT
    lab_home: Path = Path(".lab")
    # round trip added between this client and the node by a latency proxy (lab.cluster.rtt_proxy); 0: direct
    rtt_us: int = 0

    def __post_init__(self) -> None:
        if not self.contact_points or not all(isinstance(c, str) and c.strip() for c in self.contact_points):
            raise ConfigError("contact_points must name at least one host", field="contact_points")
        for name in ("port", "jmx_port", "rest_port", "prometheus_port"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 0 < value < 65536:
                raise ConfigError(f"{name} must be a TCP port (1-65535), got {value!r}", field=name)
        if not self.keyspace.replace("_", "a").isalnum() or not self.keyspace[0].isalpha() or len(self.keyspace) > 48:
            raise ConfigError(f"keyspace {self.keyspace!r} is not a valid CQL identifier "
                              "(letters, digits, underscores; starts with a letter; <= 48 chars)",
                              field="keyspace")
        for name, allowed in (("read_consistency", CONSISTENCY_LEVELS),
                              ("write_consistency", CONSISTENCY_LEVELS),
                              ("serial_consistency", SERIAL_CONSISTENCY_LEVELS)):
            if getattr(self, name) not in allowed:
                raise ConfigError(f"{name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}",
                                  field=name)
        if self.admin not in ADMIN_KINDS:
            raise ConfigError(f"admin must be one of {', '.join(ADMIN_KINDS)}, got {self.admin!r}", field="admin")
        if self.dialect not in DIALECT_KINDS:
            raise ConfigError(f"dialect must be one of {', '.join(DIALECT_KINDS)}, got {self.dialect!r}",
                              field="dialect")
        for name in ("tablets", "tcp_nodelay"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false, got {getattr(self, name)!r}", field=name)
        for node, endpoint in self.rest_addresses:
            _split_endpoint(endpoint, self.rest_port)
            if not node:
                raise ConfigError(f"rest_addresses: empty node address for {endpoint!r}", field="rest_addresses")
        if self.replication_class not in REPLICATION_CLASSES:
            raise ConfigError(f"replication_class must be one of {', '.join(REPLICATION_CLASSES)}",
                              field="replication_class")
        if not isinstance(self.replication_factor, int) or self.replication_factor < 1:
            raise ConfigError(f"replication_factor must be >= 1, got {self.replication_factor!r}",
                              field="replication_factor")
        if (self.username is None) != (self.password is None):
            raise ConfigError("username and password go together: give both or neither", field="username")
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ConfigError("a TLS client certificate needs its key file (and the other way round)",
                              field="tls_cert_file")
        for name in ("tls_ca_file", "tls_cert_file", "tls_key_file"):
            path = getattr(self, name)
            if path is not None and not Path(path).is_file():
                raise ConfigError(f"{name} {path} does not exist", field=name)
        if not isinstance(self.rtt_us, int) or isinstance(self.rtt_us, bool) or self.rtt_us < 0:
            raise ConfigError(f"rtt_us must be a round trip of 0 or more microseconds, got {self.rtt_us!r}",
                              field="rtt_us")
        if self.request_timeout_seconds <= 0 or self.connect_timeout_seconds <= 0:
            raise ConfigError("timeouts must be positive", field="request_timeout_seconds")

    @property
    def tls(self) -> bool:
        return self.tls_ca_file is not None

    def rest_endpoint(self, node: str) -> tuple[str, int]:
        """(host, port) of the Scylla REST API of the node at address ``node``."""
        for address, endpoint in self.rest_addresses:
            if address == node:
                return _split_endpoint(endpoint, self.rest_port)
        return node, self.rest_port

    def replication_map(self) -> dict[str, Any]:
        if self.replication_class == "SimpleStrategy":
            return {"class": "SimpleStrategy", "replication_factor": self.replication_factor}
        if self.local_dc is None:  # both servers expand this to every datacenter (CASSANDRA-14303)
            return {"class": "NetworkTopologyStrategy", "replication_factor": self.replication_factor}
        return {"class": "NetworkTopologyStrategy", self.local_dc: self.replication_factor}

    def replace(self, **changes: Any) -> ClusterConfig:
        return dataclasses.replace(self, **changes)

    def redacted(self) -> dict[str, Any]:
        """A JSON-ready view with secrets masked: the only form written to results."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "password" and value is not None:
                value = _MASK
            elif isinstance(value, Path):
                value = str(value)
            elif f.name == "rest_addresses":
                value = dict(value)
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.redacted().items())
        return f"ClusterConfig({shown})"


_FIELDS = {f.name: f for f in dataclasses.fields(ClusterConfig)}
_INT_FIELDS = {"port", "replication_factor", "jmx_port", "rest_port", "prometheus_port"}
_FLOAT_FIELDS = {"request_timeout_seconds", "connect_timeout_seconds"}
_PATH_FIELDS = {"tls_ca_file", "tls_cert_file", "tls_key_file", "lab_home"}
_BOOL_FIELDS = {"tls_verify_hostname", "tablets", "tcp_nodelay"}


_US_PER_UNIT = {"us": 1, "µs": 1, "ms": 1000, "s": 1_000_000}


def parse_rtt(text: str | int) -> int:
    """A round trip as written (``2ms``, ``300us``, ``0.5ms``, ``0``; a bare number is
    microseconds, the field's unit) -> whole microseconds. A bad form is a ValueError."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise ValueError(text)
        return text
    raw = str(text).strip().lower()
    unit = next((u for u in sorted(_US_PER_UNIT, key=len, reverse=True) if raw.endswith(u)), "us")
    number = raw[: len(raw) - len(unit)].strip() if raw.endswith(unit) else raw
    value = float(number) * _US_PER_UNIT[unit]
    if not math.isfinite(value) or value < 0 or value != round(value):
        raise ValueError(text)
    return int(round(value))


def _split_endpoint(endpoint: str, default_port: int) -> tuple[str, int]:
    """``host`` or ``host:port`` -> (host, port); a bad port is a ConfigError."""
    host, sep, port = str(endpoint).strip().rpartition(":")
    if not sep:
        host, port = port, str(default_port)
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"rest_addresses: {endpoint!r} is not host or host:port", field="rest_addresses")
    return host, int(port)


def _pairs(value: Any) -> tuple[tuple[str, str], ...]:
    """``node=host:port,...`` (flags, env), a TOML table, or pairs -> ((node, endpoint), ...)."""
    if isinstance(value, str):
        items = []
        for part in (p.strip() for p in value.split(",") if p.strip()):
            node, sep, endpoint = part.partition("=")
            if not sep:
                raise ValueError
            items.append((node.strip(), endpoint.strip()))
        return tuple(items)
    if isinstance(value, Mapping):
        return tuple((str(k), str(v)) for k, v in value.items())
    return tuple((str(k), str(v)) for k, v in value)


def _coerce(name: str, value: Any) -> Any:
    try:
        if name == "contact_points":
            if isinstance(value, str):
                return tuple(p.strip() for p in value.split(",") if p.strip())
            return tuple(str(p) for p in value)
        if name == "rest_addresses":
            return _pairs(value)
        if name == "rtt_us":
            return parse_rtt(value)
        if name in _INT_FIELDS:
            return as_int(value)
        if name in _FLOAT_FIELDS:
            return float(value)
        if name in _PATH_FIELDS:
            return Path(value).expanduser()
        if name in _BOOL_FIELDS:
            return as_bool(value)
        if name in ("read_consistency", "write_consistency", "serial_consistency"):
            return str(value).upper()
        return str(value)
    except (TypeError, ValueError):
        kind = "a round trip such as 2ms or 300us" if name == "rtt_us" else expected(_FIELDS[name].type)
        raise ConfigError(f"{name} must be {kind}, not {value!r}", field=name) from None


def load_config(*, flags: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None,
                toml_path: Path | str | None = None) -> ClusterConfig:
    """Build a config from flags > ``LAB_*`` env > TOML (``[cluster]``, or the whole file) >
    defaults (:mod:`lab.cluster.settings`). Unknown keys are errors."""
    file_values = (read_table(toml_path, "cluster", whole_file_default=True, fields=_FIELDS)
                   if toml_path is not None else {})
    where = f"[cluster] of {toml_path}"
    values = layered(_FIELDS, file_values=file_values, env=env, flags=flags, where=where)
    try:
        return ClusterConfig(**{k: _coerce(k, v) for k, v in values.items()})
    except ConfigError as exc:  # name the variable, flag or file the bad value came from
        raise blame(exc, file_values=file_values, env=env, flags=flags, where=where) from None
