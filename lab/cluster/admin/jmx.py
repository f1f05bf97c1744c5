"""A persistent JMX client for a Cassandra node: flush, compact and table metrics in milliseconds.

More: docs/cluster-internals.md.
"""
from __future__ import annotations

import hashlib
import json
import selectors
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from lab.errors import AdminError

SOURCE_PATH = Path(__file__).with_name("JmxShell.java")
START_TIMEOUT_SECONDS = 60.0
REQUEST_TIMEOUT_SECONDS = 900.0  # a major compaction of a big table can take minutes


def compile_shell(work_dir: Path, *, javac: str | None = None) -> Path:
    """Compile the helper once per source version; returns the class folder."""
    source = SOURCE_PATH.read_bytes()
    out = Path(work_dir) / hashlib.sha256(source).hexdigest()[:12]
    if (out / "JmxShell.class").exists():
        return out
    javac = javac or shutil.which("javac")
    if javac is None:
        raise AdminError("javac is not on PATH: cannot build the JMX helper (a JDK 17 is required)")
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f".build-{threading.get_ident()}"
    tmp.mkdir(exist_ok=True)
    proc = subprocess.run([javac, "-d", str(tmp), str(SOURCE_PATH)], capture_output=True, text=True,
                          timeout=300)
    if proc.returncode != 0:
        raise AdminError(f"javac JmxShell.java failed: {proc.stderr[-1500:]}")
    (tmp / "JmxShell.class").replace(out / "JmxShell.class")  # atomic: concurrent builders agree
    shutil.rmtree(tmp, ignore_errors=True)
    return out


class JmxShell:
    """One helper process bound to one node's JMX endpoint. Thread-safe; one request at a time."""

    def __init__(self, host: str, port: int, *, work_dir: Path, java: str = "java") -> None:
        self.host, self.port = host, int(port)
        classes = compile_shell(work_dir)
        self._lock = threading.Lock()
        self._proc = subprocess.Popen(
            [java, "-Xmx64m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", str(classes), "JmxShell",
             host, str(self.port)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._proc.stdout, selectors.EVENT_READ)
        hello = self._read(START_TIMEOUT_SECONDS)
        if not hello.get("ok"):
            self.close()
            raise AdminError(f"JMX helper for {host}:{port}: {hello.get('error')}", host=host, port=port)

    def __repr__(self) -> str:
        return f"JmxShell({self.host}:{self.port}, pid={self._proc.pid})"

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None

    def _read(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AdminError(f"JMX helper for {self.host}:{self.port} did not answer in {timeout:.0f} s")
            if self._sel.select(left):
                line = self._proc.stdout.readline()
                if not line:
                    raise AdminError(f"JMX helper for {self.host}:{self.port} exited "
                                     f"(code {self._proc.poll()})")
                return json.loads(line)

    def request(self, *fields: str, timeout: float = REQUEST_TIMEOUT_SECONDS) -> dict[str, Any]:
        with self._lock:
            if not self.alive:
                raise AdminError(f"JMX helper for {self.host}:{self.port} is not running")
            self._proc.stdin.write("\t".join(fields) + "\n")
            self._proc.stdin.flush()
            reply = self._read(timeout)
        if not reply.pop("ok", False):
            raise AdminError(f"JMX {fields[0]} {' '.join(fields[1:])}: {reply.get('error')}",
                             command=list(fields))
        return reply

    def flush(self, keyspace: str, tables: tuple[str, ...] = ()) -> None:
        self.request("flush", keyspace, ",".join(tables))

    def compact(self, keyspace: str, tables: tuple[str, ...] = ()) -> None:
        self.request("compact", keyspace, ",".join(tables))

    def nudge(self, keyspace: str, tables: tuple[str, ...] = ()) -> None:
        """Ask for a background compaction check now (the node polls for one once a minute)."""
        self.request("nudge", keyspace, ",".join(tables))

    def stats(self, keyspace: str, table: str) -> dict[str, Any]:
        return self.request("stats", keyspace, table)

    def compactions(self, keyspace: str | None = None) -> dict[str, int]:
        """{"pending": estimated compactions left, "active": compactions running now}, on the
        whole node or in ``keyspace`` only."""
        return {k: int(v) for k, v in self.request("compactions", keyspace or "").items()}

    def twcs(self, keyspace: str, table: str) -> dict[str, Any]:
        """{"live", "pending", "active", "buckets"}: the table's live SSTables, its strategy's task
        estimate and SSTables per window (newest first; None: not TWCS) as of its last background
        check, and its compactions running now."""
        reply = self.request("twcs", keyspace, table)
        return {"live": int(reply["live"]), "pending": int(reply["pending"]), "active": int(reply["active"]),
                "buckets": None if reply["buckets"] is None else tuple(int(b) for b in reply["buckets"])}

    def process_cpu_ns(self) -> int:
        """The server JVM's CPU time (``java.lang:type=OperatingSystem`` ProcessCpuTime), ns."""
        return int(self.request("cpu")["process_cpu_ns"])

    def guardrail_threshold(self, guardrail: str, *, warn: int | None = None,
                            fail: int | None = None) -> tuple[int, int]:
        """A Cassandra guardrail's (warn, fail) thresholds, -1 when off (``GuardrailsMBean``;
        ``guardrail`` as the MBean spells it: ``PartitionKeysInSelect``), set first when
        ``warn`` and ``fail`` are given. Live: no restart, not persisted across one."""
        fields = ("threshold", guardrail) if warn is None or fail is None else (
            "threshold", guardrail, str(int(warn)), str(int(fail)))
        reply = self.request(*fields)
        return int(reply["warn"]), int(reply["fail"])

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                self._proc.stdin.close()
                self._proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()  # our own child, by its handle
                self._proc.wait()
        self._sel.close()
