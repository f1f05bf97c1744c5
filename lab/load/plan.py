"""What one load run is, as the runner hands it to each Locust process: plan, key ranges, messages.

More: docs/load-internals.md.
"""
from __future__ import annotations

import dataclasses
import json
import tomllib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.errors import ConfigError
from lab.load.pacing import Stage

LOAD_PROFILES_PATH = Path(__file__).with_name("profiles.toml")
USER_KINDS = ("sender", "history_reader", "backfill_joiner", "reactor", "recall_editor")
SEED_SIZES = ("tiny", "small", "standard")
DEFAULT_INTERVAL_SECONDS = 1.0
DEFAULT_NODE_ID_BASE = 100
_ENV_PREFIX = "LAB_LOAD_"
# `lab load --driver`: how a load process runs store calls -> the plan's native_threads, store_futures
DRIVER_MODES: dict[str, dict[str, bool]] = {
    "futures": {"native_threads": True, "store_futures": True},   # store futures where they exist, else threads
    "threads": {"native_threads": True, "store_futures": False},  # every call in a native thread of the pool
    "gevent": {"native_threads": False, "store_futures": False},  # patched workers, calls on the gevent loop
}
_NAMESPACE = uuid.UUID("6f1c0b8e-2a57-4d2c-9a43-4c1d2f0e7a11")


# ---- profiles --------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class LoadProfile:
    """Which users run and how much (weights), and which message population senders draw from."""

    name: str
    description: str = ""
    content: str = "chat_mix"  # a lab/workload/profiles/<content>.toml workload profile
    weights: Mapping[str, int] = field(default_factory=lambda: {"sender": 1})
    retry_share: float = 0.02  # sends repeated with the same client_message_id (must replay)
    history_pages: tuple[int, ...] = (1, 1, 2, 3)  # pages a reading session reads (one drawn per session)
    history_jump_share: float = 0.1                # sessions that jump back to a message, then read forward

    def __post_init__(self) -> None:
        object.__setattr__(self, "history_pages", tuple(self.history_pages))
        if not self.history_pages or any(not isinstance(n, int) or n < 1 for n in self.history_pages):
            raise ConfigError(f"load profile {self.name}: history_pages must be whole numbers >= 1",
                              profile=self.name)
        if not 0 <= self.history_jump_share <= 1 or not 0 <= self.retry_share <= 1:
            raise ConfigError(f"load profile {self.name}: history_jump_share and retry_share are shares in [0, 1]",
                              profile=self.name)
        unknown = sorted(set(self.weights) - set(USER_KINDS))
        if unknown:
            raise ConfigError(f"load profile {self.name}: unknown user kinds {unknown} (known: {USER_KINDS})",
                              profile=self.name)
        if not any(w > 0 for w in self.weights.values()):
            raise ConfigError(f"load profile {self.name}: no user kind has a positive weight", profile=self.name)


def load_profiles(path: Path = LOAD_PROFILES_PATH) -> dict[str, LoadProfile]:
    data = tomllib.loads(Path(path).read_text())
    out = {}
    for name, body in data.items():
        known = {f.name for f in dataclasses.fields(LoadProfile)} - {"name"}
        unknown = sorted(set(body) - known)
        if unknown:
            raise ConfigError(f"load profile {name}: unknown keys {unknown}", profile=name)
        out[name] = LoadProfile(name=name, **{k: v for k, v in body.items()})
    return out


def load_profile(name: str, path: Path = LOAD_PROFILES_PATH) -> LoadProfile:
    profiles = load_profiles(path)
    if name not in profiles:
        raise ConfigError(f"no load profile {name!r} (known: {', '.join(sorted(profiles))})", profile=name)
    return profiles[name]


# a run's files in its load folder, also read from outside lab.load (lab bench load --profile)
def ready_dir(load_dir: Path) -> Path:
    """Where each worker writes its ready file (its pid), named after the worker."""
    return load_dir / "ready"


