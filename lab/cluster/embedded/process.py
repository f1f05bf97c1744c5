"""The processes the lab starts: spawn with a log, find them again by PID, stop only those.

A PID alone is not proof of ownership (the kernel reuses PIDs), so every JVM the lab starts
carries a marker on its command line (``-Dlab.node=<folder>``) and :func:`is_ours` checks it
before any signal is sent. Ports are checked before a start so a clash is explained instead of
surfacing as a JVM that dies half-way through start-up.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from lab.errors import PortInUse

MARKER_PROPERTY = "lab.node"
_PORT_PROBE_TIMEOUT_SECONDS = 1.0
_POLL_SECONDS = 0.1


def marker_flag(directory: Path | str) -> str:
    """The command-line flag :func:`is_ours` looks for."""
    return f"-D{MARKER_PROPERTY}={directory}"


def spawn(cmd: Sequence[str], *, cwd: Path, log: Path) -> subprocess.Popen:
    """Start ``cmd`` in its own session (a Ctrl-C of the lab does not reach it), stdout and
    stderr appended to ``log``."""
    with open(log, "ab") as out:
        return subprocess.Popen(list(cmd), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=cwd, start_new_session=True)


def alive(pid: int) -> bool:
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


def wait_gone(pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        try:
            os.waitpid(pid, os.WNOHANG)  # reap our own child, or it stays a zombie
        except ChildProcessError:
            pass
        time.sleep(_POLL_SECONDS)


def is_ours(pid: int, directory: Path | str) -> bool:
    """True when PID is alive and is the process started for ``directory`` (guards PID reuse)."""
    if not alive(pid):
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read().decode(errors="replace")
    except OSError:
        return False
    return marker_flag(directory) in cmdline


def terminate(pids: Iterable[int], *, timeout: float) -> list[int]:
    """SIGTERM each PID, wait up to ``timeout`` for all, then SIGKILL the ones left.
    Returns the PIDs that were signalled (the others had exited already)."""
    signalled = []
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        signalled.append(pid)
    deadline = time.monotonic() + timeout
    for pid in signalled:
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(_POLL_SECONDS * 2)
        if alive(pid):
            kill(pid)
    return signalled


def kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    wait_gone(pid, 10.0)


_DEFAULT_PORT_HINT = ("another Cassandra/Scylla may be running: stop it, or point the lab at it with "
                      "--contact-points")


def check_port_free(address: str, port: int, what: str, *, hint: str = _DEFAULT_PORT_HINT) -> None:
    """Refuse to start a server whose port is taken; ``hint`` says what to do about it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address, port))
        except OSError as exc:
            raise PortInUse(f"{what} port {address}:{port} is already in use ({exc.strerror}); {hint}",
                            address=address, port=port) from exc


def port_open(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=_PORT_PROBE_TIMEOUT_SECONDS):
            return True
    except OSError:
        return False


def log_has(path: Path, needle: str) -> bool:
    try:
        return needle in path.read_text(errors="replace")
    except OSError:
        return False


def tail(paths: Iterable[Path], lines: int) -> str:
    """The last ``lines`` lines of each existing file, one after the other."""
    texts = []
    for path in paths:
        if path.exists():
            texts.append("\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
    return "\n".join(texts)
