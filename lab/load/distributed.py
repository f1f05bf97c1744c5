"""Load from several machines on Locust's own distributed mode.

More: docs/load-internals.md.
"""
from __future__ import annotations

import contextlib
import dataclasses
import socket
import time
from pathlib import Path

from lab.cluster.config import ClusterConfig
from lab.cluster.services import ServicesConfig
from lab.errors import CoordinatorError, LoadError
from lab.load import load_folders
from lab.load.audit import AuditResult
from lab.load.coordinator import PORT_OFFSET, Coordinator, CoordinatorClient
from lab.load.loader_sizing import driver_name
from lab.load.loadgen_cpu import CpuMonitor
from lab.load.locust_run import drive, wait_until_done
from lab.load.plan import LoadPlan
from lab.load.processes import Processes, child_env, display_host, locust_cmd
from lab.load.progress import NO_PROGRESS, LoadProgress
from lab.load.run_monitor import RunMonitor, finish_summary
from lab.load.runner import (
    SUMMARY_FILE,
    LoadOptions,
    LoadResult,
    audit_run,
    build_plan,
    prepare,
    seed_workers,
    start_metrics,
    wait_ready,
    write_t0,
)
from lab.load.summary import AckCounts, ack_counts
from lab.measure import Stopwatch
from lab.measure.timing import wall_seconds
from lab.project import RESULTS_DIR
from lab.results.environment import git_commit
from lab.results.jsonio import jsonable, read_json, write_json

DEFAULT_JOIN_TIMEOUT_SECONDS = 600.0   # the workers are started by hand on other machines
DEFAULT_RESULTS_TIMEOUT_SECONDS = 600.0  # after the run: each worker audits, then sends its files
REMOTE_START_LEAD_SECONDS = 2.0        # t0 ahead of now: every worker polls the coordinator in time
WORKER_STOP_GRACE_SECONDS = 30.0  # a worker stopped by Ctrl-C: in-flight calls finish, then SIGKILL
WORKER_FILES = ("totals/{w}.json", "hdr/{w}.hlog", "acks/{w}.csv", "locust-{w}.log")
LIVE_FILE = "totals/{w}.json"            # forwarded once a second while the run lasts: the master's live counts
FORWARD_SECONDS = 1.0


def _lab_version() -> str | None:
    return git_commit()


def run_master(config: ClusterConfig, options: LoadOptions, *, expect_workers: int, bind_host: str = "127.0.0.1",
               port: int = 5557, join_timeout_seconds: float = DEFAULT_JOIN_TIMEOUT_SECONDS,
               results_timeout_seconds: float = DEFAULT_RESULTS_TIMEOUT_SECONDS,
               progress: LoadProgress | None = None, services: ServicesConfig | None = None) -> LoadResult:
    """The Locust master and the coordinator; waits for ``expect_workers`` workers, runs, collects.
    ``services``: the outbox and hot window the schema check and the summary name (each worker
    opens its stores with its own settings: give every machine the same)."""
    services = services if services is not None else ServicesConfig()
    progress = progress or NO_PROGRESS
    if expect_workers < 1:
        raise LoadError(f"expect at least 1 worker, got {expect_workers}", expect_workers=expect_workers)
    options = dataclasses.replace(options, processes=expect_workers)
    metrics = start_metrics(options)  # a taken port fails here, before any folder exists
    try:
        return _master(config, options, expect_workers=expect_workers, bind_host=bind_host, port=port,
                       join_timeout_seconds=join_timeout_seconds, results_timeout_seconds=results_timeout_seconds,
                       progress=progress, metrics=metrics, services=services)
    finally:
        if metrics is not None:
            metrics.close()


