"""``lab load``: run the Locust users against the configured cluster, then audit.

More: docs/load-internals.md.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.cluster.config import ClusterConfig
from lab.cluster.connection import connect
from lab.cluster.services import ServicesConfig
from lab.errors import ConfigError, LoadError
from lab.load import load_folders
from lab.load.audit import AuditResult, audit_worker, read_acks
from lab.load.loader_sizing import driver_name, resolve_processes
from lab.load.loadgen_cpu import CpuMonitor
from lab.load.locust_run import drive, wait_until_done
from lab.load.metrics_endpoint import DEFAULT_METRICS_HOST, MetricsServer
from lab.load.pacing import Stage, stages_from_steps, staircase
from lab.load.plan import SEED_SHAPES, SEED_SIZES, LoadPlan, load_profile, t0_path
from lab.load.processes import LOCUSTFILE, Processes, WebOptions, child_env, display_host, free_port, locust_cmd
from lab.load.progress import NO_PROGRESS, LoadProgress
from lab.load.run_monitor import RunMonitor, finish_summary
from lab.load.summary import LoadSummary
from lab.load.templates import build_templates, import_generator_meanwhile
from lab.load.verdict import Limits, on_this_machine
from lab.load.worker_seed import seed_worker
from lab.measure import Stopwatch
from lab.measure.timing import wall_seconds
from lab.project import RESULTS_DIR
from lab.results.environment import environment
from lab.results.jsonio import jsonable, write_json
from lab.store import MessageStore

__all__ = ["LoadOptions", "LoadResult", "WebOptions", "run_load", "audit_run", "LOCUSTFILE"]

SUMMARY_FILE = "summary.json"
DEFAULT_STARTUP_SECONDS = 120.0  # longest wait for every Locust process to report ready
START_LEAD_SECONDS = 1.0         # t0 is published this far ahead so every process sees it in time
DEFAULT_STOP_TIMEOUT_SECONDS = 30
PER_USER_RATE = 1.0          # calls/s per user when --users is not given: room for 1 s latencies
MAX_DEFAULT_USERS = 5000
START_GATE_POLL_SECONDS = 0.1


@dataclass(frozen=True, kw_only=True)
class LoadOptions:
    profile: str = "chat"
    rate: float | None = None            # total calls/s: fixed-rate (open loop) mode
    users: int | None = None             # closed loop when rate is None; default PER_USER_RATE share
    duration_seconds: float = 60.0
    warmup_seconds: float = 0.0
    processes: int | None = 1            # None: auto (lab.load.loader_sizing)
    staircase_max: float | None = None   # steps at 50/75/90/105% of this rate
    step_seconds: float = 20.0
    seed_size: str = "standard"
    reactor: str | None = None           # driver reactor in the Locust processes (lab.cluster.reactors)
    native_threads: bool = True          # workers not gevent-patched; store calls in native threads
    store_futures: bool = True           # with native_threads: the store's futures where it has them, no thread
    node_id_base: int = 100
    interval_seconds: float = 1.0
    startup_seconds: float = DEFAULT_STARTUP_SECONDS
    stop_timeout_seconds: int = DEFAULT_STOP_TIMEOUT_SECONDS
    audit: bool = True
    results: Path = RESULTS_DIR
    run_id: str | None = None            # results/<run_id>/: named, reused when it exists (lab.load.load_folders)
    run_dir: Path | None = None          # write into this run's folder (benchmarks)
    load_subdir: str = "load"
    web: WebOptions | None = None        # Locust's web UI instead of a headless run
    limits: Limits = field(default_factory=Limits)  # the verdict's thresholds (lab.load.verdict)
    metrics_port: int | None = None      # serve the live counts in Prometheus' format here
    metrics_host: str = DEFAULT_METRICS_HOST

    def __post_init__(self) -> None:
        """Every number in range and the modes consistent, before anything starts."""
        def need(ok: bool, message: str, **facts: Any) -> None:
            if not ok:
                raise ConfigError(message, **facts)

        need(self.rate is None or self.rate > 0, f"rate must be > 0 calls/s, got {self.rate}", rate=self.rate)
        need(self.users is None or self.users >= 1, f"users must be >= 1, got {self.users}", users=self.users)
        need(self.staircase_max is None or self.staircase_max > 0,
             f"staircase maximum must be > 0 calls/s, got {self.staircase_max}", staircase_max=self.staircase_max)
        need(self.processes is None or self.processes >= 1, f"processes must be >= 1, got {self.processes}",
             processes=self.processes)
        need(self.warmup_seconds >= 0, f"warmup must be >= 0 s, got {self.warmup_seconds:g}",
             warmup_seconds=self.warmup_seconds)
        need(self.web is not None or self.staircase_max is not None or self.duration_seconds > 0,
             f"duration must be > 0 s, got {self.duration_seconds:g}", duration_seconds=self.duration_seconds)
        need(self.step_seconds > 0, f"step must be > 0 s, got {self.step_seconds:g}", step_seconds=self.step_seconds)
        need(self.interval_seconds > 0, "interval must be > 0 s", interval_seconds=self.interval_seconds)
        need(self.startup_seconds > 0 and self.stop_timeout_seconds >= 0, "start-up and stop timeouts must be > 0")
        need(self.seed_size in SEED_SIZES, f"seed size must be one of {', '.join(SEED_SIZES)}",
             seed_size=self.seed_size)
        need(not (self.rate is not None and self.staircase_max is not None), "give --rate or --staircase, not both")
        need(self.web is None or (self.rate is None and self.staircase_max is None),
             "the web UI runs closed loop (users call back to back, their number set in the UI): "
             "give --users N, not --rate or --staircase", web=True)
        if self.run_id is not None:
            load_folders.check_run_id(self.run_id)

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
        return max(8 * (self.processes or 1), min(MAX_DEFAULT_USERS, math.ceil(top / PER_USER_RATE)))

    def measured_seconds(self) -> float:
        """The plan's measured time (0: until stopped, the web UI)."""
        if self.web is not None:
            return 0.0
        if self.staircase_max is not None:
            return sum(s.end_s - s.start_s for s in self.stages()) - self.warmup_seconds
        return self.duration_seconds


