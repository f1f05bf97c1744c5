"""The embedded Kafka broker: a real Apache Kafka 4.x in KRaft mode that the lab resolves,
formats, starts and stops beside the Cassandra node.

More: docs/cluster-internals.md.
"""
from __future__ import annotations

import base64
import json
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from lab.cluster.embedded import jars, java, process
from lab.errors import NodeDied, NodeError, NodeTimeout
from lab.measure import Stopwatch

KAFKA_VERSION = "4.4.0"
KAFKA_ARTIFACT = "org.apache.kafka:kafka_2.13"
# Kafka's own distribution logs through log4j2; the artifact's POM brings log4j-core but no
# SLF4J binding, and without one the broker logs nothing (and readiness is read from the log).
LOGGING_ARTIFACTS = ("org.apache.logging.log4j:log4j-slf4j2-impl:2.25.5", "org.slf4j:slf4j-api:2.0.17")
BROKER_PORT = 19092
CONTROLLER_PORT = 19093
DEFAULT_HEAP = "512m"
DEFAULT_PARTITIONS = 4
START_TIMEOUT_SECONDS = 120.0
STOP_TIMEOUT_SECONDS = 30.0
MAIN_CLASS = "kafka.Kafka"
STORAGE_TOOL_CLASS = "kafka.tools.StorageTool"
STATE_FILE = "broker.json"
_READY_LINE = "Kafka Server started"
_JVM_FLAGS = ["-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:+ExitOnOutOfMemoryError",
              "-Djava.awt.headless=true", "-Djava.net.preferIPv4Stack=true"]


@dataclass(frozen=True, kw_only=True)
class BrokerOptions:
    """How to start the embedded broker. ``home`` is the lab's home (jars, ``kafka/``)."""

    home: Path
    version: str = KAFKA_VERSION
    address: str = "127.0.0.1"
    port: int = BROKER_PORT
    controller_port: int = CONTROLLER_PORT
    heap: str = DEFAULT_HEAP
    partitions: int = DEFAULT_PARTITIONS
    flush_every_message: bool = False
    folder: str = "kafka"  # under home; tests that kill a broker use a folder of their own
    timeout_seconds: float = START_TIMEOUT_SECONDS

    def __post_init__(self) -> None:
        if not self.address.startswith("127."):
            raise NodeError(f"the embedded broker listens on loopback only, not {self.address}",
                            address=self.address)

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.address}:{self.port}"


@dataclass(frozen=True, kw_only=True)
class BrokerState:
    """What ``broker.json`` records about the broker the lab started."""

    version: str
    pid: int
    address: str
    port: int
    controller_port: int
    directory: str
    cluster_id: str
    startup_seconds: float = 0.0
    resolve_seconds: float = 0.0
    format_seconds: float = 0.0
    reused: bool = False

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.address}:{self.port}"

    @property
    def log_path(self) -> Path:
        return Path(self.directory) / "logs" / "server.log"



def new_cluster_id(draw=lambda: uuid.uuid4().bytes) -> str:
    """A KRaft cluster id: a random UUID in URL-safe base64 (22 characters), never one that starts
    with '-': ``kafka-storage format -t <id>`` reads such an id as an option and fails ("argument
    --cluster-id/-t: expected one argument"; 1 start in 64, seen in a fresh-clone CI), and Kafka's own
    ``Uuid.randomUuid()`` draws again in that case too."""
    while True:
        cluster_id = base64.urlsafe_b64encode(draw()).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id