def _master(config: ClusterConfig, options: LoadOptions, *, expect_workers: int, bind_host: str, port: int,
            join_timeout_seconds: float, results_timeout_seconds: float, progress: LoadProgress,
            metrics: object, services: ServicesConfig) -> LoadResult:
    folder, env = prepare(config, options, progress, services=services)
    load_folders.create(folder)
    plan = build_plan(options, folder, workers=expect_workers, start_gate=options.web is None)
    parameters = {"options": jsonable(dataclasses.asdict(options)), "plan": plan.to_json(), "environment": env,
                  "distributed": {"master": f"{bind_host}:{port}", "coordinator": f"{bind_host}:{port + PORT_OFFSET}",
                                  "expect_workers": expect_workers}}
    write_json(folder.load_dir / "parameters.json", parameters)
    coordinator = Coordinator(plan=plan.to_json(), expected=expect_workers, load_dir=folder.load_dir, host=bind_host,
                              port=port + PORT_OFFSET, keyspace=config.keyspace, locust_port=port,
                              lab_version=_lab_version(), seeded_before=tuple(load_folders.seeded_indexes(folder))).start()
    web_port = options.web.bound_port() if options.web is not None else None
    procs = Processes(folder.load_dir / "locust.stdout.txt")
    monitor = RunMonitor(plan, progress, limits=options.limits, metrics=metrics, driver=driver_name(options))

    def start(plan: LoadPlan) -> LoadPlan:
        procs.start(locust_cmd(plan, folder.load_dir, role="master", master_host=bind_host, master_port=port,
                               stop_timeout_seconds=options.stop_timeout_seconds, web=options.web,
                               web_port=web_port, expect_workers=expect_workers, host=display_host(config)),
                    child_env(None, plan, role="master"), folder.load_dir)
        progress.phase(f"master at {bind_host}:{port} (coordinator :{port + PORT_OFFSET}): waiting for "
                       f"{expect_workers} worker(s); on each load machine run: lab load --worker "
                       f"--master-host {bind_host} --master-port {port}")
        if not coordinator.wait_for("ready", expect_workers, join_timeout_seconds,
                                    alive=lambda: not procs.exited()):
            raise LoadError(f"{coordinator.count('ready')} of {expect_workers} worker(s) ready after "
                            f"{join_timeout_seconds:.0f} s ({coordinator.count('joined')} joined); see "
                            f"{folder.load_dir / 'locust.log'}", load_dir=str(folder.load_dir))
        hosts = ", ".join(f"{i}: {w['host']} ({w['address']})" for i, w in sorted(coordinator.workers.items()))
        progress.phase(f"all {expect_workers} worker(s) ready: {hosts}")
        if metrics is not None:
            progress.phase(f"metrics: {metrics.url} (Prometheus text format, every worker's counts)")
        if plan.start_gate:
            t0 = wall_seconds() + REMOTE_START_LEAD_SECONDS
            write_t0(folder.load_dir, t0)  # the master's shape reads it
            coordinator.publish_t0(t0)
            plan = dataclasses.replace(plan, t0=t0)
            progress.phase(f"running {plan.end_seconds:g} s on {expect_workers} worker(s)")
        else:
            url = f"http://{options.web.host}:{web_port}"
            parameters["web_url"] = url
            write_json(folder.load_dir / "parameters.json", parameters)
            progress.phase(f"web UI: {url}  ({plan.users} users by default over {expect_workers} workers); "
                           "Ctrl-C here ends the run: the workers' audits and the summary follow")
        return plan

    try:
        end = drive(plan, procs, progress, start=start, cpu_csv=folder.load_dir / "cpu.csv",
                    watch=lambda plan: wait_until_done(plan, procs, monitor,
                                                       stop_timeout_seconds=options.stop_timeout_seconds,
                                                       stop_grace_seconds=options.stop_timeout_seconds + 10),
                    stopping="stopping the Locust master (the workers stop with it)",
                    stop_grace_seconds=options.stop_timeout_seconds + 10, publish_stop=False)
        plan, cpu, interrupted = end.plan, end.cpu, end.stopped and options.web is None
        progress.done()
        joined = coordinator.count("joined")
        progress.phase(f"waiting for the audits and files of {joined} worker(s)")
        coordinator.wait_for("done", joined, results_timeout_seconds)
    finally:
        procs.close()
        coordinator.close()
    workers = {i: dict(w) for i, w in coordinator.workers.items()}
    missing = sorted(i for i, w in workers.items() if not w.get("done"))
    audit = AuditResult()
    for _i, w in sorted(workers.items()):
        if w.get("audit"):
            audit.merge(AuditResult.from_json(w["audit"]))
    write_json(folder.load_dir / "audit.json", audit)
    summary = finish_summary(plan, monitor, home=Path(config.lab_home), interrupted=interrupted,
                             web=options.web is not None,
                             exit_codes=procs.exit_codes() + [w.get("exit_code") for _, w in sorted(workers.items())],
                             parameters={k: parameters[k] for k in ("options", "environment", "distributed")}
                             | {"seed_sends_per_worker": [w.get("seed_sends", 0) for _, w in sorted(workers.items())],
                                "master_cpu": cpu.window(0.0, float("inf")).to_json() if cpu is not None else None})
    summary = dataclasses.replace(summary, audit=audit if options.audit else None,
                                  services=services.describe_store())
    write_json(folder.load_dir / SUMMARY_FILE, summary)
    if missing:
        raise LoadError(f"worker(s) {', '.join(map(str, missing))} sent no results in {results_timeout_seconds:.0f} s; "
                        f"the summary holds the others: {folder.load_dir / SUMMARY_FILE}", missing=missing)
    return LoadResult(run_dir=folder.run_dir, load_dir=folder.load_dir, summary=summary,
                      state_root=folder.state_root, interrupted=interrupted)


