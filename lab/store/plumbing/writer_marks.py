"""Which writers of a state folder did not close: the sign that one crashed.

Every open store leaves a mark in ``<state_dir>/writers/``: a file named after its process (pid
and that process's start time, so a reused pid is not mistaken for it) and a random token. A
store that closes removes its own mark. A mark whose process no longer runs is a writer that
died without closing (killed, crashed, its machine rebooted): whatever it had only in memory,
its queued head updates above all, is gone, and the next store opened on the folder runs
``recover()`` before serving (lab.store.write.recovery), then removes those marks.

Marks are local files because the state folder is (the SQLite outbox, the seq reservations, the
key store live there). A writer on another machine is not seen here; recovery of its
conversations is ``recover()`` run by whoever takes them over.
"""
from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

__all__ = ["WRITERS_DIR", "WriterMark"]

WRITERS_DIR = "writers"
_PROC = Path("/proc")


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), or None when unknown."""
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22; the command name may contain spaces


def _alive(pid: int, started: str) -> bool:
    if started != "0" and _PROC.is_dir():
        return _start_time(pid) == started
    try:  # no start time known: the pid alone
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True, kw_only=True)
class WriterMark:
    path: Path

    @classmethod
    def claim(cls, state_dir: Path) -> tuple[WriterMark, list[Path]]:
        """Leave this writer's mark; returns it and the marks of writers that died unclosed."""
        folder = Path(state_dir) / WRITERS_DIR
        folder.mkdir(parents=True, exist_ok=True)
        pid = os.getpid()
        mark = folder / f"{pid}-{_start_time(pid) or 0}-{secrets.token_hex(4)}"
        mark.touch()
        dead = []
        for other in folder.iterdir():
            parts = other.name.split("-")
            if other == mark or len(parts) != 3 or not parts[0].isdigit():
                continue
            if not _alive(int(parts[0]), parts[1]):
                dead.append(other)
        return cls(path=mark), dead

    def release(self) -> None:
        """This writer closed: nothing of it is left to recover."""
        self.path.unlink(missing_ok=True)

    @staticmethod
    def clear(dead: list[Path]) -> None:
        """Forget dead writers' marks once a recovery has run after them."""
        for mark in dead:
            mark.unlink(missing_ok=True)
