"""Shared fixtures. Tests of the store run against the real node `make test` starts
(or the cluster named by LAB_* variables); nothing here fakes the database."""
from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from lab.config import ClusterConfig, load_config

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def lab_home() -> Path:
    return Path(os.environ.get("LAB_HOME", ROOT / ".lab")).resolve()


@pytest.fixture(scope="session")
def cluster_config(lab_home: Path) -> ClusterConfig:
    env = {k: v for k, v in os.environ.items() if k.startswith("LAB_")}
    return load_config(env=env, flags={"lab_home": str(lab_home)})


@pytest.fixture(scope="session")
def connection(cluster_config: ClusterConfig):
    from lab.connection import connect

    conn = connect(cluster_config)
    yield conn
    conn.close()


def _fresh_keyspace(conn, prefix: str) -> str:
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    rf = conn.config.replication_factor
    conn.execute(f"CREATE KEYSPACE {name} WITH replication = "
                 f"{{'class': 'SimpleStrategy', 'replication_factor': {rf}}}")
    return name


@pytest.fixture(scope="module")
def scratch_keyspace(connection):
    """A keyspace of its own for one test module; dropped afterwards."""
    name = _fresh_keyspace(connection, "t")
    yield name
    connection.execute(f"DROP KEYSPACE IF EXISTS {name}")


@pytest.fixture(scope="session")
def admin(cluster_config, connection):
    from lab.admin import admin_for

    return admin_for(cluster_config, connection)
