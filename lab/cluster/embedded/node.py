"""The embedded CQL node: a real Apache Cassandra 5.0 the lab resolves, starts and stops.

ScyllaDB cannot be installed on the lab's machines, so the default cluster is one (or
three) Cassandra JVMs started from the ``cassandra-all`` artifact on Maven Central. The
jars are resolved once into ``<home>/jars/cassandra-<version>/``; each node gets its own
folder with a generated ``cassandra.yaml`` and ``logback.xml``. The PIDs of the JVMs the
lab started are recorded in ``<home>/nodes/cluster.json``; ``stop`` signals only those.

Several nodes share one machine by listening on 127.0.0.1, .2, .3 with the same CQL and
storage ports and distinct JMX ports (JMX listens on 127.0.0.1 only).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from lab.errors import JavaNotFound, MavenError, NodeDied, NodeError, NodeTimeout, PortInUse

CASSANDRA_VERSION = "5.0.9"
NATIVE_PORT = 9042
STORAGE_PORT = 7000
JMX_PORT_BASE = 7199
START_TIMEOUT_SECONDS = 180.0
STOP_TIMEOUT_SECONDS = 45.0
DEFAULT_HEAP = "1G"
SINGLE_NODE_RING_DELAY_MS = 1000
CLUSTER_RING_DELAY_MS = 8000
POM_PATH = Path(__file__).with_name("pom.xml")
MAIN_CLASS = "org.apache.cassandra.service.CassandraDaemon"
NODETOOL_CLASS = "org.apache.cassandra.tools.NodeTool"
_READY_LINE = "Starting listening for CQL clients"
# logged once per data directory, when the role table was empty; a moment AFTER CQL opens
_SUPERUSER_LINE = "Created default superuser role"
_TOKEN_SPAN = 2**64

# conf/jvm17-server.options of the 5.0 branch
_JDK17_FLAGS = [
    "-XX:+UseG1GC",
    "-XX:+ParallelRefProcEnabled",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djdk.attach.allowAttachSelf=true",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Djava.net.preferIPv4Stack=true",
    "-Xss256k",
    *[f"--add-exports={m}=ALL-UNNAMED" for m in (
        "java.base/jdk.internal.misc", "java.management.rmi/com.sun.jmx.remote.internal.rmi",
        "java.management/com.sun.jmx.remote.security", "java.rmi/sun.rmi.registry",
        "java.rmi/sun.rmi.server", "java.sql/java.sql", "java.base/java.lang.ref",
        "jdk.unsupported/sun.misc")],
    *[f"--add-opens={m}=ALL-UNNAMED" for m in (
        "java.base/java.lang.module", "java.base/jdk.internal.loader", "java.base/jdk.internal.ref",
        "java.base/jdk.internal.reflect", "java.base/jdk.internal.math", "java.base/jdk.internal.module",
        "java.base/jdk.internal.util.jar", "java.base/sun.nio.ch", "java.base/java.io",
        "java.base/java.lang.reflect", "java.base/java.lang", "java.base/java.util",
        "java.base/java.nio", "jdk.management/com.sun.management.internal")],
]


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

    # ---- jars -----------------------------------------------------------------
    @property
    def lib_dir(self) -> Path:
        return self.home / "jars" / f"cassandra-{self.options.version}" / "lib"

    def resolve_jars(self) -> float:
        """Resolve cassandra-all and its dependencies with Maven, once. Returns seconds spent."""
        marker = self.lib_dir / ".complete"
        if marker.exists():
            return 0.0
        mvn = shutil.which("mvn")
        if mvn is None:
            raise MavenError("Maven (mvn) is not on PATH: install Maven to resolve the Cassandra jars")
        self.lib_dir.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        cmd = [mvn, "-B", "-q", "-f", str(POM_PATH), "dependency:copy-dependencies",
               f"-Dcassandra.version={self.options.version}", f"-DoutputDirectory={self.lib_dir}",
               f"-Dmaven.repo.local={self.home / 'm2'}"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            out = (proc.stdout + proc.stderr)[-2000:]
            unreachable = re.search(r"UnknownHost|Could not transfer|Connection refused|timed out|Network is unreachable", out)
            why = "Maven Central is unreachable" if unreachable else "Maven could not resolve the jars"
            raise MavenError(f"{why} (org.apache.cassandra:cassandra-all:{self.options.version}):\n{out}",
                             command=" ".join(cmd))
        if not any(self.lib_dir.glob("cassandra-all-*.jar")):
            raise MavenError(f"Maven finished but no cassandra-all jar is in {self.lib_dir}")
        marker.write_text(self.options.version)
        return time.monotonic() - t0

    def classpath(self) -> str:
        return str(self.lib_dir / "*")

    # ---- java -----------------------------------------------------------------
    @staticmethod
    def find_java() -> str:
        """A JDK 17 (or 11) ``java``: JAVA_HOME first, then PATH, then /usr/lib/jvm."""
        candidates = []
        if os.environ.get("JAVA_HOME"):
            candidates.append(str(Path(os.environ["JAVA_HOME"]) / "bin" / "java"))
        if shutil.which("java"):
            candidates.append(shutil.which("java"))
        candidates += sorted(str(p) for p in Path("/usr/lib/jvm").glob("*17*/bin/java"))
        seen = []
        for java in candidates:
            if not java or not Path(java).exists():
                continue
            major = _java_major(java)
            seen.append(f"{java} ({major})")
            if major in (11, 17):
                return java
        raise JavaNotFound("no Java 17 found (Cassandra 5.0 runs on JDK 11 or 17); "
                           f"looked at JAVA_HOME, PATH and /usr/lib/jvm: {', '.join(seen) or 'nothing'}")

    def java_command(self, java: str, node_dir: Path, jmx_port: int) -> list[str]:
        jamm = next(self.lib_dir.glob("jamm-*.jar"), None)
        conf = node_dir / "conf"
        cmd = [java, f"-Xms{self.options.heap}", f"-Xmx{self.options.heap}", *_JDK17_FLAGS]
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
            f"-Dlab.node={node_dir}",
            "-cp", self.classpath(), MAIN_CLASS,
        ]
        return cmd

    def nodetool(self, *args: str, node: NodeInfo | None = None, host: str = "127.0.0.1",
                 port: int | None = None, timeout: float = 300.0) -> str:
        """Run nodetool from the node's own classpath over local JMX; returns stdout."""
        from lab.errors import AdminError
        java = self.find_java()
        jmx = port if port is not None else (node.jmx_port if node else self.options.jmx_port_base)
        quiet = self.home / "nodetool-logback.xml"
        if not quiet.exists():
            self.home.mkdir(parents=True, exist_ok=True)
            quiet.write_text(_QUIET_LOGBACK)
        cmd = [java, "-Xmx256m", *_JDK17_FLAGS[3:], f"-Dlogback.configurationFile={quiet}",
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
        return [n for n in (state.nodes if state else ()) if _is_our_jvm(n.pid, n.directory)]

    # ---- lifecycle ------------------------------------------------------------
    def start(self) -> ClusterState:
        """Start the cluster, or reuse it when every recorded node is running."""
        state = self.read_state()
        if state and len(state.nodes) == self.options.nodes and len(self.running()) == len(state.nodes):
            return ClusterState(**{**asdict(state), "nodes": state.nodes, "reused": True})
        if state and self.running():
            raise NodeError(f"a {len(state.nodes)}-node cluster is partly running; "
                            "run `lab node stop` before starting a different one")
        java = self.find_java()
        resolve_seconds = self.resolve_jars()
        t_start = time.monotonic()
        addresses = self.options.addresses()
        for i, address in enumerate(addresses):
            _check_port_free(address, NATIVE_PORT, "CQL")
            _check_port_free(address, STORAGE_PORT, "storage")
            _check_port_free("127.0.0.1", self.options.jmx_port_base + i, "JMX")
        # the seed's first start creates the default superuser (any authenticator)
        fresh = not (self.nodes_dir / "node1" / "data" / "data" / "system_auth").exists()
        # the seed first; the others (auto_bootstrap false: no streaming) join it together
        nodes: list[NodeInfo] = []
        for wave in ([0], list(range(1, len(addresses)))):
            started = []
            for i in wave:
                started.append(self._spawn(java, i, addresses))
                nodes.append(started[-1][1])
                self._write_state(ClusterState(version=self.options.version, nodes=tuple(nodes),
                                               auth=self.options.auth,
                                               tls=self.options.tls_keystore is not None))
            for proc, info, t0 in started:
                try:
                    self._wait_ready(proc, info)
                except NodeError:
                    self.stop()
                    raise
                nodes[nodes.index(info)] = NodeInfo(**{**asdict(info),
                                                      "startup_seconds": round(time.monotonic() - t0, 3)})
        if self.options.auth and fresh:
            self._wait_default_superuser(nodes)
        state = ClusterState(version=self.options.version, nodes=tuple(nodes), auth=self.options.auth,
                             tls=self.options.tls_keystore is not None,
                             resolve_seconds=round(resolve_seconds, 3),
                             startup_seconds=round(time.monotonic() - t_start, 3))
        self._write_state(state)
        return state

    def _spawn(self, java: str, i: int, addresses: list[str]) -> tuple[subprocess.Popen, NodeInfo, float]:
        name = f"node{i + 1}"
        node_dir = self.nodes_dir / name
        for sub in ("conf", "logs", "data", "tmp"):
            (node_dir / sub).mkdir(parents=True, exist_ok=True)
        (node_dir / "logs" / "system.log").unlink(missing_ok=True)
        self._write_config(node_dir, addresses[i], i, addresses)
        jmx = self.options.jmx_port_base + i
        t0 = time.monotonic()
        with open(node_dir / "logs" / "stdout.log", "ab") as out:
            proc = subprocess.Popen(self.java_command(java, node_dir, jmx), stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    cwd=node_dir, start_new_session=True)
        info = NodeInfo(name=name, address=addresses[i], jmx_port=jmx, native_port=NATIVE_PORT,
                        pid=proc.pid, directory=str(node_dir))
        return proc, info, t0

    def _wait_ready(self, proc: subprocess.Popen, info: NodeInfo) -> None:
        deadline = time.monotonic() + self.options.timeout_seconds
        while time.monotonic() < deadline:
            code = proc.poll()
            if code is not None:
                raise NodeDied(f"{info.name} ({info.address}) exited with code {code} during start-up; "
                               f"last lines of {info.log_path}:\n{self.log_tail(info)}",
                               node=info.name, exit_code=code, log_tail=self.log_tail(info))
            if _log_has(info.log_path, _READY_LINE) and _port_open(info.address, info.native_port):
                return
            time.sleep(0.25)
        raise NodeTimeout(f"{info.name} did not answer CQL on {info.address}:{info.native_port} within "
                          f"{self.options.timeout_seconds:.0f}s; last lines:\n{self.log_tail(info)}",
                          node=info.name)

    def _wait_default_superuser(self, nodes: list[NodeInfo]) -> None:
        """On a fresh cluster with PasswordAuthenticator, CQL opens before the role ``cassandra``
        exists and logins fail until it does. Later starts find it on disk: no wait then."""
        deadline = time.monotonic() + self.options.timeout_seconds
        while time.monotonic() < deadline:
            if any(_log_has(n.log_path, _SUPERUSER_LINE) for n in nodes):
                return
            time.sleep(0.25)
        self.stop()
        raise NodeTimeout(f"the default superuser was not created within {self.options.timeout_seconds:.0f}s; "
                          f"last lines:\n{self.log_tail(nodes[0])}", node=nodes[0].name)

    def stop(self) -> list[int]:
        """Stop the JVMs this lab recorded (SIGTERM, then SIGKILL). Returns the PIDs stopped."""
        state = self.read_state()
        if state is None:
            return []
        stopped = []
        for node in state.nodes:
            if not _is_our_jvm(node.pid, node.directory):
                continue
            try:
                os.kill(node.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            stopped.append(node.pid)
        deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
        for pid in stopped:
            while _pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.2)
            if _pid_alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                _wait_pid_gone(pid, 10.0)
        self.state_path.unlink(missing_ok=True)
        return stopped

    def kill(self, name: str) -> int:
        """SIGKILL one recorded node (failure tests). Returns its PID."""
        node = self._node(name)
        os.kill(node.pid, signal.SIGKILL)
        _wait_pid_gone(node.pid, 10.0)
        return node.pid

    def restart(self, name: str) -> NodeInfo:
        """Start one recorded node again in its folder (after a kill); waits for CQL."""
        state = self.read_state()
        node = self._node(name)
        if _is_our_jvm(node.pid, node.directory):
            return node
        java = self.find_java()
        node_dir = Path(node.directory)
        (node_dir / "logs" / "system.log").unlink(missing_ok=True)
        t0 = time.monotonic()
        with open(node_dir / "logs" / "stdout.log", "ab") as out:
            proc = subprocess.Popen(self.java_command(java, node_dir, node.jmx_port), stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=node_dir,
                                    start_new_session=True)
        info = NodeInfo(**{**asdict(node), "pid": proc.pid})
        nodes = tuple(info if n.name == name else n for n in state.nodes)
        self._write_state(ClusterState(**{**asdict(state), "nodes": nodes}))
        self._wait_ready(proc, info)
        info = NodeInfo(**{**asdict(info), "startup_seconds": round(time.monotonic() - t0, 3)})
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

    def log_tail(self, node: NodeInfo, lines: int = 40) -> str:
        texts = []
        for path in (node.log_path, Path(node.directory) / "logs" / "stdout.log"):
            if path.exists():
                texts.append("\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(texts)

    # ---- configuration --------------------------------------------------------
    def _write_config(self, node_dir: Path, address: str, index: int, addresses: list[str]) -> None:
        conf = node_dir / "conf"
        token = -(2**63) + index * (_TOKEN_SPAN // len(addresses))
        lines = [
            "cluster_name: lab",
            "num_tokens: 1",
            f"initial_token: {token}",
            "partitioner: org.apache.cassandra.dht.Murmur3Partitioner",
            "endpoint_snitch: SimpleSnitch",
            "seed_provider:",
            "  - class_name: org.apache.cassandra.locator.SimpleSeedProvider",
            "    parameters:",
            f"      - seeds: \"{addresses[0]}:{STORAGE_PORT}\"",
            f"listen_address: {address}",
            f"rpc_address: {address}",
            f"storage_port: {STORAGE_PORT}",
            f"native_transport_port: {NATIVE_PORT}",
            "start_native_transport: true",
            f"auto_bootstrap: {'true' if index == 0 else 'false'}",
            "commitlog_sync: periodic",
            "commitlog_sync_period: 10000ms",
            "commitlog_segment_size: 32MiB",
            f"commitlog_directory: {node_dir / 'data' / 'commitlog'}",
            "data_file_directories:",
            f"  - {node_dir / 'data' / 'data'}",
            f"saved_caches_directory: {node_dir / 'data' / 'saved_caches'}",
            f"hints_directory: {node_dir / 'data' / 'hints'}",
            "auto_snapshot: false",
            "snapshot_before_compaction: false",
            "concurrent_compactors: 1",
            "compaction_throughput: 0MiB/s",
            "read_request_timeout: 10000ms",
            "range_request_timeout: 20000ms",
            "write_request_timeout: 5000ms",
            "cas_contention_timeout: 5000ms",
            "request_timeout: 20000ms",
            "tombstone_warn_threshold: 1000",
            "batch_size_warn_threshold: 64KiB",
            "batch_size_fail_threshold: 1024KiB",
            "user_defined_functions_enabled: false",
            "materialized_views_enabled: false",
            "diagnostic_events_enabled: false",
        ]
        if self.options.auth:
            lines += ["authenticator: PasswordAuthenticator", "authorizer: CassandraAuthorizer",
                      "role_manager: CassandraRoleManager"]
        else:
            lines += ["authenticator: AllowAllAuthenticator", "authorizer: AllowAllAuthorizer"]
        if self.options.tls_keystore is not None:
            keystore = Path(self.options.tls_keystore).resolve()
            # the JDK's default JKS type reads PKCS12 only in compatibility mode: say what it is
            store_type = "PKCS12" if keystore.suffix.lower() in (".p12", ".pfx") else "JKS"
            lines += ["client_encryption_options:", "  enabled: true", "  optional: false",
                      f"  keystore: {keystore}",
                      f"  keystore_password: {json.dumps(self.options.tls_keystore_password or '')}",
                      f"  store_type: {store_type}",
                      "  require_client_auth: false"]
        # it may hold the keystore password: readable by its owner only, from the first byte
        yaml_path = conf / "cassandra.yaml"
        yaml_path.unlink(missing_ok=True)
        with os.fdopen(os.open(yaml_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            f.write("\n".join(lines) + "\n")
        (conf / "logback.xml").write_text(_LOGBACK.format(log=node_dir / "logs" / "system.log"))


_LOGBACK = """<configuration scan="false">
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{log}</file>
    <encoder><pattern>%-5level [%thread] %date{{ISO8601}} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <logger name="org.apache.cassandra" level="INFO"/>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
"""


_QUIET_LOGBACK = """<configuration>
  <appender name="ERR" class="ch.qos.logback.core.ConsoleAppender">
    <target>System.err</target>
    <encoder><pattern>%msg%n</pattern></encoder>
  </appender>
  <root level="ERROR"><appender-ref ref="ERR"/></root>
</configuration>
"""


def _java_major(java: str) -> int | None:
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2)) if major == 1 and m.group(2) else major


def _check_port_free(address: str, port: int, what: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address, port))
        except OSError as exc:
            raise PortInUse(f"{what} port {address}:{port} is already in use ({exc.strerror}); "
                            "another Cassandra/Scylla may be running: stop it, or point the lab "
                            "at it with --contact-points", address=address, port=port) from exc


def _port_open(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=1.0):
            return True
    except OSError:
        return False


def _log_has(path: Path, needle: str) -> bool:
    try:
        return needle in path.read_text(errors="replace")
    except OSError:
        return False


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child is dead for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def _wait_pid_gone(pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while _pid_alive(pid) and time.monotonic() < deadline:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.1)


def _is_our_jvm(pid: int, directory: str) -> bool:
    """True when PID is alive and is the JVM started for ``directory`` (guards PID reuse)."""
    if not _pid_alive(pid):
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read().decode(errors="replace")
    except OSError:
        return False
    return f"-Dlab.node={directory}" in cmdline
