"""``lab load``: run the Locust users headless against the configured cluster, then audit.

Locust runs as separate processes (importing locust monkey-patches the whole process with
gevent, which must never happen to the caller: pytest, a notebook, the CLI). One process,
or with ``processes > 1`` a Locust master plus that many workers on loopback (separate
processes, not Locust's fork), each worker with its own key range (``lab.load.plan.KeyRange``)
and store state. By default the workers are started unpatched (``LOCUST_SKIP_MONKEY_PATCH``)
and run each store call in a native thread (``native_threads``; measured in loadgen/README.md).

Sequence of a run:
  1. schema (idempotent) and a seed per worker: a big group, 20 DMs and some chats, sent
     through the store from this process so readers have history from the first second;
  2. Locust starts; every process anchors at the same wall-clock ``t0`` (a few seconds
     ahead, for start-up); warmup calls are not measured; no call starts after the end;
  3. while it runs: the load processes' CPU (psutil) once a second;
  4. after: per-operation totals merged over the workers, HDR interval logs per step,
     achieved vs requested rate, Locust's own CSV/JSON, then the audit (``lab.load.audit``).

Everything lands in ``results/<run-id>/load/``; ``summary.json`` is the machine-readable
result. The cluster settings reach the Locust processes as ``LAB_*`` variables (never on
a command line); results hold only ``ClusterConfig.redacted()``.
"""
from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.project import RESULTS_DIR
from lab.load.audit import AckLog, Ack, AuditResult, audit_worker, read_acks
from lab.cluster.config import ClusterConfig
from lab.errors import LabError
from lab.measure.hdr import OpStats, merge_stats, percentiles_us, read_interval_log, summarize
from lab.load.plan import SEED_SHAPES, KeyRange, LoadPlan, load_profile, message_templates
from lab.load.pacing import Stage, stages_from_steps, staircase
from lab.results.runs import git_commit, machine, new_run_dir

LOCUSTFILE = Path(__file__).with_name("locust") / "locustfile.py"
DEFAULT_STARTUP_SECONDS = 120.0  # longest wait for every Locust process to report ready
START_LEAD_SECONDS = 1.0         # t0 is published this far ahead so every process sees it in time
DEFAULT_STOP_TIMEOUT_SECONDS = 30
PER_USER_RATE = 1.0          # calls/s per user when --users is not given: room for 1 s latencies
SEED_THREADS = 16
CPU_SAMPLE_SECONDS = 1.0
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


@dataclass(frozen=True)
class LoadResult:
    run_dir: Path
    load_dir: Path
    summary: dict[str, Any]
    state_root: Path | None = None  # the workers' store state (DEKs): delete it with the keyspace

    @property
    def audit(self) -> dict[str, Any] | None:
        return self.summary.get("audit")


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


# ---- seeding -----------------------------------------------------------------------------------
def seed_worker(config: ClusterConfig, plan: LoadPlan) -> int:
    """Send the worker's seed conversations through the store; acks go to its ack log."""
    from lab.store import MessageStore

    keys = KeyRange(plan.run_id, plan.worker_index, SEED_SHAPES[plan.seed_size])
    shape = keys.shape
    templates = message_templates(load_profile(plan.profile).content, seed=plan.worker_index)
    plan_items: list[tuple[Any, Any]] = [(keys.big_group, keys.senders(keys.big_group, 50))] * shape.big_group
    for c in keys.dms():
        plan_items += [(c, keys.senders(c, 2))] * shape.dm_messages
    for c in keys.chats():
        plan_items += [(c, keys.senders(c, 8))] * shape.chat_messages
    requests = [keys.request(templates[i % len(templates)], conversation_id=conv,
                             sender_id=senders[i % len(senders)], client_message_id=keys.client_message_id(i, "seed"))
                for i, (conv, senders) in enumerate(plan_items)]
    log = AckLog(plan.load_dir / "acks" / f"{plan.worker_name()}.csv")
    lock = threading.Lock()
    with MessageStore.open(config, state_dir=plan.state_dir(), node_id=plan.node_id) as store:
        def send(request: Any) -> None:
            ack = store.send(request)
            with lock:
                log.append(Ack(phase="seed", tenant_id=request.tenant_id, conversation_id=request.conversation_id,
                               conversation_seq=ack.conversation_seq, message_id=ack.message_id,
                               client_message_id=request.client_message_id, sender_id=request.sender_id,
                               replayed=ack.replayed))
        with ThreadPoolExecutor(SEED_THREADS) as pool:
            list(pool.map(send, requests))
        store.drain()
    log.close()
    return len(requests)