@dataclasses.dataclass(frozen=True, kw_only=True)
class WorkerResult:
    index: int
    load_dir: Path
    acks: AckCounts
    audit: AuditResult | None
    state_root: Path


def run_worker(config: ClusterConfig, *, master_host: str, port: int = 5557, results: Path = RESULTS_DIR,
               join_timeout_seconds: float = DEFAULT_JOIN_TIMEOUT_SECONDS, audit: bool = True,
               progress: LoadProgress | None = None, services: ServicesConfig | None = None) -> WorkerResult:
    """Join the master, seed this worker's key range, run a Locust worker, audit, send the results;
    this machine's stores use ``services`` (its own flags, LAB_* and TOML)."""
    progress = progress or NO_PROGRESS
    client = CoordinatorClient(master_host, port + PORT_OFFSET)
    progress.phase(f"joining the master at {master_host}:{port} (coordinator :{port + PORT_OFFSET})")
    answer = client.join(state_for=lambda key_base: load_folders.states_kept(Path(config.lab_home), key_base),
                         lab_version=_lab_version(), retry_seconds=join_timeout_seconds)
    index = answer["index"]
    master_plan = LoadPlan.from_json(answer["plan"])
    if answer.get("lab_version") and answer["lab_version"] != _lab_version():
        progress.phase(f"warning: the master runs lab {answer['lab_version']}, this machine {_lab_version()}: "
                       "run the same commit everywhere")
    config = config.replace(keyspace=answer["keyspace"])
    run_id = Path(master_plan.load_dir).parent.name
    folder = load_folders.worker_folder(results=Path(results), lab_home=Path(config.lab_home), run_id=run_id,
                                key_base=master_plan.run_id, subdir=Path(master_plan.load_dir).name, index=index)
    load_folders.create(folder)
    plan = dataclasses.replace(master_plan, load_dir=folder.load_dir, state_root=folder.state_root,
                               worker_index=index)
    progress.phase(f"worker {index} of {master_plan.workers} in run {run_id}: {display_host(config)}")
    procs = Processes(folder.load_dir / "locust.stdout.txt")
    watch = Stopwatch()
    lock = load_folders.StateLock(folder.state_root, name=f"lock-{plan.worker_name()}")
    with lock:
        seeding = seed_workers(config, plan, folder, progress, indexes=[index], services=services)

        def start(plan: LoadPlan) -> LoadPlan:
            procs.start(locust_cmd(plan, folder.load_dir, role="worker", master_host=master_host,
                                   master_port=answer["locust_port"], index=index, stop_timeout_seconds=0),
                        child_env(config, plan, index, role="worker", services=services), folder.load_dir)
            wait_ready(plan, procs, join_timeout_seconds, indexes=range(index, index + 1))
            client.post("/ready", {"index": index, "seed_sends": seeding["seed_sends_per_worker"][0],
                                   "seconds": watch.seconds(1)})
            progress.phase(f"ready in {watch.seconds():.1f} s: waiting for the master's start")
            if plan.start_gate:
                t0 = client.wait_t0(join_timeout_seconds, alive=procs.running)
                write_t0(folder.load_dir, t0)
                plan = dataclasses.replace(plan, t0=t0)
                progress.phase(f"start at t0 (clock offset to the master {client.offset_seconds:+.3f} s, "
                               f"round trip {1000 * (client.rtt_seconds or 0):.1f} ms)")
            return plan

        try:  # Locust's worker ends when its master quits
            live = LIVE_FILE.format(w=plan.worker_name())
            end = drive(plan, procs, progress, start=start,
                        watch=lambda _plan: _forward_until_exit(procs, client, index, folder.load_dir / live, live),
                        cpu_csv=folder.load_dir / f"cpu-{plan.worker_name()}.csv", stopping="stopping this worker",
                        stop_grace_seconds=WORKER_STOP_GRACE_SECONDS, publish_stop=False)
        finally:
            procs.close()
        plan, cpu = end.plan, end.cpu
        result_audit = None
        if audit:
            progress.phase("audit: reading back this worker's acknowledged sends")
            result_audit = audit_run(config, plan, indexes=[index], services=services)
    _add_machine(folder.load_dir / "totals" / f"{plan.worker_name()}.json", client, cpu, plan, services)
    progress.phase("sending the results to the master")
    for pattern in (*WORKER_FILES, "cpu-{w}.csv"):
        name = pattern.format(w=plan.worker_name())
        client.put_file(index, name, folder.load_dir / name)
    client.post("/done", {"index": index, "audit": result_audit.to_json() if result_audit else None,
                          "exit_code": procs.exit_codes()[0] if procs.procs else None})
    return WorkerResult(index=index, load_dir=folder.load_dir, acks=ack_counts(folder.load_dir), audit=result_audit,
                        state_root=folder.state_root)