class EmbeddedBroker:
    """Resolve, format, start, inspect and stop the lab's own Kafka broker."""

    def __init__(self, options: BrokerOptions) -> None:
        self.options = options
        self.home = Path(options.home).resolve()
        self.directory = self.home / options.folder
        self.state_path = self.directory / STATE_FILE

    # ---- jars and storage --------------------------------------------------------------
    @property
    def lib_dir(self) -> Path:
        return self.home / "jars" / f"kafka-{self.options.version}" / "lib"

    def resolve_jars(self) -> float:
        """Resolve kafka_2.13 and its dependencies with Maven, once. Returns seconds spent."""
        return jars.resolve([f"{KAFKA_ARTIFACT}:{self.options.version}", *LOGGING_ARTIFACTS], self.lib_dir,
                            local_repository=self.home / "m2")

    def format_storage(self, java_bin: str) -> float:
        """``StorageTool format`` the data folder with a new cluster id, once. Returns seconds."""
        data = self.directory / "data"
        if (data / "meta.properties").exists():
            return 0.0
        data.mkdir(parents=True, exist_ok=True)
        cluster_id = new_cluster_id()
        watch = Stopwatch()
        proc = subprocess.run([java_bin, "-Xmx256m", *self._logging_flags(), "-cp", str(self.lib_dir / "*"),
                               STORAGE_TOOL_CLASS, "format", "-t", cluster_id, "-c",
                               str(self.directory / "conf" / "server.properties")],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise NodeError(f"kafka-storage format failed: {(proc.stderr or proc.stdout)[-1500:]}",
                            directory=str(data))
        return watch.seconds()

    def cluster_id(self) -> str:
        for line in (self.directory / "data" / "meta.properties").read_text().splitlines():
            if line.startswith("cluster.id="):
                return line.split("=", 1)[1].strip()
        raise NodeError(f"no cluster.id in {self.directory / 'data' / 'meta.properties'}")

    # ---- state -------------------------------------------------------------------------
    def read_state(self) -> BrokerState | None:
        if not self.state_path.exists():
            return None
        return BrokerState(**json.loads(self.state_path.read_text()))

    def _write_state(self, state: BrokerState) -> None:
        data = asdict(state)
        data.pop("reused")
        self.state_path.write_text(json.dumps(data, indent=2))

    def running(self) -> BrokerState | None:
        """The recorded broker when its JVM is alive and still ours, else None."""
        state = self.read_state()
        if state is not None and process.is_ours(state.pid, self.directory):
            return state
        return None

    # ---- lifecycle ---------------------------------------------------------------------
    def start(self) -> BrokerState:
        """Start the broker (resolving and formatting first when needed) or reuse a running one."""
        state = self.running()
        if state is not None:
            return BrokerState(**{**asdict(state), "reused": True})
        java_bin = java.find_java((17, 21, 25))
        resolve_seconds = self.resolve_jars()
        for sub in ("conf", "logs", "data"):
            (self.directory / sub).mkdir(parents=True, exist_ok=True)
        self._write_config()
        format_seconds = self.format_storage(java_bin)
        for port, what in ((self.options.port, "Kafka broker"), (self.options.controller_port, "Kafka controller")):
            process.check_port_free(self.options.address, port, what,
                                     hint="another Kafka broker may be running: stop it, or start the node with --no-broker")
        log = self.directory / "logs" / "server.log"
        log.unlink(missing_ok=True)
        watch = Stopwatch()
        proc = process.spawn(self._command(java_bin), cwd=self.directory, log=self.directory / "logs" / "stdout.log")
        state = BrokerState(version=self.options.version, pid=proc.pid, address=self.options.address,
                            port=self.options.port, controller_port=self.options.controller_port,
                            directory=str(self.directory), cluster_id=self.cluster_id(),
                            resolve_seconds=round(resolve_seconds, 3), format_seconds=round(format_seconds, 3))
        self._write_state(state)  # recorded before the wait: a failed start can still be stopped
        try:
            self._wait_ready(proc, state)
        except NodeError:
            self.stop()
            raise
        state = BrokerState(**{**asdict(state), "startup_seconds": watch.seconds(3)})
        self._write_state(state)
        return state

    def _command(self, java_bin: str) -> list[str]:
        return [java_bin, *java.heap_flags(self.options.heap), *_JVM_FLAGS, *self._logging_flags(),
                f"-Dkafka.logs.dir={self.directory / 'logs'}", process.marker_flag(self.directory),
                "-cp", str(self.lib_dir / "*"), MAIN_CLASS, str(self.directory / "conf" / "server.properties")]

    def _logging_flags(self) -> list[str]:
        return [f"-Dlog4j2.configurationFile={self.directory / 'conf' / 'log4j2.yaml'}"]

    def _wait_ready(self, proc: subprocess.Popen, state: BrokerState) -> None:
        deadline = time.monotonic() + self.options.timeout_seconds
        while time.monotonic() < deadline:
            code = proc.poll()
            if code is not None:
                raise NodeDied(f"the Kafka broker exited with code {code} during start-up; last lines:\n"
                               f"{self.log_tail()}", node="kafka", exit_code=code, log_tail=self.log_tail())
            if process.log_has(state.log_path, _READY_LINE) and process.port_open(state.address, state.port):
                return
            time.sleep(0.1)
        raise NodeTimeout(f"the Kafka broker did not start within {self.options.timeout_seconds:.0f}s; "
                          f"last lines:\n{self.log_tail()}", node="kafka")

    def stop(self) -> list[int]:
        """SIGTERM the recorded broker (SIGKILL after a grace period). Returns the PIDs stopped."""
        state = self.read_state()
        if state is None:
            return []
        stopped = []
        if process.is_ours(state.pid, self.directory):
            stopped = process.terminate([state.pid], timeout=STOP_TIMEOUT_SECONDS)
        self.state_path.unlink(missing_ok=True)
        return stopped

    def kill(self) -> int:
        """SIGKILL the recorded broker (failure tests); the state stays for :meth:`restart`."""
        state = self.running()
        if state is None:
            raise NodeError("no running embedded broker to kill", directory=str(self.directory))
        process.kill(state.pid)
        return state.pid

    def restart(self) -> BrokerState:
        """Start the broker again on its formatted data (after :meth:`kill`); waits until ready."""
        state = self.read_state()
        if state is not None and process.is_ours(state.pid, self.directory):
            return state
        self.state_path.unlink(missing_ok=True)
        return self.start()

    def log_tail(self, lines: int = 40) -> str:
        return process.tail([self.directory / "logs" / "server.log", self.directory / "logs" / "stdout.log"], lines)

    # ---- configuration -----------------------------------------------------------------
    def _write_config(self) -> None:
        o = self.options
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{o.address}:{o.controller_port}",
            "listeners": f"PLAINTEXT://{o.address}:{o.port},CONTROLLER://{o.address}:{o.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{o.address}:{o.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.directory / "data"),
            "num.partitions": str(o.partitions),
            # one broker: every internal topic has one replica; few partitions keep the first
            # consumer-group commit (which creates __consumer_offsets) quick on 2 cores
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # a broker restarted after SIGKILL waits until its previous incarnation's session
            # expires (9 s by default; docs/measurements.md); one process is both sides here
            "broker.heartbeat.interval.ms": "500",
            "broker.session.timeout.ms": "3000",
            "auto.create.topics.enable": "false",
            "num.network.threads": "2",
            "num.io.threads": "4",
            "log.retention.hours": "168",
        }
        if o.flush_every_message:
            props["log.flush.interval.messages"] = "1"
        (self.directory / "conf" / "server.properties").write_text(
            "".join(f"{k}={v}\n" for k, v in props.items()))
        (self.directory / "conf" / "log4j2.yaml").write_text(_LOG4J2.format(log=self.directory / "logs" / "server.log"))


_LOG4J2 = """Configuration:
  Appenders:
    File:
      name: FILE
      fileName: "{log}"
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Logger:
      - name: kafka.request.logger
        level: WARN
      - name: org.apache.kafka.controller
        level: INFO
    Root:
      level: INFO
      AppenderRef:
        - ref: FILE
"""