@dataclass(frozen=True, kw_only=True)
class LoadResult:
    run_dir: Path
    load_dir: Path
    summary: LoadSummary
    state_root: Path | None = None  # the workers' store state (DEKs): delete it with the keyspace
    interrupted: bool = False       # a headless run stopped early (Ctrl-C): the summary covers what ran

    @property
    def summary_path(self) -> Path:
        return self.load_dir / SUMMARY_FILE

    @property
    def audit(self) -> AuditResult | None:
        return self.summary.audit


# ---- the run -----------------------------------------------------------------------------------
def build_plan(options: LoadOptions, folder: load_folders.LoadFolder, *, workers: int, start_gate: bool,
               seed_gate: bool = False) -> LoadPlan:
    return LoadPlan(run_id=folder.key_base, load_dir=folder.load_dir, state_root=folder.state_root,
                    profile=options.profile, users=options.user_count(), workers=workers, stages=options.stages(),
                    warmup_seconds=options.warmup_seconds, duration_seconds=options.measured_seconds(),
                    reactor=options.reactor, native_threads=options.native_threads,
                    store_futures=options.native_threads and options.store_futures,
                    node_id_base=options.node_id_base, interval_seconds=options.interval_seconds,
                    seed_size=options.seed_size, start_gate=start_gate, seed_gate=seed_gate)


