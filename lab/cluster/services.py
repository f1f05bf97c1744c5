"""Where the store's other real parts are: the outbox (local SQLite or a Kafka-protocol log) and
the Redis hot window, in the same style as :mod:`lab.cluster.config`.

More: docs/cluster-internals.md.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.cluster.settings import as_bool, as_int, blame, expected, layered, read_table
from lab.errors import ConfigError
from lab.measure.client_gc import CLIENT_GC_MODES, DEFAULT_CLIENT_GC

OUTBOX_KINDS = ("local", "kafka")
HOT_WINDOW_KINDS = ("off", "redis")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_KAFKA_BOOTSTRAP = "127.0.0.1:19092"
DEFAULT_REDIS_HOST = "127.0.0.1"
DEFAULT_REDIS_PORT = 16379
DEFAULT_KAFKA_PARTITIONS = 4
DEFAULT_DELIVERY_TIMEOUT_MS = 10_000
DEFAULT_REQUEST_TIMEOUT_SECONDS = 10.0
TOPIC_PREFIX = "outbox."
_SECRETS = ("kafka_sasl_password", "redis_password")
_MASK = "***"
_TOPIC_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


@dataclass(frozen=True, kw_only=True)
class ServicesConfig:
    """The outbox and hot-window settings of one lab process, and what that process does with
    Python's cyclic GC (``client_gc``, lab.measure.client_gc: the lab's own bench and load
    processes apply it; the store never reads it)."""

    outbox: str = "local"
    kafka_bootstrap_servers: str = DEFAULT_KAFKA_BOOTSTRAP
    kafka_topic: str | None = None  # None: outbox.<keyspace>, one log per store keyspace
    kafka_partitions: int = DEFAULT_KAFKA_PARTITIONS
    kafka_replication_factor: int = 1
    kafka_security_protocol: str = "PLAINTEXT"
    kafka_tls_ca_file: Path | None = None
    kafka_tls_cert_file: Path | None = None
    kafka_tls_key_file: Path | None = None
    kafka_sasl_mechanism: str | None = None
    kafka_sasl_username: str | None = None
    kafka_sasl_password: str | None = field(default=None, repr=False)
    kafka_delivery_timeout_ms: int = DEFAULT_DELIVERY_TIMEOUT_MS
    kafka_linger_ms: int = 0
    hot_window: str = "off"
    redis_host: str = DEFAULT_REDIS_HOST
    redis_port: int = DEFAULT_REDIS_PORT
    redis_db: int = 0
    redis_username: str | None = None
    redis_password: str | None = field(default=None, repr=False)
    redis_tls: bool = False
    redis_tls_ca_file: Path | None = None
    request_timeout_seconds: float = DEFAULT_REQUEST_TIMEOUT_SECONDS
    client_gc: str = DEFAULT_CLIENT_GC

    def __post_init__(self) -> None:
        for name, allowed in (("outbox", OUTBOX_KINDS), ("hot_window", HOT_WINDOW_KINDS),
                              ("kafka_security_protocol", SECURITY_PROTOCOLS), ("client_gc", CLIENT_GC_MODES)):
            if getattr(self, name) not in allowed:
                raise ConfigError(f"{name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}",
                                  field=name)
        if not self.kafka_bootstrap_servers.strip():
            raise ConfigError("kafka_bootstrap_servers must name at least one host:port",
                              field="kafka_bootstrap_servers")
        if self.kafka_topic is not None and (not self.kafka_topic or not set(self.kafka_topic) <= _TOPIC_CHARS
                                             or len(self.kafka_topic) > 249):
            raise ConfigError(f"kafka_topic {self.kafka_topic!r} is not a Kafka topic name "
                              "(letters, digits, '.', '_', '-'; at most 249)", field="kafka_topic")
        for name, low in (("kafka_partitions", 1), ("kafka_replication_factor", 1), ("kafka_delivery_timeout_ms", 1),
                          ("kafka_linger_ms", 0), ("redis_db", 0)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ConfigError(f"{name} must be an int >= {low}, got {value!r}", field=name)
        if not isinstance(self.redis_port, int) or not 0 < self.redis_port < 65536:
            raise ConfigError(f"redis_port must be a TCP port, got {self.redis_port!r}", field="redis_port")
        sasl = self.kafka_security_protocol.startswith("SASL")
        if sasl and (self.kafka_sasl_mechanism not in SASL_MECHANISMS or not self.kafka_sasl_username
                     or self.kafka_sasl_password is None):
            raise ConfigError(f"{self.kafka_security_protocol} needs kafka_sasl_mechanism (one of "
                              f"{', '.join(SASL_MECHANISMS)}), kafka_sasl_username and kafka_sasl_password",
                              field="kafka_sasl_mechanism")
        if not sasl and self.kafka_sasl_mechanism is not None:
            raise ConfigError("kafka_sasl_mechanism needs kafka_security_protocol SASL_PLAINTEXT or SASL_SSL",
                              field="kafka_sasl_mechanism")
        if (self.kafka_tls_cert_file is None) != (self.kafka_tls_key_file is None):
            raise ConfigError("a Kafka TLS client certificate needs its key file (and the other way round)",
                              field="kafka_tls_cert_file")
        for name in ("kafka_tls_ca_file", "kafka_tls_cert_file", "kafka_tls_key_file", "redis_tls_ca_file"):
            path = getattr(self, name)
            if path is not None and not Path(path).is_file():
                raise ConfigError(f"{name} {path} does not exist", field=name)
        if self.request_timeout_seconds <= 0:
            raise ConfigError("request_timeout_seconds must be positive", field="request_timeout_seconds")

    # ---- what the clients get ----------------------------------------------------------
    def topic_for(self, keyspace: str) -> str:
        """The outbox topic of a store keyspace: one log per keyspace unless one is configured."""
        return self.kafka_topic or f"{TOPIC_PREFIX}{keyspace}"

    def outbox_options(self, name: str, keyspace: str) -> dict[str, Any]:
        """What ``lab.store.outbox.open_outbox(name, ...)`` needs besides the local file's path."""
        return {"services": self, "topic": self.topic_for(keyspace)} if name == "kafka" else {}

    def kafka_client_config(self) -> dict[str, Any]:
        """librdkafka settings shared by the lab's producers, consumers and admin clients."""
        conf: dict[str, Any] = {"bootstrap.servers": self.kafka_bootstrap_servers,
                                "security.protocol": self.kafka_security_protocol,
                                "socket.nagle.disable": True,  # 0.5 ms instead of ~1.3 ms per ack on loopback
                                "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 1000}
        for key, name in (("ssl.ca.location", "kafka_tls_ca_file"), ("ssl.certificate.location", "kafka_tls_cert_file"),
                          ("ssl.key.location", "kafka_tls_key_file")):
            if getattr(self, name) is not None:
                conf[key] = str(getattr(self, name))
        if self.kafka_sasl_mechanism is not None:
            conf.update({"sasl.mechanism": self.kafka_sasl_mechanism, "sasl.username": self.kafka_sasl_username,
                         "sasl.password": self.kafka_sasl_password})
        return conf

    def redis_client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``redis.Redis`` for the hot window."""
        kwargs: dict[str, Any] = {"host": self.redis_host, "port": self.redis_port, "db": self.redis_db,
                                  "socket_timeout": self.request_timeout_seconds,
                                  "socket_connect_timeout": self.request_timeout_seconds}
        if self.redis_username is not None:
            kwargs["username"] = self.redis_username
        if self.redis_password is not None:
            kwargs["password"] = self.redis_password
        if self.redis_tls:
            kwargs["ssl"] = True
            if self.redis_tls_ca_file is not None:
                kwargs["ssl_ca_certs"] = str(self.redis_tls_ca_file)
        return kwargs

    def describe(self) -> dict[str, Any]:
        """What an environment block says about the outbox and the hot window (no secrets)."""
        out: dict[str, Any] = {"outbox": self.outbox, "hot_window": self.hot_window}
        if self.outbox == "kafka":
            out.update(kafka_bootstrap_servers=self.kafka_bootstrap_servers, kafka_partitions=self.kafka_partitions,
                       kafka_security_protocol=self.kafka_security_protocol, acks="all", idempotent_producer=True)
        if self.hot_window == "redis":
            out.update(redis=f"{self.redis_host}:{self.redis_port}/{self.redis_db}", redis_tls=self.redis_tls)
        return out

    @property
    def archiver_mode(self) -> bool:
        """A store on these services runs in archiver mode: the Redis hot window is archiver mode's
        (the commit path writes it instead of message_record, reads merge it; design §2.1 note)."""
        return self.hot_window == "redis"

    def store_options(self) -> dict[str, Any]:
        """``MessageStore.open`` options of a store on these services (lab load, lab soak, the notebooks)."""
        return {"services": self, "archiver_mode": self.archiver_mode}

    def describe_store(self) -> dict[str, Any]:
        """:meth:`describe` and whether the store runs in archiver mode (environment blocks, summaries)."""
        return {**self.describe(), "archiver_mode": self.archiver_mode}

    def describe_run(self) -> dict[str, Any]:
        """:meth:`describe_store` and ``client_gc``: for the runs whose processes apply it (lab load's
        workers, lab soak, lab bench load, the notebooks' kernels through ``open_testbed``)."""
        return {**self.describe_store(), "client_gc": self.client_gc}

    def replace(self, **changes: Any) -> ServicesConfig:
        return dataclasses.replace(self, **changes)

    def redacted(self) -> dict[str, Any]:
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in _SECRETS and value is not None:
                value = _MASK
            elif isinstance(value, Path):
                value = str(value)
            out[f.name] = value
        return out

    def __repr__(self) -> str:
        return "ServicesConfig(" + ", ".join(f"{k}={v!r}" for k, v in self.redacted().items()) + ")"


_FIELDS = {f.name: f for f in dataclasses.fields(ServicesConfig)}
_INT_FIELDS = {"kafka_partitions", "kafka_replication_factor", "kafka_delivery_timeout_ms", "kafka_linger_ms",
               "redis_port", "redis_db"}
_PATH_FIELDS = {"kafka_tls_ca_file", "kafka_tls_cert_file", "kafka_tls_key_file", "redis_tls_ca_file"}
_BOOL_FIELDS = {"redis_tls"}
_UPPER_FIELDS = {"kafka_security_protocol", "kafka_sasl_mechanism"}


def _coerce(name: str, value: Any) -> Any:
    try:
        if name in _INT_FIELDS:
            return as_int(value)
        if name == "request_timeout_seconds":
            return float(value)
        if name in _PATH_FIELDS:
            return Path(value).expanduser()
        if name in _BOOL_FIELDS:
            return as_bool(value)
        if name in _UPPER_FIELDS:
            return str(value).upper()
        if name in ("outbox", "hot_window", "client_gc"):
            return str(value).lower()
        return str(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be {expected(_FIELDS[name].type)}, not {value!r}", field=name) from None


def load_services(*, flags: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None,
                  toml_path: Path | str | None = None) -> ServicesConfig:
    """flags > ``LAB_*`` env > the TOML file's ``[services]`` table > defaults
    (:mod:`lab.cluster.settings`); unknown keys are errors. ``LAB_REQUEST_TIMEOUT_SECONDS``
    belongs to the cluster config, not to these services."""
    file_values = read_table(toml_path, "services") if toml_path is not None else {}
    where = f"[services] of {toml_path}"
    values = layered(_FIELDS, file_values=file_values, env=env, flags=flags, where=where,
                     env_exclude=("request_timeout_seconds",))
    try:
        return ServicesConfig(**{k: _coerce(k, v) for k, v in values.items()})
    except ConfigError as exc:  # name the variable, flag or file the bad value came from
        own_env = {k: v for k, v in (env or {}).items() if k != "LAB_REQUEST_TIMEOUT_SECONDS"}
        raise blame(exc, file_values=file_values, env=own_env, flags=flags, where=where) from None