def t0_path(load_dir: Path) -> Path:
    """Where the runner publishes t0 (wall-clock seconds) once every worker is ready."""
    return load_dir / "t0"


def published_t0(load_dir: Path) -> float | None:
    """t0 from the start gate, once the runner has published it (None before)."""
    try:
        return float(t0_path(load_dir).read_text())
    except (FileNotFoundError, ValueError):
        return None


# ---- the plan ----------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class LoadPlan:
    """One run's parameters as every load process sees them."""

    run_id: str
    load_dir: Path                  # results/<run-id>/load
    state_root: Path                # per-worker store state (DEKs: never under results/)
    profile: str
    users: int                      # users over all processes
    workers: int = 1
    worker_index: int = 0           # this process (set per process by the runner)
    stages: tuple[Stage, ...] = ()  # empty: closed loop (users call back to back)
    t0: float = 0.0                 # 0: from the start gate (lab load) or the first call (web UI)
    start_gate: bool = False
    warmup_seconds: float = 0.0
    duration_seconds: float = 10.0
    reactor: str | None = None
    native_threads: bool = True     # workers unpatched, store calls in native threads (loadgen/README.md)
    store_futures: bool = True      # native_threads: a call whose store method has an ``_async`` twin waits on its future
    node_id_base: int = DEFAULT_NODE_ID_BASE
    interval_seconds: float = DEFAULT_INTERVAL_SECONDS
    seed_size: str = "standard"
    seed_gate: bool = False         # the runner seeds while Locust starts: open the store once it is seeded

    def __post_init__(self) -> None:
        if self.users < 1 or self.workers < 1 or not 0 <= self.worker_index < self.workers:
            raise ConfigError("need users >= 1, workers >= 1 and 0 <= worker_index < workers")
        if self.seed_size not in SEED_SIZES:
            raise ConfigError(f"seed_size must be one of {SEED_SIZES}", seed_size=self.seed_size)

    @property
    def fixed_rate(self) -> bool:
        return bool(self.stages)

    @property
    def end_seconds(self) -> float:
        """Seconds after t0 when calls stop being issued."""
        return self.warmup_seconds + self.duration_seconds

    @property
    def node_id(self) -> int:
        return self.node_id_base + self.worker_index

    def requested_rate(self, at_seconds: float | None = None) -> float | None:
        """The stage rate at ``at_seconds`` after t0 (None: closed loop or outside the table)."""
        if not self.stages:
            return None
        if at_seconds is None:
            total = sum((s.end_s - s.start_s) * s.rate for s in self.stages)
            return total / (self.stages[-1].end_s - self.stages[0].start_s)
        for s in self.stages:
            if s.start_s <= at_seconds < s.end_s:
                return s.rate
        return None

    def for_worker(self, index: int) -> LoadPlan:
        return dataclasses.replace(self, worker_index=index)

    def worker_name(self) -> str:
        return f"worker-{self.worker_index}"

    def state_dir(self) -> Path:
        return self.state_root / self.worker_name()

    def ready_path(self) -> Path:
        return ready_dir(self.load_dir) / self.worker_name()

    def seeded_path(self) -> Path:
        """Written by the runner once every worker's seed (acks, templates) is on disk (``seed_gate``)."""
        return self.load_dir / "seeded"

    def t0_path(self) -> Path:
        return t0_path(self.load_dir)

    def published_t0(self) -> float | None:
        """t0 from the start gate, once the runner has published it."""
        return published_t0(self.load_dir)

    def stop_path(self) -> Path:
        return self.load_dir / "stop"

    def published_stop(self) -> float | None:
        """When the runner stopped the run early (Ctrl-C, a staircase's loader-bound step): the
        measured window ends there; None while it runs its course."""
        try:
            return float(self.stop_path().read_text())
        except (FileNotFoundError, ValueError):
            return None

    def to_json(self) -> dict[str, Any]:
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, Path):
                v = str(v)
            elif f.name == "stages":
                v = [dataclasses.asdict(s) for s in v]
            out[f.name] = v
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LoadPlan:
        d = dict(data)
        d["load_dir"], d["state_root"] = Path(d["load_dir"]), Path(d["state_root"])
        d["stages"] = tuple(Stage(**s) for s in d.get("stages", ()))
        return cls(**d)

    def to_env(self) -> dict[str, str]:
        return {f"{_ENV_PREFIX}PLAN": json.dumps(self.to_json())}

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> LoadPlan:
        raw = env.get(f"{_ENV_PREFIX}PLAN")
        if not raw:
            raise ConfigError(f"{_ENV_PREFIX}PLAN is not set: start load processes with `lab load` "
                              "(or export a plan for the web UI, see loadgen/README.md)")
        return cls.from_json(json.loads(raw))


