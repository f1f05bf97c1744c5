"""The embedded cluster's lifecycle: start one (or three) real Apache Cassandra 5.0 JVMs,
wait for CQL, record their PIDs, stop, kill and restart them.

More: docs/cluster-internals.md.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from lab.cluster.embedded import jars, java, process
from lab.cluster.embedded.node_config import NATIVE_PORT, STORAGE_PORT, NodeConfig, quiet_logback, write_node_config
from lab.errors import AdminError, NodeDied, NodeError, NodeTimeout
from lab.measure import Stopwatch

CASSANDRA_VERSION = "5.0.9"
CASSANDRA_ARTIFACT = "org.apache.cassandra:cassandra-all"
JMX_PORT_BASE = 7199
START_TIMEOUT_SECONDS = 180.0
STOP_TIMEOUT_SECONDS = 45.0
NODETOOL_TIMEOUT_SECONDS = 300.0
DEFAULT_HEAP = "1G"
NODETOOL_HEAP = "256m"
SINGLE_NODE_RING_DELAY_MS = 1000
CLUSTER_RING_DELAY_MS = 8000
MAIN_CLASS = "org.apache.cassandra.service.CassandraDaemon"
NODETOOL_CLASS = "org.apache.cassandra.tools.NodeTool"
# Cassandra flushes its schema tables to disk on every schema change (each CREATE or DROP: several
# flushes, then their compactions; docs/measurements.md). A throwaway node (the test suite's) keeps them in the
# commit log only: a stop drains them to disk, but a SIGKILL loses the keyspaces made since the
# last flush (their schema is read from disk before the commit log is replayed).
NO_SCHEMA_FLUSH_FLAG = "-Dcassandra.test.flush_local_schema_changes=false"
# ... and never fsyncs (Cassandra's own test property, read by its SyncUtil: commit log segments,
# SSTables, transaction logs). Each DROP KEYSPACE recycles the commit log's segments once per table
# it drops, flushing every dirty memtable (reason COMMITLOG_DIRTY: the schema tables, the
# system tables, the module's own), a dozen fsyncs a flush (what it saves: docs/measurements.md). A SIGKILL of the
# node keeps what it wrote (the kernel's page cache); only a crash of the machine loses more.
NO_FSYNC_FLAG = "-Dcassandra.skip_sync=true"
THROWAWAY_FLAGS = (NO_SCHEMA_FLUSH_FLAG, NO_FSYNC_FLAG)
_READY_LINE = "Starting listening for CQL clients"
# logged once per data directory, when the role table was empty; a moment AFTER CQL opens
_SUPERUSER_LINE = "Created default superuser role"
_READY_POLL_SECONDS = 0.25
_LOG_TAIL_LINES = 40


@dataclass(frozen=True, kw_only=True)
class NodeInfo:
    """One JVM the lab started."""

    name: str
    address: str
    jmx_port: int
    native_port: int
    pid: int
    directory: str
    startup_seconds: float = 0.0

    @property
    def log_path(self) -> Path:
        return Path(self.directory) / "logs" / "system.log"

    @property
    def data_directory(self) -> Path:
        return Path(self.directory) / "data"


@dataclass(frozen=True, kw_only=True)
class ClusterState:
    """What ``cluster.json`` records: the nodes and how they were started."""

    version: str
    nodes: tuple[NodeInfo, ...]
    auth: bool = False
    tls: bool = False
    reused: bool = False
    resolve_seconds: float = 0.0
    startup_seconds: float = 0.0

    @property
    def contact_points(self) -> tuple[str, ...]:
        return tuple(n.address for n in self.nodes)


@dataclass(frozen=True, kw_only=True)
class NodeOptions:
    """How to start the embedded cluster. ``home`` holds jars, node folders and state."""

    home: Path
    nodes: int = 1
    heap: str = DEFAULT_HEAP
    first_address: str = "127.0.0.1"
    jmx_port_base: int = JMX_PORT_BASE
    version: str = CASSANDRA_VERSION
    auth: bool = False
    tls_keystore: Path | None = None
    tls_keystore_password: str | None = field(default=None, repr=False)
    timeout_seconds: float = START_TIMEOUT_SECONDS
    throwaway: bool = False  # THROWAWAY_FLAGS: schema changes not flushed at once, no fsync: for tests

    def addresses(self) -> list[str]:
        a, b, c, d = (int(x) for x in self.first_address.split("."))
        return [f"{a}.{b}.{c}.{d + i}" for i in range(self.nodes)]


class EmbeddedCluster:
    """Resolve, start, inspect and stop the lab's own Cassandra node(s)."""

    def __init__(self, options: NodeOptions) -> None:
        self.options = options
        self.home = Path(options.home).resolve()
        self.nodes_dir = self.home / "nodes"
        self.state_path = self.nodes_dir / "cluster.json"

    # ---- jars and java --------------------------------------------------------
    @property
    def lib_dir(self) -> Path:
        return self.home / "jars" / f"cassandra-{self.options.version}" / "lib"

    def resolve_jars(self) -> float:
        """Resolve cassandra-all and its dependencies with Maven, once. Returns seconds spent."""
        return jars.resolve(f"{CASSANDRA_ARTIFACT}:{self.options.version}", self.lib_dir,
                            local_repository=self.home / "m2")

    def classpath(self) -> str:
        return str(self.lib_dir / "*")

    @staticmethod
    def find_java() -> str:
        """A JDK 17 (or 11) ``java``: JAVA_HOME first, then PATH, then /usr/lib/jvm."""
        return java.find_java()

    def java_command(self, java_bin: str, node_dir: Path, jmx_port: int) -> list[str]:
        jamm = next(self.lib_dir.glob("jamm-*.jar"), None)
        conf = node_dir / "conf"
        cmd = [java_bin, *java.heap_flags(self.options.heap), *java.SERVER_FLAGS]
        if jamm:
            cmd.append(f"-javaagent:{jamm}")
        cmd += [
            f"-Dcassandra.config=file://{conf / 'cassandra.yaml'}",
            "-Dcassandra-foreground=yes",
            f"-Dcassandra.logdir={node_dir / 'logs'}",
            f"-Dcassandra.storagedir={node_dir / 'data'}",
            f"-Dlogback.configurationFile={conf / 'logback.xml'}",
            f"-Dcassandra.jmx.local.port={jmx_port}",
            "-Dcassandra.skip_wait_for_gossip_to_settle=0",
            # the ring delay also bounds a joining node's gossip shadow round: on a loaded
            # 2-core machine a seed can take longer than 1 s to answer ("Unable to gossip
            # with any peers"), so clusters wait longer; a single node has no peers to wait for
            f"-Dcassandra.ring_delay_ms={SINGLE_NODE_RING_DELAY_MS if self.options.nodes == 1 else CLUSTER_RING_DELAY_MS}",
            "-Dcassandra.superuser_setup_delay_ms=0",
            "-Dcassandra.consistent.rangemovement=false",
            f"-Djna.tmpdir={node_dir / 'tmp'}",
            f"-Djava.io.tmpdir={node_dir / 'tmp'}",
            *(THROWAWAY_FLAGS if self.options.throwaway else ()),
            process.marker_flag(node_dir),
            "-cp", self.classpath(), MAIN_CLASS,
        ]
        return cmd

    def nodetool(self, *args: str, node: NodeInfo | None = None, host: str = "127.0.0.1",
                 port: int | None = None, timeout: float = NODETOOL_TIMEOUT_SECONDS) -> str:
        """Run nodetool from the node's own classpath over local JMX; returns stdout."""
        jmx = port if port is not None else (node.jmx_port if node else self.options.jmx_port_base)
        quiet = self.home / "nodetool-logback.xml"
        if not quiet.exists():
            self.home.mkdir(parents=True, exist_ok=True)
            quiet.write_text(quiet_logback())
        cmd = [self.find_java(), f"-Xmx{NODETOOL_HEAP}", *java.MODULE_FLAGS, f"-Dlogback.configurationFile={quiet}",
               "-cp", self.classpath(), NODETOOL_CLASS,
               "-h", host, "-p", str(jmx), *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise AdminError(f"nodetool {' '.join(args)} failed: {(proc.stderr or proc.stdout)[-1500:]}",
                             command=list(args))
        return proc.stdout

    # ---- state ----------------------------------------------------------------
    def read_state(self) -> ClusterState | None:
        if not self.state_path.exists():
            return None
        raw = json.loads(self.state_path.read_text())
        nodes = tuple(NodeInfo(**n) for n in raw.pop("nodes"))
        return ClusterState(nodes=nodes, **raw)

    def _write_state(self, state: ClusterState) -> None:
        self.nodes_dir.mkdir(parents=True, exist_ok=True)
        data = asdict(state)
        data.pop("reused", None)
        self.state_path.write_text(json.dumps(data, indent=2))

    def running(self) -> list[NodeInfo]:
        """Recorded nodes whose JVM is still alive (and still ours, not a reused PID)."""
        state = self.read_state()
        return [n for n in (state.nodes if state else ()) if process.is_ours(n.pid, n.directory)]

    # ---- lifecycle ------------------------------------------------------------
    def start(self) -> ClusterState:
        """Start the cluster, or reuse it when every recorded node is running."""
        state = self.read_state()
        if state and len(state.nodes) == self.options.nodes and len(self.running()) == len(state.nodes):
            return ClusterState(**{**asdict(state), "nodes": state.nodes, "reused": True})
        if state and self.running():
            raise NodeError(f"a {len(state.nodes)}-node cluster is partly running; "
                            "run `lab node stop` before starting a different one")
        java_bin = self.find_java()
        resolve_seconds = self.resolve_jars()
        watch = Stopwatch()
        addresses = self.options.addresses()
        for i, address in enumerate(addresses):
            process.check_port_free(address, NATIVE_PORT, "CQL")
            process.check_port_free(address, STORAGE_PORT, "storage")
            process.check_port_free("127.0.0.1", self.options.jmx_port_base + i, "JMX")
        # the seed's first start creates the default superuser (any authenticator)
        fresh = not (self.nodes_dir / "node1" / "data" / "data" / "system_auth").exists()
        # the seed first; the others (auto_bootstrap false: no streaming) join it together
        nodes: list[NodeInfo] = []
        for wave in ([0], list(range(1, len(addresses)))):
            started = []
            for i in wave:
                started.append(self._spawn(java_bin, i, addresses))
                nodes.append(started[-1][1])
                self._write_state(ClusterState(version=self.options.version, nodes=tuple(nodes),
                                               auth=self.options.auth,
                                               tls=self.options.tls_keystore is not None))
            for proc, info, node_watch in started:
                try:
                    self._wait_ready(proc, info)
                except NodeError:
                    self.stop()
                    raise
                nodes[nodes.index(info)] = NodeInfo(**{**asdict(info),
                                                      "startup_seconds": node_watch.seconds(3)})
        if self.options.auth and fresh:
            self._wait_default_superuser(nodes)
        state = ClusterState(version=self.options.version, nodes=tuple(nodes), auth=self.options.auth,
                             tls=self.options.tls_keystore is not None,
                             resolve_seconds=round(resolve_seconds, 3),
                             startup_seconds=watch.seconds(3))
        self._write_state(state)
        return state

    def _spawn(self, java_bin: str, i: int, addresses: list[str]) -> tuple[subprocess.Popen, NodeInfo, Stopwatch]:
        name = f"node{i + 1}"
        node_dir = self.nodes_dir / name
        for sub in ("conf", "logs", "data", "tmp"):
            (node_dir / sub).mkdir(parents=True, exist_ok=True)
        (node_dir / "logs" / "system.log").unlink(missing_ok=True)
        write_node_config(NodeConfig(address=addresses[i], index=i, addresses=tuple(addresses), auth=self.options.auth,
                                     tls_keystore=self.options.tls_keystore,
                                     tls_keystore_password=self.options.tls_keystore_password), node_dir)
        jmx = self.options.jmx_port_base + i
        watch = Stopwatch()
        proc = process.spawn(self.java_command(java_bin, node_dir, jmx), cwd=node_dir,
                             log=node_dir / "logs" / "stdout.log")
        info = NodeInfo(name=name, address=addresses[i], jmx_port=jmx, native_port=NATIVE_PORT,
                        pid=proc.pid, directory=str(node_dir))
        return proc, info, watch

    def _wait_ready(self, proc: subprocess.Popen, info: NodeInfo) -> None:
        deadline = time.monotonic() + self.options.timeout_seconds
        while time.monotonic() < deadline:
            code = proc.poll()
            if code is not None:
                raise NodeDied(f"{info.name} ({info.address}) exited with code {code} during start-up; "
                               f"last lines of {info.log_path}:\n{self.log_tail(info)}",
                               node=info.name, exit_code=code, log_tail=self.log_tail(info))
            if process.log_has(info.log_path, _READY_LINE) and process.port_open(info.address, info.native_port):
                return
            time.sleep(_READY_POLL_SECONDS)
        raise NodeTimeout(f"{info.name} did not answer CQL on {info.address}:{info.native_port} within "
                          f"{self.options.timeout_seconds:.0f}s; last lines:\n{self.log_tail(info)}",
                          node=info.name)

    def _wait_default_superuser(self, nodes: list[NodeInfo]) -> None:
        """On a fresh cluster with PasswordAuthenticator, CQL opens before the role ``cassandra``
        exists and logins fail until it does. Later starts find it on disk: no wait then."""
        deadline = time.monotonic() + self.options.timeout_seconds
        while time.monotonic() < deadline:
            if any(process.log_has(n.log_path, _SUPERUSER_LINE) for n in nodes):
                return
            time.sleep(_READY_POLL_SECONDS)
        self.stop()
        raise NodeTimeout(f"the default superuser was not created within {self.options.timeout_seconds:.0f}s; "
                          f"last lines:\n{self.log_tail(nodes[0])}", node=nodes[0].name)

    def stop(self) -> list[int]:
        """Stop the JVMs this lab recorded (SIGTERM, then SIGKILL). Returns the PIDs stopped."""
        state = self.read_state()
        if state is None:
            return []
        ours = [n.pid for n in state.nodes if process.is_ours(n.pid, n.directory)]
        stopped = process.terminate(ours, timeout=STOP_TIMEOUT_SECONDS)
        self.state_path.unlink(missing_ok=True)
        return stopped

    def kill(self, name: str) -> int:
        """SIGKILL one recorded node (failure tests). Returns its PID."""
        node = self._node(name)
        if process.is_ours(node.pid, node.directory):
            process.kill(node.pid)
        return node.pid

    def restart(self, name: str) -> NodeInfo:
        """Start one recorded node again in its folder (after a kill); waits for CQL."""
        state = self.read_state()
        node = self._node(name)
        if process.is_ours(node.pid, node.directory):
            return node
        node_dir = Path(node.directory)
        (node_dir / "logs" / "system.log").unlink(missing_ok=True)
        watch = Stopwatch()
        proc = process.spawn(self.java_command(self.find_java(), node_dir, node.jmx_port), cwd=node_dir,
                             log=node_dir / "logs" / "stdout.log")
        info = NodeInfo(**{**asdict(node), "pid": proc.pid})
        nodes = tuple(info if n.name == name else n for n in state.nodes)
        self._write_state(ClusterState(**{**asdict(state), "nodes": nodes}))
        self._wait_ready(proc, info)
        info = NodeInfo(**{**asdict(info), "startup_seconds": watch.seconds(3)})
        return info

    def _node(self, name: str) -> NodeInfo:
        state = self.read_state()
        for n in state.nodes if state else ():
            if n.name == name:
                return n
        raise NodeError(f"no recorded node named {name!r}")

    def wipe(self) -> None:
        """Delete the node folders (data, commit log, logs). Refuses while a node runs."""
        if self.running():
            raise NodeError("the embedded node is running: `lab node stop` first")
        if self.nodes_dir.exists():
            shutil.rmtree(self.nodes_dir)

    def log_tail(self, node: NodeInfo, lines: int = _LOG_TAIL_LINES) -> str:
        return process.tail((node.log_path, Path(node.directory) / "logs" / "stdout.log"), lines)

