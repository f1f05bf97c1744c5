"""The lab's side channel of a distributed load run: plan out, start gate, results back.

More: docs/load-internals.md.
"""
from __future__ import annotations

import json
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from lab.errors import CoordinatorError
from lab.measure.timing import wall_seconds

PORT_OFFSET = 1
REQUEST_TIMEOUT_SECONDS = 30.0
_FILE_NAME = re.compile(r"(totals/worker-\d+\.json|hdr/worker-\d+\.hlog|acks/worker-\d+\.csv|"
                        r"locust-worker-\d+\.log|cpu-worker-\d+\.csv)")


class Coordinator:
    """The master's side: hands out worker indexes and the plan, gates the start, collects results."""

    def __init__(self, *, plan: dict[str, Any], expected: int, load_dir: Path, host: str, port: int,
                 keyspace: str, locust_port: int, lab_version: str | None = None,
                 seeded_before: tuple[int, ...] = ()) -> None:
        self.plan, self.expected, self.load_dir = plan, expected, Path(load_dir)
        self.seeded_before = set(seeded_before)  # indexes whose keys live on the machine that seeded them
        self.keyspace, self.locust_port, self.lab_version = keyspace, locust_port, lab_version
        self.workers: dict[int, dict[str, Any]] = {}
        self.t0: float | None = None
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        handler = type("Handler", (_Handler,), {"coordinator": self})
        self.server = ThreadingHTTPServer((host, port), handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, name="lab-coordinator", daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        return self.server.server_address[:2]

    def start(self) -> Coordinator:
        self._thread.start()
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # ---- what the master's runner waits on ----------------------------------------------
    def count(self, key: str) -> int:
        with self.lock:
            return sum(1 for w in self.workers.values() if w.get(key))

    def wait_for(self, key: str, n: int, timeout_seconds: float, alive: Any = None) -> bool:
        """Until ``n`` workers have ``key`` (joined / ready / done); False on timeout or when ``alive()`` fails."""
        deadline = time.monotonic() + timeout_seconds
        with self.changed:
            while sum(1 for w in self.workers.values() if w.get(key)) < n:
                left = deadline - time.monotonic()
                if left <= 0 or (alive is not None and not alive()):
                    return False
                self.changed.wait(min(left, 0.5))
        return True

    def publish_t0(self, t0: float) -> None:
        with self.changed:
            self.t0 = t0
            self.changed.notify_all()

    # ---- requests --------------------------------------------------------------------------
    def join(self, body: dict[str, Any], address: str) -> tuple[int, dict[str, Any]]:
        with self.changed:
            free = [i for i in range(self.expected) if i not in self.workers]
            if not free:
                return 409, {"error": f"the master expects {self.expected} worker(s) and all have joined"}
            kept = [i for i in body.get("state_for", ()) if i in free]  # a reused run id: the machine's own keys
            fresh = [i for i in free if i not in self.seeded_before]
            if not kept and not fresh:
                return 409, {"error": f"worker(s) {', '.join(map(str, free))} of this run id were seeded on other "
                                      "machines (their keys are there): start this worker there, or use a new run id"}
            index = kept[0] if kept else fresh[0]
            self.workers[index] = {"joined": True, "host": body.get("host"), "address": address,
                                   "lab_version": body.get("lab_version"), "joined_at": wall_seconds()}
            self.changed.notify_all()
        return 200, {"index": index, "plan": self.plan, "keyspace": self.keyspace, "locust_port": self.locust_port,
                     "lab_version": self.lab_version, "master_time": wall_seconds()}

    def update(self, key: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        index = body.get("index")
        with self.changed:
            if index not in self.workers:
                return 404, {"error": f"no worker {index} joined"}
            self.workers[index].update(body, **{key: True})
            self.changed.notify_all()
        return 200, {"ok": True}

    def put_file(self, index: int, name: str, data: bytes) -> tuple[int, dict[str, Any]]:
        if index not in self.workers or not _FILE_NAME.fullmatch(name) or f"worker-{index}." not in name:
            return 400, {"error": f"not a file worker {index} writes: {name}"}
        path = self.load_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".part")
        tmp.write_bytes(data)
        tmp.replace(path)
        return 200, {"ok": True, "bytes": len(data)}


class _Handler(BaseHTTPRequestHandler):
    coordinator: Coordinator

    def log_message(self, *_args: Any) -> None:  # the runner reports; no access log on stderr
        pass

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_GET(self) -> None:
        if self.path == "/hello":
            self._reply(200, {"run_id": Path(self.coordinator.load_dir).parent.name,
                              "key_base": self.coordinator.plan["run_id"]})
        elif self.path == "/t0":
            self._reply(200, {"t0": self.coordinator.t0, "master_time": wall_seconds()})
        else:
            self._reply(404, {"error": self.path})

    def do_POST(self) -> None:
        c = self.coordinator
        try:
            body = json.loads(self._body() or b"{}")
        except json.JSONDecodeError:
            self._reply(400, {"error": "not JSON"})
            return
        if self.path == "/join":
            self._reply(*c.join(body, self.client_address[0]))
        elif self.path in ("/ready", "/done"):
            self._reply(*c.update(self.path[1:], body))
        else:
            self._reply(404, {"error": self.path})

    def do_PUT(self) -> None:
        parts = self.path.split("/", 3)  # "", "files", index, name
        if len(parts) != 4 or parts[1] != "files" or not parts[2].isdigit():
            self._reply(404, {"error": self.path})
            return
        self._reply(*self.coordinator.put_file(int(parts[2]), parts[3], self._body()))


class CoordinatorClient:
    """A worker's side: join, report ready, wait for t0 (corrected for the clock offset), send results."""

    def __init__(self, host: str, port: int) -> None:
        self.base = f"http://{host}:{port}"
        self.offset_seconds: float | None = None  # master clock - this clock, from the fastest /t0 round trip
        self.rtt_seconds: float | None = None

    def _call(self, method: str, path: str, body: bytes | None = None, *,
              content_type: str = "application/json") -> dict[str, Any]:
        request = urllib.request.Request(self.base + path, data=body, method=method,
                                         headers={"Content-Type": content_type})
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_SECONDS) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as exc:
            try:
                text = json.loads(exc.read()).get("error", str(exc))
            except (ValueError, AttributeError):
                text = str(exc)
            raise CoordinatorError(f"the master at {self.base} refused {path}: {text}", status=exc.code) from exc
        except (urllib.error.URLError, OSError) as exc:
            raise CoordinatorError(f"cannot reach the master's coordinator at {self.base}: "
                                   f"{getattr(exc, 'reason', exc)} (is `lab load --master` running there, "
                                   f"and this port open?)", url=self.base) from exc

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", path, json.dumps(body).encode())

    def join(self, *, state_for: Any, lab_version: str | None, retry_seconds: float) -> dict[str, Any]:
        """Join, retrying while the master is not up yet. ``state_for(key_base)``: the worker
        indexes this machine keeps store state for."""
        deadline = time.monotonic() + retry_seconds
        while True:
            try:
                hello = self._call("GET", "/hello")
                return self.post("/join", {"host": socket.gethostname(), "state_for": state_for(hello["key_base"]),
                                           "lab_version": lab_version})
            except CoordinatorError as exc:
                if exc.facts.get("status") is not None or time.monotonic() > deadline:
                    raise
                time.sleep(1.0)

    def wait_t0(self, timeout_seconds: float, alive: Any = None) -> float:
        """The master's t0 converted to this machine's clock."""
        deadline = time.monotonic() + timeout_seconds
        while time.monotonic() < deadline:
            sent = wall_seconds()
            answer = self._call("GET", "/t0")
            received = wall_seconds()
            rtt = received - sent
            if self.rtt_seconds is None or rtt < self.rtt_seconds:
                self.rtt_seconds = rtt
                self.offset_seconds = answer["master_time"] - (sent + received) / 2
            if answer["t0"] is not None:
                return answer["t0"] - (self.offset_seconds or 0.0)
            if alive is not None and not alive():
                raise CoordinatorError("the local Locust worker exited before the start")
            time.sleep(0.1)
        raise CoordinatorError(f"no start from the master in {timeout_seconds:.0f} s")

    def put_file(self, index: int, name: str, path: Path) -> None:
        if path.exists():
            self._call("PUT", f"/files/{index}/{name}", path.read_bytes(), content_type="application/octet-stream")
