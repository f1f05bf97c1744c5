"""The embedded Redis: Debian's ``redis-server`` started by the lab for the hot window.

More: docs/cluster-internals.md.
"""
from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from lab.cluster.embedded import process
from lab.errors import NodeDied, NodeError, NodeTimeout
from lab.measure import Stopwatch

REDIS_PORT = 16379
START_TIMEOUT_SECONDS = 30.0
STOP_TIMEOUT_SECONDS = 15.0
STATE_FILE = "redis.json"
REDIS_SERVER_PATHS = ("/usr/bin/redis-server", "/usr/local/bin/redis-server")
_PING = b"*1\r\n$4\r\nPING\r\n"


@dataclass(frozen=True, kw_only=True)
class RedisOptions:
    home: Path
    address: str = "127.0.0.1"
    port: int = REDIS_PORT
    folder: str = "redis"
    maxmemory: str = "1gb"
    timeout_seconds: float = START_TIMEOUT_SECONDS

    def __post_init__(self) -> None:
        if not self.address.startswith("127."):
            raise NodeError(f"the embedded Redis listens on loopback only, not {self.address}", address=self.address)


@dataclass(frozen=True, kw_only=True)
class RedisState:
    version: str
    pid: int
    address: str
    port: int
    directory: str
    startup_seconds: float = 0.0
    reused: bool = False


def find_redis_server() -> str:
    found = shutil.which("redis-server") or next((p for p in REDIS_SERVER_PATHS if Path(p).exists()), None)
    if found is None:
        raise NodeError("redis-server is not installed: `make redis` installs Debian's redis-server package",
                        looked_at=REDIS_SERVER_PATHS)
    return found


def ping(address: str, port: int, timeout: float = 1.0) -> bool:
    """True when a Redis answers PING (also before it has loaded its AOF: then it says LOADING)."""
    try:
        with socket.create_connection((address, port), timeout=timeout) as s:
            s.sendall(_PING)
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class EmbeddedRedis:
    def __init__(self, options: RedisOptions) -> None:
        self.options = options
        self.home = Path(options.home).resolve()
        self.directory = self.home / options.folder
        self.state_path = self.directory / STATE_FILE
        self.conf_path = self.directory / "redis.conf"

    def read_state(self) -> RedisState | None:
        if not self.state_path.exists():
            return None
        return RedisState(**json.loads(self.state_path.read_text()))

    def _write_state(self, state: RedisState) -> None:
        data = asdict(state)
        data.pop("reused")
        self.state_path.write_text(json.dumps(data, indent=2))

    def _is_ours(self, pid: int) -> bool:
        if not process.alive(pid):
            return False
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                return str(self.conf_path) in f.read().decode(errors="replace")
        except OSError:
            return False

    def running(self) -> RedisState | None:
        state = self.read_state()
        return state if state is not None and self._is_ours(state.pid) else None

    def start(self) -> RedisState:
        """Start Redis, or reuse the recorded one when it still runs."""
        state = self.running()
        if state is not None:
            return RedisState(**{**asdict(state), "reused": True})
        server = find_redis_server()
        for sub in ("data", "logs"):
            (self.directory / sub).mkdir(parents=True, exist_ok=True)
        process.check_port_free(self.options.address, self.options.port, "Redis",
                                 hint="another Redis may be running: stop it, or start the node with --no-redis")
        self._write_config()
        watch = Stopwatch()
        proc = process.spawn([server, str(self.conf_path)], cwd=self.directory,
                             log=self.directory / "logs" / "stdout.log")
        version = _server_version(server)
        state = RedisState(version=version, pid=proc.pid, address=self.options.address, port=self.options.port,
                           directory=str(self.directory))
        self._write_state(state)
        deadline = time.monotonic() + self.options.timeout_seconds
        while not ping(self.options.address, self.options.port):
            code = proc.poll()
            if code is not None:
                raise NodeDied(f"redis-server exited with code {code} during start-up; last lines:\n{self.log_tail()}",
                               node="redis", exit_code=code, log_tail=self.log_tail())
            if time.monotonic() > deadline:
                self.stop()
                raise NodeTimeout(f"Redis did not answer PING within {self.options.timeout_seconds:.0f}s",
                                  node="redis")
            time.sleep(0.05)
        state = RedisState(**{**asdict(state), "startup_seconds": watch.seconds(3)})
        self._write_state(state)
        return state

    def stop(self) -> list[int]:
        """SIGTERM the recorded redis-server (it finishes its AOF), SIGKILL after a grace period."""
        state = self.read_state()
        if state is None:
            return []
        stopped = process.terminate([state.pid], timeout=STOP_TIMEOUT_SECONDS) if self._is_ours(state.pid) else []
        self.state_path.unlink(missing_ok=True)
        return stopped

    def log_tail(self, lines: int = 40) -> str:
        return process.tail([self.directory / "logs" / "redis.log", self.directory / "logs" / "stdout.log"], lines)

    def _write_config(self) -> None:
        o = self.options
        lines = [
            f"bind {o.address}",
            f"port {o.port}",
            "protected-mode yes",
            "daemonize no",
            "set-proc-title no",
            f"dir {self.directory / 'data'}",
            f"logfile {self.directory / 'logs' / 'redis.log'}",
            'save ""',
            "appendonly yes",
            "appendfsync everysec",
            f"maxmemory {o.maxmemory}",
            # the hot window must not silently lose unarchived messages: refuse writes when full
            "maxmemory-policy noeviction",
            "databases 16",
        ]
        self.conf_path.write_text("\n".join(lines) + "\n")


def _server_version(server: str) -> str:
    try:
        out = subprocess.run([server, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    for part in out.split():
        if part.startswith("v="):
            return part[2:]
    return "unknown"
