"""Where a load run writes, and what an earlier load of the same run id left for it to reuse.

More: docs/load-internals.md.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from lab.errors import ConfigError
from lab.load.audit import Ack, AckLog, read_acks
from lab.results.run_folders import new_run_id

LOAD_SUBDIR = "load"
RUN_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}")
STATE_DIR = "load-state"
LOCK_FILE = "lock"
PRIOR_PHASE = "prior"


def check_run_id(run_id: str) -> str:
    if not RUN_ID_PATTERN.fullmatch(run_id or ""):
        raise ConfigError(f"run id {run_id!r}: use letters, digits, '.', '_' or '-' (1-80 characters, "
                          "starting with a letter or digit)", run_id=run_id)
    return run_id


@dataclass(frozen=True, kw_only=True)
class LoadFolder:
    """The folders of one load run (none exists before :func:`create`)."""

    run_dir: Path
    load_dir: Path
    key_base: str                       # the plan's run_id: key ranges and client ids derive from it
    state_root: Path                    # per-worker store state (DEKs): never under results/
    prior_loads: tuple[Path, ...] = ()  # earlier load folders of the same run id
    named: bool = False                 # --run-id given: the state is kept for reuse

    def prior_acks(self, worker_index: int) -> list[Ack]:
        """Every non-replayed ack worker ``worker_index`` received in earlier loads of this run id."""
        out: dict[tuple, Ack] = {}  # each load copies the ones before it: one entry per message
        for load_dir in self.prior_loads:
            path = load_dir / "acks" / f"worker-{worker_index}.csv"
            if path.exists():
                for a in read_acks(path):
                    if not a.replayed:
                        out.setdefault((a.conversation_id, a.conversation_seq, a.message_id), a)
        return list(out.values())

    def seeded(self, worker_index: int) -> bool:
        """Did an earlier load of this run id seed worker ``worker_index`` (and keep its state)?"""
        state = self.state_root / f"worker-{worker_index}"
        return state.is_dir() and any(a.phase in ("seed", PRIOR_PHASE) for a in self.prior_acks(worker_index))


def plan_folder(*, results: Path, lab_home: Path, run_id: str | None = None, run_dir: Path | None = None,
                subdir: str = LOAD_SUBDIR) -> LoadFolder:
    """Where a run will write. ``run_dir`` (benchmarks: several loads in one run folder) wins;
    else ``results/<run_id>/`` (reused when it exists), else a new run id."""
    state_base = Path(lab_home).resolve() / STATE_DIR
    if run_dir is not None:
        run_dir = Path(run_dir).resolve()
        key = f"{run_dir.name}-{subdir}"
        return LoadFolder(run_dir=run_dir, load_dir=run_dir / subdir, key_base=key, state_root=state_base / key)
    if run_id is None:
        run_id = new_run_id()
        run_dir = Path(results).resolve() / run_id
        return LoadFolder(run_dir=run_dir, load_dir=run_dir / subdir, key_base=f"{run_id}-{subdir}",
                          state_root=state_base / f"{run_id}-{subdir}")
    check_run_id(run_id)
    run_dir = Path(results).resolve() / run_id
    prior = tuple(sorted((p for p in run_dir.glob(f"{subdir}*")
                          if re.fullmatch(rf"{re.escape(subdir)}(-\d+)?", p.name) and (p / "acks").is_dir()),
                         key=_load_number))
    n = 1
    while (run_dir / _subdir(subdir, n)).exists():
        n += 1
    return LoadFolder(run_dir=run_dir, load_dir=run_dir / _subdir(subdir, n), key_base=run_id,
                      state_root=state_base / run_id, prior_loads=prior, named=True)


def worker_folder(*, results: Path, lab_home: Path, run_id: str, key_base: str, subdir: str,
                  index: int) -> LoadFolder:
    """A distributed run's worker on its own machine: ``results/<run_id>/<subdir>-worker-<index>/``,
    its state under ``<home>/load-state/<key_base>/``; earlier loads of the run on this machine
    (``*-worker-<index>``) are reused as a local run's are."""
    check_run_id(run_id)
    run_dir = Path(results).resolve() / run_id
    load_dir = run_dir / f"{subdir}-worker-{index}"
    prior = tuple(sorted((p for p in run_dir.glob(f"*-worker-{index}") if p != load_dir and (p / "acks").is_dir()),
                         key=lambda p: p.stat().st_mtime))
    return LoadFolder(run_dir=run_dir, load_dir=load_dir, key_base=key_base,
                      state_root=Path(lab_home).resolve() / STATE_DIR / key_base, prior_loads=prior, named=True)


def states_kept(lab_home: Path, key_base: str) -> list[int]:
    """Worker indexes this machine holds store state for under ``key_base`` (a reused run id)."""
    root = Path(lab_home).resolve() / STATE_DIR / key_base
    return sorted(int(p.name.rpartition("-")[2]) for p in root.glob("worker-*")
                  if p.is_dir() and p.name.rpartition("-")[2].isdigit())


def seeded_indexes(folder: LoadFolder) -> list[int]:
    """Workers an earlier load of this run id seeded (their acks are in its folder)."""
    out = set()
    for load_dir in folder.prior_loads:
        for path in (load_dir / "acks").glob("worker-*.csv"):
            tail = path.stem.rpartition("-")[2]
            if tail.isdigit():
                out.add(int(tail))
    return sorted(out)


def _subdir(base: str, n: int) -> str:
    return base if n == 1 else f"{base}-{n}"


def _load_number(path: Path) -> int:
    tail = path.name.rpartition("-")[2]
    return int(tail) if tail.isdigit() else 1


def create(folder: LoadFolder) -> None:
    """Make the run and load folders (the load folder exclusively: a run never overwrites one)."""
    folder.run_dir.mkdir(parents=True, exist_ok=True)
    folder.load_dir.mkdir()


def copy_prior_acks(folder: LoadFolder, worker_index: int) -> int:
    """Write worker ``worker_index``'s earlier acks into this run's ack log as phase ``prior``."""
    acks = folder.prior_acks(worker_index)
    if not acks:
        return 0
    log = AckLog(folder.load_dir / "acks" / f"worker-{worker_index}.csv")
    for a in acks:
        log.append(Ack(phase=PRIOR_PHASE, tenant_id=a.tenant_id, conversation_id=a.conversation_id,
                       conversation_seq=a.conversation_seq, message_id=a.message_id,
                       client_message_id=a.client_message_id, sender_id=a.sender_id, replayed=False))
    log.close()
    return len(acks)


class StateLock:
    """``<state_root>/lock`` holding this process's PID while a named run uses the state; a lock
    whose process is gone is taken over."""

    def __init__(self, state_root: Path, name: str = LOCK_FILE) -> None:
        self.path = Path(state_root) / name

    def __enter__(self) -> StateLock:
        import psutil

        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            except FileExistsError:
                try:
                    pid = int(self.path.read_text().strip() or 0)
                except (OSError, ValueError):
                    pid = 0
                if pid and pid != os.getpid() and psutil.pid_exists(pid):
                    raise ConfigError(f"run id {self.path.parent.name!r} is in use by process {pid} "
                                      "(one load per run id at a time)", run_id=self.path.parent.name, pid=pid)
                self.path.unlink(missing_ok=True)  # stale: its process ended
                continue
            with os.fdopen(fd, "w") as f:
                f.write(str(os.getpid()))
            return self
        raise ConfigError(f"cannot lock {self.path}", path=str(self.path))

    def __exit__(self, *exc: object) -> None:
        self.path.unlink(missing_ok=True)
