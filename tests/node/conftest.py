"""Fixtures of the tests that need the real node (or the cluster named by ``LAB_*``):
configuration, the session's connection, scratch keyspaces, the admin adapter, stores."""
from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from lab.cluster.config import ClusterConfig, load_config

ROOT = Path(__file__).resolve().parents[2]


def pytest_collection_modifyitems(items) -> None:
    # every test in this folder needs the node: marked here once, so `-m "not node"` selects the rest
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.node)


@pytest.fixture(scope="session")
def lab_home() -> Path:
    return Path(os.environ.get("LAB_HOME", ROOT / ".lab")).resolve()


@pytest.fixture(scope="session")
def cluster_config(lab_home: Path) -> ClusterConfig:
    env = {k: v for k, v in os.environ.items() if k.startswith("LAB_")}
    return load_config(env=env, flags={"lab_home": str(lab_home)})


@pytest.fixture(scope="session")
def services_config():
    """Outbox / hot-window settings: LAB_* variables over the defaults (the embedded broker
    and Redis that `lab node start` runs beside the node)."""
    from lab.cluster.services import load_services

    return load_services(env={k: v for k, v in os.environ.items() if k.startswith("LAB_")})


@pytest.fixture(scope="session")
def kafka_services(services_config):
    """The services config with the Kafka outbox, once its broker answered (else a clear failure)."""
    from confluent_kafka.admin import AdminClient

    services = services_config.replace(outbox="kafka")
    try:
        AdminClient(services.kafka_client_config()).list_topics(timeout=10)
    except Exception as exc:
        pytest.fail(f"no Kafka broker at {services.kafka_bootstrap_servers} ({exc}): run `lab node start`")
    return services


@pytest.fixture(scope="session")
def redis_services(services_config):
    """The services config with the Redis hot window, once Redis answered PING."""
    import redis

    services = services_config.replace(hot_window="redis")
    try:
        redis.Redis(**services.redis_client_kwargs()).ping()
    except redis.RedisError as exc:
        pytest.fail(f"no Redis at {services.redis_host}:{services.redis_port} ({exc}): run `lab node start`")
    return services


@pytest.fixture
def topic() -> str:
    """A Kafka topic name of its own (the outbox creates it on open)."""
    return f"test.outbox.{uuid.uuid4().hex[:10]}"


@pytest.fixture
def window(redis_services):
    """A Redis hot window in a namespace of its own, its keys deleted afterwards."""
    from lab.store import HotWindow

    w = HotWindow.open(redis_services, namespace=f"test_{uuid.uuid4().hex[:8]}", window_days=7)
    yield w
    for key in w.client.scan_iter(f"{w.namespace}:*"):
        w.client.delete(key)
    w.close()


@pytest.fixture(scope="session")
def connection(cluster_config: ClusterConfig):
    from lab.cluster.connection import connect

    conn = connect(cluster_config)
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def scratch_keyspace(connection):
    """A keyspace of its own for one test module; dropped afterwards."""
    from lab.results.scratch import scratch_keyspace

    with scratch_keyspace(connection, "t") as name:
        yield name


@pytest.fixture(scope="session")
def admin(cluster_config, connection):
    from lab.cluster.admin import admin_for

    return admin_for(cluster_config, connection)


# ---- store fixtures -----------------------------------------------------------------------
# One fresh keyspace + schema + state_dir per test module. `open_store(**kw)` opens another
# MessageStore on the same keyspace and state (a restarted writer, a second node, a store
# with a FaultPlan); `store` is the module's default one. Stores share the session's
# connection (cheap on a 2-core machine) and are closed at module end.

@pytest.fixture(scope="module")
def store_keyspace(connection):
    from lab.results.scratch import scratch_keyspace

    with scratch_keyspace(connection, "s") as name:
        yield name


@pytest.fixture(scope="module")
def store_state_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("state")


@pytest.fixture(scope="module")
def outbox_kind(request) -> str:
    """The outbox of the module's stores: "local", unless the module parametrizes this fixture
    (``indirect=True``) to run the same tests on the Kafka outbox too."""
    return getattr(request, "param", "local")


@pytest.fixture(scope="module")
def store_options(request, outbox_kind, store_keyspace):
    """``store_options(state_dir)``: the MessageStore.open options of the module's outbox. A
    Kafka outbox gets a topic per (keyspace, state_dir), as the local one has a file per
    state_dir: a restarted writer on the same state_dir shares the log, another does not."""
    import hashlib

    services = request.getfixturevalue("kafka_services") if outbox_kind == "kafka" else None

    def _options(state_dir) -> dict:
        if services is None:
            return {}
        digest = hashlib.sha1(str(Path(state_dir).resolve()).encode()).hexdigest()[:10]
        return {"outbox": "kafka", "services": services.replace(kafka_topic=f"outbox.{store_keyspace}.{digest}")}
    return _options


@pytest.fixture(scope="module")
def open_store(cluster_config, connection, store_keyspace, store_state_dir, store_options):
    from lab.store import MessageStore

    opened = []

    def _open(**kw):
        kw.setdefault("state_dir", store_state_dir)
        for key, value in store_options(kw["state_dir"]).items():
            kw.setdefault(key, value)
        store = MessageStore.open(cluster_config.replace(keyspace=store_keyspace), connection=connection, **kw)
        opened.append(store)
        return store

    yield _open
    for store in reversed(opened):
        store.close()


@pytest.fixture(scope="module")
def store(open_store):
    store = open_store()
    store.create_schema()
    return store