def prepare(config: ClusterConfig, options: LoadOptions, progress: LoadProgress = NO_PROGRESS, *,
            services: ServicesConfig | None = None) -> tuple[load_folders.LoadFolder, dict[str, Any]]:
    """Check the options, reach the cluster and create the schema: all before any folder is made."""

    load_profile(options.profile)  # an unknown profile fails here
    options.user_count()
    folder = load_folders.plan_folder(results=Path(options.results), lab_home=Path(config.lab_home), run_id=options.run_id,
                              run_dir=options.run_dir, subdir=options.load_subdir)
    services = services if services is not None else ServicesConfig()
    progress.phase(f"connecting to {display_host(config)}: schema (created if missing), environment; outbox "
                   f"{services.outbox}, hot window {services.hot_window}")
    with connect(config) as conn:
        # the workers open their stores the same way: an unreachable broker or Redis fails here
        with MessageStore.open(config, state_dir=folder.state_root / "setup", node_id=options.node_id_base - 1,
                               connection=conn, **services.store_options()) as store:
            store.create_schema()
            env = environment(config, conn, services=services.describe_run()).to_json()
    return folder, env


def seed_workers(config: ClusterConfig, plan: LoadPlan, folder: load_folders.LoadFolder, progress: LoadProgress,
                 indexes: range | list[int] | None = None, *, services: ServicesConfig | None = None) -> dict[str, Any]:
    """Each worker's seed, or (a reused run id) the history earlier loads left."""
    watch = Stopwatch()
    sent, reused = {}, {}
    for i in indexes if indexes is not None else range(plan.workers):
        reused[i] = load_folders.copy_prior_acks(folder, i)
        if folder.seeded(i):  # its seed kept; its Locust process still reads its templates from a file
            build_templates(plan.for_worker(i))
            continue
        shape = SEED_SHAPES[plan.seed_size]
        progress.phase(f"seeding worker {i}: {shape.sends:,} sends through the store ({plan.seed_size} seed: a group "
                       f"of {shape.big_group}, {shape.dms} DMs x {shape.dm_messages}, {shape.chats} chats x "
                       f"{shape.chat_messages}) so readers find history from the first second")
        one = Stopwatch()
        sent[i] = seed_worker(config, plan.for_worker(i), services=services)
        progress.phase(f"seeded worker {i} in {one.seconds():.1f} s ({sent[i] / max(one.seconds(), 1e-9):,.0f} sends/s)")
    if reused and any(reused.values()):
        progress.phase(f"reusing run {folder.key_base}: {sum(reused.values())} acked sends of earlier loads "
                       f"(phase 'prior'), {len(sent)} worker(s) seeded now")
    return {"seed_sends_per_worker": [sent.get(i, 0) for i in sorted(reused)],
            "prior_acks_per_worker": [reused[i] for i in sorted(reused)], "seed_seconds": watch.seconds(1)}