# ---- key ranges ----------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class SeedShape:
    """Conversations a worker seeds before the run, so readers have history from the start.

    ``big_group`` serves S-1's first shape (one group, 500 entries); ``dms`` x ``dm_messages``
    its second (20 direct chats x 5); ``chats`` x ``chat_messages`` the history readers."""

    big_group: int
    dms: int
    dm_messages: int
    chats: int
    chat_messages: int

    @property
    def sends(self) -> int:
        return self.big_group + self.dms * self.dm_messages + self.chats * self.chat_messages


SEED_SHAPES = {
    "tiny": SeedShape(big_group=10, dms=4, dm_messages=2, chats=2, chat_messages=5),  # tests
    "small": SeedShape(big_group=60, dms=20, dm_messages=5, chats=4, chat_messages=30),
    "standard": SeedShape(big_group=520, dms=20, dm_messages=6, chats=8, chat_messages=100),
}
S1_GROUP_ENTRIES = 500
S1_DMS = 20
S1_DM_ENTRIES = 5


def _id(*parts: Any) -> uuid.UUID:
    return uuid.uuid5(_NAMESPACE, "/".join(map(str, parts)))


@dataclass(frozen=True)
class KeyRange:
    """The ids worker ``index`` of run ``run_id`` owns. Nothing outside it is ever written."""

    run_id: str
    index: int
    shape: SeedShape

    @property
    def tenant_id(self) -> uuid.UUID:
        return _id(self.run_id, self.index, "tenant")

    @property
    def big_group(self) -> uuid.UUID:
        return _id(self.run_id, self.index, "big-group")

    def dms(self) -> list[uuid.UUID]:
        return [_id(self.run_id, self.index, "dm", i) for i in range(self.shape.dms)]

    def chats(self) -> list[uuid.UUID]:
        return [_id(self.run_id, self.index, "chat", i) for i in range(self.shape.chats)]

    def senders(self, conversation_id: uuid.UUID, n: int = 8) -> list[uuid.UUID]:
        return [_id(conversation_id, "member", i) for i in range(n)]

    def device(self, sender_id: uuid.UUID) -> uuid.UUID:
        return _id(sender_id, "device")

    def client_message_id(self, counter: int, prefix: str = "m") -> str:
        return f"{prefix}-{self.run_id}-{self.index}-{counter}"

    def request(self, template: Any, *, conversation_id: uuid.UUID, sender_id: uuid.UUID,
                client_message_id: str) -> Any:
        """A template's content sent into this range (reply links do not carry over)."""
        return dataclasses.replace(template, tenant_id=self.tenant_id, conversation_id=conversation_id,
                                   sender_id=sender_id, sender_device_id=self.device(sender_id),
                                   client_message_id=client_message_id, reply_to_conversation_seq=None)


def message_templates(content_profile: str, *, n: int = 256, seed: int = 0) -> Sequence[Any]:
    """``n`` send requests with the profile's type / size / media / mention / E2EE / retention mix."""
    from lab.workload import generate, send_requests  # here: pandas stays out of the Locust process

    workload = generate(content_profile, size=n, seed=seed)
    return tuple(send_requests(workload.messages, seed=seed))
