"""``lab load``: run the Locust users headless against the configured cluster, then audit.

Locust runs as separate processes (importing locust monkey-patches the whole process with
gevent, which must never happen to the caller: pytest, a notebook, the CLI). One process,
or with ``processes > 1`` a Locust master plus that many workers on loopback (separate
processes, not Locust's fork), each worker with its own key range (``lab.load.plan.KeyRange``)
and store state. By default the workers are started unpatched (``LOCUST_SKIP_MONKEY_PATCH``)
and run each store call in a native thread (``native_threads``; measured in loadgen/README.md).

Sequence of a run:
  1. schema (idempotent) and a seed per worker (``lab.load.seed``): a big group, 20 DMs and
     some chats, sent through the store from this process so readers have history from the
     first second;
  2. Locust starts; every process anchors at the same wall-clock ``t0`` (a few seconds
     ahead, for start-up); warmup calls are not measured; no call starts after the end;
  3. while it runs: the load processes' CPU (psutil) once a second;
  4. after: per-operation totals merged over the workers, HDR interval logs per step,
     achieved vs requested rate, Locust's own CSV/JSON (``lab.load.summary``), then the audit
     (``lab.load.audit``).

Everything lands in ``results/<run-id>/load/``; ``summary.json`` is the machine-readable
result. The cluster settings reach the Locust processes as ``LAB_*`` variables (never on
a command line); results hold only ``ClusterConfig.redacted()``.
"""
from __future__ import annotations

import dataclasses
import math
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from lab.cluster.config import ClusterConfig
from lab.errors import LabError
from lab.load.audit import AuditResult, audit_worker, read_acks
from lab.load.cpu import CpuMonitor
from lab.load.pacing import Stage, stages_from_steps, staircase
from lab.load.plan import LoadPlan, load_profile
from lab.load.seed import seed_worker
from lab.load.summary import LoadSummary, summarize_run
from lab.measure import Stopwatch
from lab.measure.clock import wall_seconds
from lab.project import RESULTS_DIR
from lab.results.environment import environment
from lab.results.jsonio import jsonable, write_json
from lab.results.runs import new_run_dir

LOCUSTFILE = Path(__file__).with_name("locust") / "locustfile.py"
SUMMARY_FILE = "summary.json"
DEFAULT_STARTUP_SECONDS = 120.0  # longest wait for every Locust process to report ready
START_LEAD_SECONDS = 1.0         # t0 is published this far ahead so every process sees it in time
DEFAULT_STOP_TIMEOUT_SECONDS = 30
PER_USER_RATE = 1.0          # calls/s per user when --users is not given: room for 1 s latencies
POLL_SECONDS = 0.5
START_GATE_POLL_SECONDS = 0.1
_KILL_GRACE_SECONDS = 90.0


class LoadError(LabError):
    """The load run could not start or its processes failed."""


@dataclass(frozen=True, kw_only=True)
class LoadOptions:
    profile: str = "chat"
    rate: float | None = None            # total calls/s: fixed-rate (open loop) mode
    users: int | None = None             # closed loop when rate is None; default PER_USER_RATE share
    duration_seconds: float = 60.0
    warmup_seconds: float = 0.0
    processes: int = 1
    staircase_max: float | None = None   # steps at 50/75/90/105% of this rate
    step_seconds: float = 20.0
    seed_size: str = "standard"
    reactor: str | None = None           # driver reactor in the Locust processes (lab.reactors)
    native_threads: bool = True          # workers not gevent-patched; store calls in native threads
    node_id_base: int = 100
    interval_seconds: float = 1.0
    startup_seconds: float = DEFAULT_STARTUP_SECONDS
    stop_timeout_seconds: int = DEFAULT_STOP_TIMEOUT_SECONDS
    audit: bool = True
    results: Path = RESULTS_DIR
    run_dir: Path | None = None          # write into this run's folder (benchmarks)
    load_subdir: str = "load"

    def stages(self) -> tuple[Stage, ...]:
        if self.staircase_max is not None:
            return staircase(self.staircase_max, step_seconds=self.step_seconds, warmup_seconds=self.warmup_seconds)
        if self.rate is not None:
            return stages_from_steps([(self.warmup_seconds + self.duration_seconds, self.rate)])
        return ()

    def user_count(self) -> int:
        if self.users is not None:
            return self.users
        stages = self.stages()
        if not stages:
            raise LoadError("give --rate R (fixed rate) or --users N (closed loop)")
        top = max(s.rate for s in stages)
        return max(8 * self.processes, min(5000, math.ceil(top / PER_USER_RATE)))