def run_load(config: ClusterConfig, options: LoadOptions, *, progress: LoadProgress | None = None,
             services: ServicesConfig | None = None) -> LoadResult:
    """Seed, run Locust (headless or its web UI), collect, audit. Returns the summary (also in summary.json).
    ``services`` (lab.cluster.services): the outbox and hot window of every store of the run (workers,
    seeds, audit); the Redis hot window runs the stores in archiver mode (ServicesConfig.store_options)."""
    progress = progress or NO_PROGRESS
    services = services if services is not None else ServicesConfig()
    options = resolve_processes(options, Path(config.lab_home), progress)
    metrics = start_metrics(options)  # a taken port fails here, before any folder exists
    generator = import_generator_meanwhile()  # the seed's templates need pandas: imported while the schema is made
    try:
        folder, env = prepare(config, options, progress, services=services)
        load_folders.create(folder)
        lock = load_folders.StateLock(folder.state_root) if folder.named else contextlib.nullcontext()
        with lock:
            headless = options.web is None  # seeds while Locust starts; the web UI's processes start seeded
            plan = build_plan(options, folder, workers=options.processes, start_gate=headless, seed_gate=headless)
            parameters = {"options": jsonable(dataclasses.asdict(options)), "plan": plan.to_json(), "environment": env,
                          "locustfile": str(LOCUSTFILE)}

            def seed() -> None:
                parameters.update(seed_workers(config, plan, folder, progress, services=services))
                write_json(folder.load_dir / "parameters.json", parameters)

            if not plan.seed_gate:
                seed()
            plan, procs, cpu, interrupted, monitor = _run_locust(config, plan, options, progress, parameters,
                                                                 services, metrics, seed=seed)
            seeding = {k: v for k, v in parameters.items() if k.startswith(("seed_", "prior_"))}
            progress.done()
            summary = finish_summary(plan, monitor, home=Path(config.lab_home), interrupted=interrupted,
                                     web=options.web is not None,
                                     exit_codes=procs.exit_codes(),
                                     parameters={k: parameters[k] for k in ("options", "environment", *seeding)})
            proxy_cpu = cpu.proxy_window(plan.warmup_seconds, plan.end_seconds) if cpu is not None else None
            summary = dataclasses.replace(summary, services=services.describe_run(), rtt_us=config.rtt_us,
                                          proxy_cpu=proxy_cpu)
            if options.audit:
                progress.phase(f"audit: reading back {summary.acks.total_new:,} acknowledged sends, and against the "
                               f"{services.outbox} outbox")
                summary = dataclasses.replace(summary, audit=audit_run(config, plan, services=services))
        write_json(folder.load_dir / SUMMARY_FILE, summary)
    finally:
        generator.join()
        if metrics is not None:
            metrics.close()
    return LoadResult(run_dir=folder.run_dir, load_dir=folder.load_dir, summary=summary, state_root=folder.state_root,
                      interrupted=interrupted)


def start_metrics(options: LoadOptions) -> MetricsServer | None:
    if options.metrics_port is None:
        return None
    return MetricsServer(host=options.metrics_host, port=options.metrics_port).start()


def _run_locust(config: ClusterConfig, plan: LoadPlan, options: LoadOptions, progress: LoadProgress,
                parameters: dict[str, Any], services: ServicesConfig, metrics: MetricsServer | None = None,
                seed: Callable[[], None] | None = None) -> tuple[LoadPlan, Processes, CpuMonitor | None, bool, RunMonitor]:
    """Start the Locust processes, seed while they start (``plan.seed_gate``: they open their stores
    once ``seeded`` is written), open the start gate, wait for the end (or Ctrl-C), stop them."""
    load_dir = plan.load_dir
    distributed = plan.workers > 1
    port = free_port() if distributed else None
    web_port = options.web.bound_port() if options.web is not None else None
    role = "master" if distributed else "standalone"
    common = dict(stop_timeout_seconds=options.stop_timeout_seconds, master_port=port, web=options.web,
                  web_port=web_port, host=display_host(config))
    procs = Processes(load_dir / "locust.stdout.txt")
    watch = Stopwatch()
    monitor = RunMonitor(plan, progress, limits=options.limits, metrics=metrics, driver=driver_name(options),
                         shared=on_this_machine(config.contact_points))
    progress.phase(f"starting Locust: {'a master and ' if distributed else ''}{plan.workers} "
                   f"process{'es' if plan.workers > 1 else ''}, {plan.users} users")

    def launch(plan: LoadPlan) -> None:
        procs.start(locust_cmd(plan, load_dir, role=role, **common),
                    child_env(None if distributed else config, plan, role=role, services=services), load_dir)
        for i in range(plan.workers if distributed else 0):
            procs.start(locust_cmd(plan, load_dir, role="worker", index=i, **common),
                        child_env(config, plan, i, role="worker", services=services), load_dir)

    def start(plan: LoadPlan) -> LoadPlan:
        if not procs.procs:
            launch(plan)
        wait_ready(plan, procs, options.startup_seconds)
        if metrics is not None:
            progress.phase(f"metrics: {metrics.url} (Prometheus text format)")
        if plan.start_gate:
            plan = dataclasses.replace(plan, t0=publish_t0(plan))
            progress.phase(f"ready in {watch.seconds():.1f} s; running {plan.end_seconds:g} s"
                           + (f" ({plan.warmup_seconds:g} s warmup)" if plan.warmup_seconds else ""))
        else:
            url = f"http://{options.web.host}:{web_port}"
            parameters["web_url"] = url
            write_json(load_dir / "parameters.json", parameters)
            progress.phase(f"web UI: {url}  (host {display_host(config)}, {plan.users} users by default); "
                           "Ctrl-C here ends the run: summary and audit follow")
        return plan

    try:
        if plan.seed_gate and seed is not None:  # seconds of Locust's start-up overlap the seed; Ctrl-C
            launch(plan)                         # here ends lab load before any run, as it always did
            seed()
            plan.seeded_path().write_text("")
        end = drive(plan, procs, progress, start=start, cpu_csv=load_dir / "cpu.csv",
                    watch=lambda plan: wait_until_done(plan, procs, monitor,
                                                       stop_timeout_seconds=options.stop_timeout_seconds,
                                                       stop_grace_seconds=options.stop_timeout_seconds + 10),
                    stopping="stopping Locust: in-flight calls finish",
                    stop_grace_seconds=options.stop_timeout_seconds + 10)
    finally:
        procs.close()  # only our own processes, by handle
    # a web UI run always ends with Ctrl-C: that is its end, not an interruption
    return end.plan, procs, end.cpu, end.stopped and options.web is None, monitor


