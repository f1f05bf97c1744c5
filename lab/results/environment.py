"""What a run ran on, recorded once per run by every kind of run (``environment`` in its JSON).

More: docs/measure-internals.md.
"""
from __future__ import annotations

import os
import platform
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.cluster.config import ClusterConfig
from lab.cluster.embedded.node import EmbeddedCluster, NodeOptions

GIT_TIMEOUT_SECONDS = 10


def _git(args: list[str], cwd: Path | None) -> subprocess.CompletedProcess | None:
    # GIT_OPTIONAL_LOCKS=0: `git status` must not refresh (write) the index of the lead's work tree
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=cwd, timeout=GIT_TIMEOUT_SECONDS,
                              env=env)
    except (OSError, subprocess.SubprocessError):
        return None


def git_commit(cwd: Path | None = None) -> str | None:
    """HEAD's commit id, or None outside a repository / before the first commit."""
    out = _git(["rev-parse", "--verify", "-q", "HEAD"], cwd)
    return out.stdout.strip() or None if out is not None and out.returncode == 0 else None


def git_dirty(cwd: Path | None = None) -> bool | None:
    """True when tracked or untracked files differ from HEAD (the run measured uncommitted code)."""
    out = _git(["status", "--porcelain", "--untracked-files=normal"], cwd)
    return bool(out.stdout.strip()) if out is not None and out.returncode == 0 else None


def machine() -> dict[str, Any]:
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        mem = None
    return {"hostname": platform.node(), "cpus": os.cpu_count(), "memory_bytes": mem,
            "platform": platform.platform(), "python": platform.python_version(), "row_decode": row_decode()}


def row_decode() -> str:
    """Which decode the store's reads run through in this process: the compiled path
    (``compiled: lab_native <version>``, lab.store.rows.records uses it whenever lab_native imports)
    or ``python (lab_native not installed)``: every page on the Python path, the latest page then
    ~0.14 ms slower per 50 rows (docs/measurements.md); and which constructor the driver's UUID cells
    take (``; UUID cells compiled|python``, lab.cluster.row_factory). Read figures depend on both."""
    from lab.cluster.row_factory import UUID_FROM_BYTES_PATH
    uuids = f"; UUID cells {UUID_FROM_BYTES_PATH}"
    try:
        import lab_native  # noqa: F401  (native/, built by `make venv`)
    except ImportError:
        return "python (lab_native not installed)" + uuids
    from importlib.metadata import PackageNotFoundError, version
    try:
        return f"compiled: lab_native {version('lab_native')}" + uuids
    except PackageNotFoundError:  # imported from a build tree, not an installed package
        return "compiled: lab_native (version unknown)" + uuids


def loadavg() -> list[float] | None:
    """1, 5 and 15 minute load averages (None where the OS has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


@dataclass(frozen=True, kw_only=True)
class Environment:
    machine: Mapping[str, Any]
    loadavg_at_start: list[float] | None
    git_commit: str | None
    git_dirty: bool | None
    cluster: Mapping[str, Any]                  # ClusterConfig.redacted(): secrets masked
    replication_factor: int
    server: str | None = None                   # None: recorded without a connection
    server_version: str | None = None
    nodes: int | None = None
    embedded: bool = False                      # the contact points are the lab's embedded node
    node_startup_seconds: float | None = None
    jar_resolution_seconds: float | None = None
    notes: Mapping[str, Any] = field(default_factory=dict)  # what a run adds (e.g. where the client ran)

    def to_json(self) -> dict[str, Any]:
        return {"server": self.server, "server_version": self.server_version, "nodes": self.nodes,
                "replication_factor": self.replication_factor, "embedded": self.embedded,
                "node_startup_seconds": self.node_startup_seconds,
                "jar_resolution_seconds": self.jar_resolution_seconds, "machine": dict(self.machine),
                "loadavg_at_start": self.loadavg_at_start, "git_commit": self.git_commit, "git_dirty": self.git_dirty,
                "cluster": dict(self.cluster), **self.notes}


def _embedded_state(config: ClusterConfig) -> Any:
    try:
        state = EmbeddedCluster(NodeOptions(home=config.lab_home)).read_state()
    except (OSError, ValueError):  # no or unreadable state: not the embedded node, as far as we know
        return None
    return state if state is not None and set(config.contact_points) & set(state.contact_points) else None


def environment(config: ClusterConfig, connection: Any = None, **notes: Any) -> Environment:
    """The environment of a run on ``config``; the server facts need ``connection``."""
    state = _embedded_state(config)
    server = {}
    if connection is not None:
        server = {"server": connection.server_kind(), "server_version": connection.server_version(),
                  "nodes": len(connection.hosts())}
    return Environment(machine=machine(), loadavg_at_start=loadavg(), git_commit=git_commit(), git_dirty=git_dirty(),
                       cluster=config.redacted(), replication_factor=config.replication_factor, **server,
                       embedded=state is not None,
                       node_startup_seconds=state.startup_seconds if state is not None else None,
                       jar_resolution_seconds=state.resolve_seconds if state is not None else None, notes=notes)