def _forward_until_exit(procs: Processes, client: CoordinatorClient, index: int, path: Path, name: str) -> None:
    """Until Locust's worker ends (its master quits it): this worker's latest snapshot to the
    master once a second (the master's live status, metrics and verdict read it)."""
    while procs.running():
        if path.exists():
            with contextlib.suppress(CoordinatorError, OSError):
                client.put_file(index, name, path)
        time.sleep(FORWARD_SECONDS)


def _add_machine(totals_path: Path, client: CoordinatorClient, cpu: CpuMonitor | None, plan: LoadPlan,
                 services: ServicesConfig | None) -> None:
    """The worker's machine in its totals (the master's summary lists it per worker), with the
    settings its own processes ran with (outbox, hot window, client_gc: its own flags, LAB_* and
    TOML, which the master does not see)."""
    with contextlib.suppress(FileNotFoundError):
        data = read_json(totals_path)
        window = cpu.window(plan.warmup_seconds, plan.end_seconds if plan.duration_seconds > 0 else float("inf")) \
            if cpu is not None else None
        data["machine"] = {"host": socket.gethostname(), "clock_offset_seconds": client.offset_seconds,
                           "round_trip_ms": round(1000 * client.rtt_seconds, 2) if client.rtt_seconds else None,
                           "loadgen_cpu": window.to_json() if window is not None else None,
                           "services": (services if services is not None else ServicesConfig()).describe_run()}
        write_json(totals_path, data, indent=None)


__all__ = ["run_master", "run_worker", "WorkerResult"]
