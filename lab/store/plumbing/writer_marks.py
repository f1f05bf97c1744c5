"""Which writers of a state folder did not close: the sign that one crashed.

More: docs/store-internals.md.
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