@dataclass(frozen=True, kw_only=True)
class LoadResult:
    run_dir: Path
    load_dir: Path
    summary: LoadSummary
    state_root: Path | None = None  # the workers' store state (DEKs): delete it with the keyspace

    @property
    def summary_path(self) -> Path:
        return self.load_dir / SUMMARY_FILE

    @property
    def audit(self) -> AuditResult | None:
        return self.summary.audit


# ---- environment for the Locust processes ---------------------------------------------------
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


def _child_env(config: ClusterConfig, plan: LoadPlan, worker_index: int | None = None,
               role: str = "standalone") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAB_")}
    env.update(config_env(config))
    env.update(plan.to_env())
    env["LAB_LOAD_ROLE"] = role
    if plan.native_threads and role != "master":  # the master holds no store and needs the patch
        env["LOCUST_SKIP_MONKEY_PATCH"] = "1"
    if worker_index is not None:
        env["LAB_LOAD_WORKER_INDEX"] = str(worker_index)
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- the run -----------------------------------------------------------------------------------
def _locust_cmd(plan: LoadPlan, load_dir: Path, options: LoadOptions, role: str, port: int | None,
                index: int | None = None) -> list[str]:
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--loglevel", "INFO"]
    if role == "worker":
        return cmd + ["--worker", "--master-host", "127.0.0.1", "--master-port", str(port),
                      "--logfile", str(load_dir / f"locust-worker-{index}.log")]
    cmd += ["--headless", "--only-summary", "-u", str(plan.users), "-r", str(plan.users),
            "--csv", str(load_dir / "locust"), "--csv-full-history", "--json-file", str(load_dir / "locust"),
            "--stop-timeout", str(options.stop_timeout_seconds), "--logfile", str(load_dir / "locust.log")]
    if role == "master":
        cmd += ["--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
                "--expect-workers", str(plan.workers)]
    return cmd