# ---- CPU of the load processes -----------------------------------------------------------------
class CpuMonitor(threading.Thread):
    """Samples the CPU of the Locust processes (and their children) once a second."""

    def __init__(self, pids: list[int], out: Path, t0: float) -> None:
        super().__init__(daemon=True)
        import psutil

        self._psutil = psutil
        self.procs = [psutil.Process(p) for p in pids]
        self.out = out
        self.t0 = t0
        self.samples: list[tuple[float, float, dict[int, float]]] = []  # (t - t0, % of one core, per pid)
        self._halt = threading.Event()

    def _times(self) -> dict[int, float]:
        out = {}
        for p in self.procs:
            try:
                t = p.cpu_times()
                out[p.pid] = t.user + t.system
            except self._psutil.Error:
                pass
        return out

    def run(self) -> None:
        last, last_t = self._times(), time.time()
        with open(self.out, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["seconds_after_t0", "cpu_percent_of_one_core", "per_process"])
            while not self._halt.wait(CPU_SAMPLE_SECONDS):
                now, now_t = self._times(), time.time()
                dt = now_t - last_t
                per = {pid: round(100 * (now[pid] - last.get(pid, now[pid])) / dt, 1) for pid in now}
                total = round(sum(per.values()), 1)
                self.samples.append((now_t - self.t0, total, per))
                w.writerow([round(now_t - self.t0, 2), total, json.dumps(per)])
                f.flush()
                last, last_t = now, now_t

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)

    def window(self, start_s: float, end_s: float) -> dict[str, Any]:
        vals = [v for t, v, _ in self.samples if start_s < t <= end_s]
        cores = os.cpu_count() or 1
        if not vals:
            return {"samples": 0}
        mean = sum(vals) / len(vals)
        return {"samples": len(vals), "mean_percent_of_one_core": round(mean, 1),
                "max_percent_of_one_core": round(max(vals), 1),
                "mean_percent_of_machine": round(mean / cores, 1), "cores": cores}


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

    with MessageStore.open(config, state_dir=state_root / "setup", node_id=options.node_id_base - 1) as store:
        store.create_schema()
        outbox = store.services.describe()  # the workers open their stores the same way
    t_seed = time.time()
    seeded = [seed_worker(config, plan.for_worker(i)) for i in range(plan.workers)]
    seed_seconds = time.time() - t_seed

    parameters = {"options": _jsonable(dataclasses.asdict(options)), "plan": plan.to_json(),
                  "cluster": config.redacted(), "outbox": outbox, "machine": machine(), "git_commit": git_commit(),
                  "locustfile": str(LOCUSTFILE), "seed_sends_per_worker": seeded,
                  "seed_seconds": round(seed_seconds, 1)}
    (load_dir / "parameters.json").write_text(json.dumps(parameters, indent=2))

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
                if time.time() > deadline:  # a frozen load generator is a result, not a hang
                    for p in procs:
                        if p.poll() is None:
                            p.kill()
                time.sleep(0.5)
        finally:
            for p in procs:  # only our own processes, by handle
                if p.poll() is None:
                    p.kill()
            if "cpu" in locals():
                cpu.stop()
    exit_codes = [p.returncode for p in procs]
    summary = summarize_run(plan, load_dir, cpu=cpu, exit_codes=exit_codes)
    summary["parameters"] = {k: parameters[k] for k in ("options", "cluster", "seed_sends_per_worker", "seed_seconds")}
    if options.audit:
        summary["audit"] = audit_run(config, plan).to_json()
        summary["audit"]["acked_sends_in_summary"] = summary["acks"]
    (load_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return LoadResult(run_dir=run_dir, load_dir=load_dir, summary=summary, state_root=state_root)


def _open_start_gate(plan: LoadPlan, procs: list[subprocess.Popen], timeout_seconds: float) -> float:
    """Wait until every load process has opened its store, then publish t0 for all of them."""
    deadline = time.time() + timeout_seconds
    ready = [plan.for_worker(i).ready_path() for i in range(plan.workers)]
    while not all(p.exists() for p in ready):
        if any(p.poll() is not None for p in procs):
            raise LoadError(f"a Locust process exited during start-up; see {plan.load_dir / 'locust.stdout.txt'}")
        if time.time() > deadline:
            raise LoadError(f"load processes not ready after {timeout_seconds:.0f} s; see {plan.load_dir}")
        time.sleep(0.1)
    t0 = time.time() + START_LEAD_SECONDS
    tmp = plan.t0_path().with_suffix(".tmp")
    tmp.write_text(repr(t0))
    tmp.replace(plan.t0_path())
    return t0


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, Path):
        return str(v)
    return v


# ---- results -----------------------------------------------------------------------------------
def _worker_totals(load_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((load_dir / "totals").glob("*.json"))]


