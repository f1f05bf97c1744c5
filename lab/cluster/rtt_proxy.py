"""An emulated network between this client and the node: Shopify's toxiproxy in front of the
CQL port, a latency toxic per direction, and the driver's endpoints pinned to the proxy.

More: docs/cluster-internals.md (rtt_proxy); figures in docs/measurements.md.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import weakref
from pathlib import Path
from typing import Any

import psutil
from cassandra.connection import DefaultEndPoint, EndPointFactory

from lab.errors import ConfigError, RttProxyError
from lab.project import PROJECT_DIR

TOXIPROXY_PACKAGE = "github.com/Shopify/toxiproxy/v2/cmd/server"
TOXIPROXY_VERSION = "v2.12.0"
DEFAULT_BUILD_DIR = PROJECT_DIR / "build" / "toxiproxy"
LISTEN_HOST = "127.0.0.1"
LATENCY_STEP_US = 1000          # toxiproxy's latency toxic takes whole milliseconds per direction
_PROXY_NAME = "cql"
_API_TIMEOUT_SECONDS = 5.0
_START_TIMEOUT_SECONDS = 15.0
_STOP_TIMEOUT_SECONDS = 5.0
_BUILD_TIMEOUT_SECONDS = 900.0
_START_ATTEMPTS = 3             # the API port is chosen free, then bound by the server: a race


def split_rtt(rtt_us: int) -> tuple[int, int]:
    """(upstream ms, downstream ms) whose sum is the round trip ``rtt_us``: toxiproxy delays
    each direction on its own, in whole milliseconds, so an odd number of ms puts the extra
    one on the response."""
    if rtt_us < 0 or rtt_us % LATENCY_STEP_US:
        raise ConfigError(f"a round trip of {rtt_us} us cannot be emulated: toxiproxy adds latency in whole "
                          f"milliseconds (use 0, 1ms, 2ms, ...)", field="rtt_us", rtt_us=rtt_us)
    rtt_ms = rtt_us // LATENCY_STEP_US
    return rtt_ms // 2, rtt_ms - rtt_ms // 2


def toxiproxy_binary(build_dir: Path = DEFAULT_BUILD_DIR) -> Path:
    """The toxiproxy server, built with ``go install`` on first use into ``build_dir`` (a
    lock keeps concurrent first uses to one build) and reused after."""
    build_dir = Path(build_dir)
    binary = build_dir / f"toxiproxy-server-{TOXIPROXY_VERSION}"
    if binary.is_file():
        return binary
    go = shutil.which("go")
    if go is None:
        raise RttProxyError("an emulated round trip needs toxiproxy, built with Go: no `go` on PATH "
                            "(install Go 1.22+ or drop --rtt)", binary=str(binary))
    build_dir.mkdir(parents=True, exist_ok=True)
    with open(build_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.is_file():  # built by whoever held the lock before us
            return binary
        with tempfile.TemporaryDirectory(dir=build_dir) as gobin:
            cmd = [go, "install", f"{TOXIPROXY_PACKAGE}@{TOXIPROXY_VERSION}"]
            try:
                done = subprocess.run(cmd, env={**os.environ, "GOBIN": gobin}, capture_output=True, text=True,
                                      timeout=_BUILD_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                raise RttProxyError(f"`{' '.join(cmd)}` took over {_BUILD_TIMEOUT_SECONDS:.0f} s") from None
            if done.returncode != 0:
                raise RttProxyError(f"`{' '.join(cmd)}` failed: {done.stderr.strip()[-800:]}",
                                    returncode=done.returncode)
            os.replace(Path(gobin) / "server", binary)
    return binary


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((LISTEN_HOST, 0))
        return s.getsockname()[1]


class RttProxy:
    """One toxiproxy server this process started (stopped by its own handle, never by name)
    with one proxy ``listen_host:listen_port`` -> the node's CQL port."""

    def __init__(self, *, process: subprocess.Popen, log: Any, api_port: int, upstream: str,
                 listen_host: str, listen_port: int, rtt_us: int) -> None:
        self._process = process
        self._log = log
        self.api_port = api_port
        self.upstream = upstream
        self.listen_host = listen_host
        self.listen_port = listen_port
        self.rtt_us = rtt_us
        # stopped with this object or at the interpreter's exit, should its owner never close it
        self._finalizer = weakref.finalize(self, _stop_process, process, log)

    @property
    def pid(self) -> int:
        return self._process.pid

    @classmethod
    def start(cls, *, upstream_host: str, upstream_port: int, rtt_us: int,
              build_dir: Path = DEFAULT_BUILD_DIR) -> RttProxy:
        """Start a server, create the proxy and its latency toxics: the added round trip is ``rtt_us``."""
        upstream_ms, downstream_ms = split_rtt(rtt_us)
        binary = toxiproxy_binary(build_dir)
        for attempt in range(_START_ATTEMPTS):
            proxy = cls._spawn(binary, upstream=f"{upstream_host}:{upstream_port}", rtt_us=rtt_us,
                               last=attempt == _START_ATTEMPTS - 1)
            if proxy is not None:
                break
        try:
            for stream, ms in (("upstream", upstream_ms), ("downstream", downstream_ms)):
                if ms:
                    proxy._api("POST", f"/proxies/{_PROXY_NAME}/toxics",
                               {"name": f"rtt_{stream}", "type": "latency", "stream": stream, "toxicity": 1.0,
                                "attributes": {"latency": ms, "jitter": 0}})
        except BaseException:
            proxy.stop()
            raise
        return proxy

    @classmethod
    def _spawn(cls, binary: Path, *, upstream: str, rtt_us: int, last: bool) -> RttProxy | None:
        api_port = _free_port()
        log = tempfile.TemporaryFile()
        process = subprocess.Popen([str(binary), "-host", LISTEN_HOST, "-port", str(api_port)],
                                   stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
        proxy = cls(process=process, log=log, api_port=api_port, upstream=upstream, listen_host=LISTEN_HOST,
                    listen_port=0, rtt_us=rtt_us)
        deadline = time.monotonic() + _START_TIMEOUT_SECONDS
        while True:
            if process.poll() is not None:
                output = proxy._output()
                proxy.stop()
                if not last and "address already in use" in output:
                    return None
                raise RttProxyError(f"toxiproxy exited at start (code {process.returncode}): {output[-800:]}",
                                    binary=str(binary))
            with contextlib.suppress(RttProxyError):
                proxy._api("GET", "/version")
                break
            if time.monotonic() > deadline:
                proxy.stop()
                raise RttProxyError(f"toxiproxy's API did not answer on {LISTEN_HOST}:{api_port} within "
                                    f"{_START_TIMEOUT_SECONDS:.0f} s", binary=str(binary))
            time.sleep(0.05)
        try:
            made = proxy._api("POST", "/proxies", {"name": _PROXY_NAME, "listen": f"{LISTEN_HOST}:0",
                                                   "upstream": upstream, "enabled": True})
        except BaseException:
            proxy.stop()
            raise
        proxy.listen_port = int(str(made["listen"]).rpartition(":")[2])
        return proxy

    def _api(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"http://{LISTEN_HOST}:{self.api_port}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=_API_TIMEOUT_SECONDS) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as exc:
            raise RttProxyError(f"toxiproxy {method} {path}: HTTP {exc.code} {exc.read().decode()[:300]}",
                                path=path, status=exc.code) from None
        except (OSError, urllib.error.URLError) as exc:
            raise RttProxyError(f"toxiproxy {method} {path}: {exc}", path=path) from None
        return json.loads(text) if text.strip().startswith(("{", "[")) else text

    def toxics(self) -> list[dict[str, Any]]:
        """The toxics toxiproxy reports on the proxy (what it really applies)."""
        return list(self._api("GET", f"/proxies/{_PROXY_NAME}/toxics"))

    def cpu_seconds(self) -> float:
        """User + system CPU the proxy process has used so far."""
        try:
            times = psutil.Process(self.pid).cpu_times()
        except psutil.Error as exc:
            raise RttProxyError(f"toxiproxy (pid {self.pid}) is gone: {exc}", pid=self.pid) from None
        return times.user + times.system

    def _output(self) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace").strip()

    def stop(self) -> None:
        """Stop the server this object started (its own process handle) and wait for it."""
        self._finalizer()

    def __enter__(self) -> RttProxy:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _stop_process(process: subprocess.Popen, log: Any) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(_STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(_STOP_TIMEOUT_SECONDS)
    log.close()


class ProxyEndPointFactory(EndPointFactory):
    """Every node the driver learns from system.local / system.peers becomes the proxy's
    address and port (an AddressTranslator alone keeps the port the rows carry: the node's own);
    the node addresses seen are kept so a second node is refused, not folded into one."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.nodes_seen: set[str] = set()

    def create(self, row: dict[str, Any]) -> DefaultEndPoint:
        address = row.get("rpc_address") or row.get("native_address") or row.get("broadcast_address") \
            or row.get("peer")
        self.nodes_seen.add(str(address))
        return DefaultEndPoint(self.host, self.port)