def wait_ready(plan: LoadPlan, procs: Processes, timeout_seconds: float,
               indexes: range | None = None) -> None:
    """Wait until every load process has opened its store (``ready/<worker>``)."""
    deadline = wall_seconds() + timeout_seconds
    ready = [plan.for_worker(i).ready_path() for i in (indexes if indexes is not None else range(plan.workers))]
    while not all(p.exists() for p in ready):
        if procs.exited():
            raise LoadError(f"a Locust process exited during start-up; see {plan.load_dir / 'locust.stdout.txt'}",
                            load_dir=str(plan.load_dir))
        if wall_seconds() > deadline:
            raise LoadError(f"load processes not ready after {timeout_seconds:.0f} s; see {plan.load_dir}",
                            load_dir=str(plan.load_dir))
        time.sleep(START_GATE_POLL_SECONDS)


def publish_t0(plan: LoadPlan, lead_seconds: float = START_LEAD_SECONDS) -> float:
    """Publish t0, slightly ahead, for every process at once (``<load_dir>/t0``)."""
    t0 = wall_seconds() + lead_seconds
    write_t0(plan.load_dir, t0)
    return t0


def write_t0(load_dir: Path, t0: float) -> None:
    tmp = load_dir / "t0.tmp"
    tmp.write_text(repr(t0))
    tmp.replace(t0_path(load_dir))


def audit_run(config: ClusterConfig, plan: LoadPlan, indexes: range | list[int] | None = None, *,
              services: ServicesConfig | None = None) -> AuditResult:
    """Read back every worker's acked sends with a store opened on that worker's state and the run's
    services, and check them against the outbox (the local log of the worker, or the Kafka topic)."""

    total = AuditResult()
    for i in indexes if indexes is not None else range(plan.workers):
        wp = plan.for_worker(i)
        path = plan.load_dir / "acks" / f"{wp.worker_name()}.csv"
        if not path.exists():
            continue
        acks = read_acks(path)
        with MessageStore.open(config, state_dir=wp.state_dir(), node_id=wp.node_id,
                               **(services if services is not None else ServicesConfig()).store_options()) as store:
            total.merge(audit_worker(store, acks, log=True))
    write_json(plan.load_dir / "audit.json", total)
    return total

