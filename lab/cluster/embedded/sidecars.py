"""The services the lab runs beside the Cassandra node: the Kafka broker (the outbox's log) and
Redis (archiver mode's hot window). ``lab node start / status / stop`` call these, so the CLI
stays a thin layer; each service records its own PID in its own folder under the home.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lab.cluster.embedded.kafka_broker import STATE_FILE as BROKER_STATE_FILE
from lab.cluster.embedded.kafka_broker import BrokerOptions, BrokerState, EmbeddedBroker
from lab.cluster.embedded.redis_server import STATE_FILE as REDIS_STATE_FILE
from lab.cluster.embedded.redis_server import EmbeddedRedis, RedisOptions, RedisState

__all__ = ["SidecarStatus", "start_sidecars", "sidecar_status", "stop_sidecars"]


@dataclass(frozen=True, kw_only=True)
class SidecarStatus:
    """One recorded service: what it is, where, and whether its PID is still ours."""

    name: str
    endpoint: str
    pid: int
    running: bool
    startup_seconds: float
    directory: str
    version: str


def start_sidecars(home: Path, *, broker: bool = True, redis: bool = True,
                   broker_options: BrokerOptions | None = None,
                   redis_options: RedisOptions | None = None) -> tuple[BrokerState | None, RedisState | None]:
    """Start (or reuse) the broker and/or Redis. The broker first: it is the slower one."""
    broker_state = EmbeddedBroker(broker_options or BrokerOptions(home=home)).start() if broker else None
    redis_state = EmbeddedRedis(redis_options or RedisOptions(home=home)).start() if redis else None
    return broker_state, redis_state


def _recorded(home: Path, *, nested: bool) -> tuple[list[EmbeddedBroker], list[EmbeddedRedis]]:
    home = Path(home)
    brokers = [EmbeddedBroker(BrokerOptions(home=home))]
    redises = [EmbeddedRedis(RedisOptions(home=home))]
    if nested and home.exists():  # brokers / Redis that tests started in folders of their own
        for path in sorted(home.glob(f"**/{BROKER_STATE_FILE}")):
            folder = path.parent
            if folder != brokers[0].directory:
                brokers.append(EmbeddedBroker(BrokerOptions(home=folder.parent, folder=folder.name)))
        for path in sorted(home.glob(f"**/{REDIS_STATE_FILE}")):
            folder = path.parent
            if folder != redises[0].directory:
                redises.append(EmbeddedRedis(RedisOptions(home=folder.parent, folder=folder.name)))
    return brokers, redises


def sidecar_status(home: Path) -> list[SidecarStatus]:
    """The recorded broker and Redis of ``home`` (none recorded: an empty list)."""
    out = []
    broker, redis = (group[0] for group in _recorded(home, nested=False))
    b = broker.read_state()
    if b is not None:
        out.append(SidecarStatus(name="kafka", endpoint=b.bootstrap_servers, pid=b.pid,
                                 running=broker.running() is not None, startup_seconds=b.startup_seconds,
                                 directory=b.directory, version=b.version))
    r = redis.read_state()
    if r is not None:
        out.append(SidecarStatus(name="redis", endpoint=f"{r.address}:{r.port}", pid=r.pid,
                                 running=redis.running() is not None, startup_seconds=r.startup_seconds,
                                 directory=r.directory, version=r.version))
    return out


def stop_sidecars(home: Path, *, nested: bool = False) -> list[int]:
    """Stop the recorded broker(s) and Redis(es) by PID; ``nested`` also those in sub-folders."""
    brokers, redises = _recorded(home, nested=nested)
    return [pid for service in (*brokers, *redises) for pid in service.stop()]
