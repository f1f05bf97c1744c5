"""Starting the embedded node fails with an explanation when Java, Maven or the version is wrong."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from lab.cluster.embedded.node import EmbeddedCluster, NodeOptions
from lab.errors import JavaNotFound, MavenError

ROOT = Path(__file__).resolve().parents[2]
LAB = [sys.executable, "-m", "lab.cli"]


def test_maven_missing_is_explained(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(MavenError, match="not on PATH"):
        EmbeddedCluster(NodeOptions(home=tmp_path)).resolve_jars()


def test_no_java_is_explained(monkeypatch):
    monkeypatch.setenv("JAVA_HOME", "/nonexistent")
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr("lab.cluster.embedded.java.Path.glob", lambda self, pattern: iter(()))
    with pytest.raises(JavaNotFound):
        EmbeddedCluster.find_java()


@pytest.mark.spawns
def test_unresolvable_version_is_explained(tmp_path):
    with pytest.raises(MavenError, match="cassandra-all:0.0.0-nope"):
        EmbeddedCluster(NodeOptions(home=tmp_path, version="0.0.0-nope")).resolve_jars()
