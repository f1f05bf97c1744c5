"""The Locust processes of a load run: their command lines, environment, start and stop.

More: docs/load-internals.md.
"""
from __future__ import annotations

import dataclasses
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.cluster.config import ClusterConfig
from lab.load.plan import LoadPlan

LOCUSTFILE = Path(__file__).with_name("locust") / "entrypoint.py"
DEFAULT_WEB_PORT = 8089
DEFAULT_MASTER_PORT = 5557  # Locust's own default
POLL_SECONDS = 0.2


@dataclass(frozen=True, kw_only=True)
class WebOptions:
    """Locust's web UI: where it listens (loopback unless asked) and the Host it shows."""

    host: str = "127.0.0.1"
    port: int | None = None  # None: 8089, or a free port when 8089 is taken

    def bound_port(self) -> int:
        return self.port if self.port is not None else (DEFAULT_WEB_PORT if port_free(self.host, DEFAULT_WEB_PORT)
                                                        else free_port(self.host))


def config_env(config: ClusterConfig) -> dict[str, str]:
    """``LAB_*`` variables that rebuild ``config`` in another process (password included:
    the environment is the one channel a secret may take)."""
    out = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if value is None:
            continue
        if isinstance(value, tuple):
            value = ",".join(value)
        elif isinstance(value, bool):
            value = "true" if value else "false"
        out[f"LAB_{f.name.upper()}"] = str(value)
    return out


def services_env(services: Any) -> dict[str, str]:
    """``LAB_*`` variables that rebuild ``services`` (lab.cluster.services) in another process;
    passwords too, the environment being the one channel a secret may take. The request timeout
    is the cluster config's (``LAB_REQUEST_TIMEOUT_SECONDS``)."""
    out = {}
    for f in dataclasses.fields(services):
        value = getattr(services, f.name)
        if value is None or f.name == "request_timeout_seconds":
            continue
        out[f"LAB_{f.name.upper()}"] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return out


def child_env(config: ClusterConfig | None, plan: LoadPlan, worker_index: int | None = None,
              role: str = "standalone", services: Any = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAB_")}
    if config is not None:  # the master of a distributed run holds no store and gets no credentials
        env.update(config_env(config))
        if services is not None:
            env.update(services_env(services))
    env.update(plan.to_env())
    env["LAB_LOAD_ROLE"] = role
    if plan.native_threads and role != "master":  # the master holds no store and needs the patch
        env["LOCUST_SKIP_MONKEY_PATCH"] = "1"
    if worker_index is not None:
        env["LAB_LOAD_WORKER_INDEX"] = str(worker_index)
    return env


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_free(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def display_host(config: ClusterConfig) -> str:
    """What Locust's UI shows as Host: the cluster and keyspace the users talk to."""
    return f"cql://{config.contact_points[0]}:{config.port}/{config.keyspace}"


def locust_cmd(plan: LoadPlan, load_dir: Path, *, role: str, stop_timeout_seconds: int,
               master_host: str = "127.0.0.1", master_port: int | None = None, index: int | None = None,
               web: WebOptions | None = None, web_port: int | None = None, expect_workers: int | None = None,
               host: str | None = None) -> list[str]:
    """``role``: standalone | master | worker. ``web``: the UI instead of a headless run."""
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--loglevel", "INFO"]
    if role == "worker":
        return cmd + ["--worker", "--master-host", master_host, "--master-port", str(master_port),
                      "--logfile", str(load_dir / f"locust-worker-{index}.log")]
    cmd += ["-u", str(plan.users), "-r", str(plan.users), "--csv", str(load_dir / "locust"), "--csv-full-history",
            "--json-file", str(load_dir / "locust"), "--stop-timeout", str(stop_timeout_seconds),
            "--logfile", str(load_dir / "locust.log")]
    if host:
        cmd += ["--host", host]
    if web is None:
        cmd += ["--headless", "--only-summary"]
    else:
        cmd += ["--web-host", web.host, "--web-port", str(web_port)]
    if role == "master":
        cmd += ["--master", "--master-bind-host", master_host, "--master-bind-port", str(master_port)]
        if web is None:
            cmd += ["--expect-workers", str(expect_workers or plan.workers)]
    return cmd


class Processes:
    """The Locust processes this run started, by handle: nothing else is ever signalled."""

    def __init__(self, log_path: Path) -> None:
        self.procs: list[subprocess.Popen] = []
        self._out = open(log_path, "a")

    def start(self, cmd: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen:
        proc = subprocess.Popen(cmd, env=env, stdout=self._out, stderr=subprocess.STDOUT, cwd=cwd,
                                start_new_session=True)
        self.procs.append(proc)
        return proc

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def running(self) -> bool:
        return any(p.poll() is None for p in self.procs)

    def exited(self) -> bool:
        """Has any of them ended?"""
        return any(p.poll() is not None for p in self.procs)

    def exit_codes(self) -> list[int | None]:
        return [p.poll() for p in self.procs]

    def stop(self, grace_seconds: float) -> None:
        """SIGINT to each still running, SIGKILL after the grace time. SIGINT, not SIGTERM: Locust
        installs its SIGTERM handler only after a headless shape run ends, so SIGTERM killed a
        headless run at once (exit -15, no totals written); SIGINT is Ctrl-C, which Locust handles
        in every mode (users stopped, quitting fired, the stores write their totals)."""
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        self.wait(grace_seconds)

    def wait(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while self.running() and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
        self.kill()

    def kill(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()

    def close(self) -> None:
        self.kill()
        self._out.close()