def summarize_run(plan: LoadPlan, load_dir: Path, *, cpu: CpuMonitor | None = None,
                  exit_codes: list[int | None] | None = None) -> dict[str, Any]:
    workers = _worker_totals(load_dir)
    stats = merge_stats({op: OpStats.from_json(v) for op, v in w["totals"].items()} for w in workers)
    seconds = plan.duration_seconds
    ops = summarize(stats, elapsed_seconds=seconds, fixed_rate=plan.fixed_rate)
    allops = OpStats()
    for s in stats.values():
        allops.merge(s)
    achieved = allops.count / seconds if seconds > 0 else None
    requested = plan.requested_rate()
    if plan.fixed_rate and plan.warmup_seconds > 0:  # the measured window only
        requested = (sum(max(0.0, min(s.end_s, plan.end_seconds) - max(s.start_s, plan.warmup_seconds)) * s.rate
                         for s in plan.stages) / seconds)
    acks = _ack_counts(load_dir)
    out: dict[str, Any] = {
        "run_id": plan.run_id, "profile": plan.profile, "mode": "fixed-rate" if plan.fixed_rate else "closed-loop",
        "users": plan.users, "processes": plan.workers, "warmup_seconds": plan.warmup_seconds,
        "measured_seconds": seconds, "units": {"latency": "microseconds", "rate": "calls per second"},
        "requested_rate": round(requested, 2) if requested else None,
        "achieved_rate": round(achieved, 2) if achieved is not None else None,
        "achieved_over_requested": round(achieved / requested, 4) if requested and achieved is not None else None,
        "operations": ops,
        "all_operations": summarize({"all": allops}, elapsed_seconds=seconds, fixed_rate=plan.fixed_rate)["all"],
        "acks": acks,
        "workers": [{"worker": w["worker"], "pid": w["pid"], "acks": w["acks"], "driver": w.get("driver"),
                     "reactor": w.get("reactor"), "alerts": w.get("alerts"), "requests": w.get("requests")}
                    for w in workers],
        "workers_reporting": len(workers), "workers_expected": plan.workers,
        "locust": _locust_json(load_dir), "locust_exit_codes": exit_codes,
    }
    if cpu is not None:
        out["loadgen_cpu"] = cpu.window(plan.warmup_seconds, plan.end_seconds)
    if len(plan.stages) > 1:
        out["steps"] = step_summary(plan, load_dir, cpu)
    return out


def _ack_counts(load_dir: Path) -> dict[str, int]:
    counts: dict[str, int] = {"seed": 0, "warmup": 0, "measured": 0, "replayed": 0}
    for path in sorted((load_dir / "acks").glob("*.csv")):
        for ack in read_acks(path):
            key = "replayed" if ack.replayed else ack.phase
            counts[key] = counts.get(key, 0) + 1
    counts["total_new"] = counts["seed"] + counts["warmup"] + counts["measured"] + counts.get("after", 0)
    return counts


def _locust_json(load_dir: Path) -> dict[str, Any] | None:
    path = load_dir / "locust.json"
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError:
        return None
    return {e["name"]: {"num_requests": e["num_requests"], "num_failures": e["num_failures"]}
            for e in data if isinstance(e, dict) and "name" in e}


def step_summary(plan: LoadPlan, load_dir: Path, cpu: CpuMonitor | None) -> list[dict[str, Any]]:
    """Throughput and p99 per stage, from the interval logs (intervals start on t0 + k * interval)."""
    from lab.measure.hdr import new_histogram

    per_step = [{"service": new_histogram(), "corrected": new_histogram()} for _ in plan.stages]
    for path in sorted((load_dir / "hdr").glob("*.hlog")):
        for iv in read_interval_log(path):
            mid = iv.start_s + iv.length_s / 2
            for i, st in enumerate(plan.stages):
                if st.start_s <= mid < st.end_s:
                    per_step[i][iv.kind].add(iv.histogram)
                    break
    out = []
    for st, h in zip(plan.stages, per_step):
        secs = st.end_s - st.start_s
        row = {"start_s": st.start_s, "end_s": st.end_s, "requested_rate": round(st.rate, 2),
               "warmup": st.end_s <= plan.warmup_seconds,
               "achieved_rate": round(h["service"].get_total_count() / secs, 2),
               "service_us": percentiles_us(h["service"]), "corrected_us": percentiles_us(h["corrected"])}
        if cpu is not None:
            row["loadgen_cpu"] = cpu.window(st.start_s, st.end_s)
        out.append(row)
    return out


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
    (plan.load_dir / "audit.json").write_text(json.dumps(total.to_json(), indent=2))
    return total