def run_load(config: ClusterConfig, options: LoadOptions) -> LoadResult:
    """Seed, run Locust headless, collect, audit. Returns the summary (also in summary.json)."""
    from lab.cluster.connection import connect
    from lab.store import MessageStore

    load_profile(options.profile)  # fail before anything starts on an unknown profile
    run_dir = Path(options.run_dir) if options.run_dir else new_run_dir(Path(options.results))
    load_dir = (run_dir / options.load_subdir).resolve()
    load_dir.mkdir(parents=True, exist_ok=False)
    state_root = (Path(config.lab_home) / "load-state" / f"{run_dir.name}-{options.load_subdir}").resolve()
    plan = LoadPlan(run_id=f"{run_dir.name}-{options.load_subdir}", load_dir=load_dir, state_root=state_root,
                    profile=options.profile, users=options.user_count(), workers=options.processes,
                    stages=options.stages(), warmup_seconds=options.warmup_seconds,
                    duration_seconds=(sum(s.end_s - s.start_s for s in options.stages()) - options.warmup_seconds
                                      if options.staircase_max is not None else options.duration_seconds),
                    reactor=options.reactor, native_threads=options.native_threads,
                    node_id_base=options.node_id_base,
                    interval_seconds=options.interval_seconds, seed_size=options.seed_size, start_gate=True)

    with connect(config) as conn:
        with MessageStore.open(config, state_dir=state_root / "setup", node_id=options.node_id_base - 1,
                               connection=conn) as store:
            store.create_schema()
            # the workers open their stores the same way
            env = environment(config, conn, outbox=store.services.describe()).to_json()
    seeding = Stopwatch()
    seeded = [seed_worker(config, plan.for_worker(i)) for i in range(plan.workers)]

    parameters = {"options": jsonable(dataclasses.asdict(options)), "plan": plan.to_json(), "environment": env,
                  "locustfile": str(LOCUSTFILE), "seed_sends_per_worker": seeded,
                  "seed_seconds": seeding.seconds(1)}
    write_json(load_dir / "parameters.json", parameters)

    procs: list[subprocess.Popen] = []
    port = _free_port() if plan.workers > 1 else None
    role = "master" if plan.workers > 1 else "standalone"
    with open(load_dir / "locust.stdout.txt", "w") as out:
        procs.append(subprocess.Popen(_locust_cmd(plan, load_dir, options, role, port),
                                      env=_child_env(config, plan, role=role),
                                      stdout=out, stderr=subprocess.STDOUT, cwd=load_dir))
        for i in range(plan.workers if plan.workers > 1 else 0):
            procs.append(subprocess.Popen(_locust_cmd(plan, load_dir, options, "worker", port, i),
                                          env=_child_env(config, plan, i, role="worker"), stdout=out, stderr=subprocess.STDOUT,
                                          cwd=load_dir))
        try:
            t0 = _open_start_gate(plan, procs, options.startup_seconds)
            plan = dataclasses.replace(plan, t0=t0)
            cpu = CpuMonitor([p.pid for p in procs], load_dir / "cpu.csv", t0)
            cpu.start()
            deadline = t0 + plan.end_seconds + options.stop_timeout_seconds + _KILL_GRACE_SECONDS
            while any(p.poll() is None for p in procs):
                if wall_seconds() > deadline:  # a frozen load generator is a result, not a hang
                    for p in procs:
                        if p.poll() is None:
                            p.kill()
                time.sleep(POLL_SECONDS)
        finally:
            for p in procs:  # only our own processes, by handle
                if p.poll() is None:
                    p.kill()
            if "cpu" in locals():
                cpu.stop()
    summary = summarize_run(plan, load_dir, cpu=cpu, exit_codes=[p.returncode for p in procs],
                            parameters={k: parameters[k] for k in ("options", "environment", "seed_sends_per_worker",
                                                                   "seed_seconds")})
    if options.audit:
        summary = dataclasses.replace(summary, audit=audit_run(config, plan))
    write_json(load_dir / SUMMARY_FILE, summary)
    return LoadResult(run_dir=run_dir, load_dir=load_dir, summary=summary, state_root=state_root)


def _open_start_gate(plan: LoadPlan, procs: list[subprocess.Popen], timeout_seconds: float) -> float:
    """Wait until every load process has opened its store, then publish t0 for all of them."""
    deadline = wall_seconds() + timeout_seconds
    ready = [plan.for_worker(i).ready_path() for i in range(plan.workers)]
    while not all(p.exists() for p in ready):
        if any(p.poll() is not None for p in procs):
            raise LoadError(f"a Locust process exited during start-up; see {plan.load_dir / 'locust.stdout.txt'}")
        if wall_seconds() > deadline:
            raise LoadError(f"load processes not ready after {timeout_seconds:.0f} s; see {plan.load_dir}")
        time.sleep(START_GATE_POLL_SECONDS)
    t0 = wall_seconds() + START_LEAD_SECONDS
    tmp = plan.t0_path().with_suffix(".tmp")
    tmp.write_text(repr(t0))
    tmp.replace(plan.t0_path())
    return t0


def audit_run(config: ClusterConfig, plan: LoadPlan) -> AuditResult:
    """Read back every worker's acked sends with a store opened on that worker's state."""
    from lab.store import MessageStore

    total = AuditResult()
    for i in range(plan.workers):
        wp = plan.for_worker(i)
        path = plan.load_dir / "acks" / f"{wp.worker_name()}.csv"
        if not path.exists():
            continue
        acks = read_acks(path)
        with MessageStore.open(config, state_dir=wp.state_dir(), node_id=wp.node_id) as store:
            total.merge(audit_worker(store, acks))
    write_json(plan.load_dir / "audit.json", total)
    return total
