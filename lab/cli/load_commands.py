"""``lab load`` and ``lab soak``: Locust users headless against the cluster, and a sustained
mixed load with periodic audits; both exit 1 when the audit finds anything lost or duplicated.
``lab load`` exits 3 when the run was loader-bound (its latencies are the load generator's,
``lab.load.verdict``) unless ``--allow-loader-bound``."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from lab.cli.options import (COUNT, PORT, POSITIVE, SEED, Duration, cluster_options, home_option, results_option,
                             services_options)
from lab.cli.load_text import audit_line, summary_lines, verdict_lines
from lab.cli.status_line import ConsoleProgress
from lab.cluster.config import ClusterConfig
from lab.errors import ConfigError
from lab.load.plan import DRIVER_MODES
from lab.results import units

DEFAULT_WEB_USERS = 8  # the web UI's form default without --users
DEFAULT_FIXED_RATE_WARMUP_SECONDS = 5.0  # fixed rate: discarded, and the loader is sized from it
LOADER_BOUND_EXIT = 3   # the run's latencies are the load generator's (1: audit failed, 2: error, 130: Ctrl-C)
SLO_NOT_MET_EXIT = 4    # --slo: no step met the target


class Processes(click.ParamType):
    """``auto`` or a count >= 1."""

    name = "auto|N"

    def convert(self, value, param, ctx):  # noqa: ANN001 (click's signature)
        if value is None or isinstance(value, int):
            return value
        text = str(value).strip().lower()
        if text == "auto":
            return None
        if text.isdigit() and int(text) >= 1:
            return int(text)
        self.fail(f"{value!r}: give auto or a number of processes >= 1", param, ctx)


# what a worker takes from the master's plan, never from its own command line
_PLAN_FLAGS = {"profile": "--profile", "rate": "--rate", "sends_per_second": "--sends-per-second", "users": "--users", "duration": "--duration",
               "warmup": "--warmup", "processes": "--processes", "max_loader_cpu": "--max-loader-cpu",
               "max_machine_cpu": "--max-machine-cpu",
               "metrics_port": "--metrics-port", "metrics_host": "--metrics-host", "staircase_max": "--staircase",
               "step": "--step", "seed_size": "--seed-size", "driver_mode": "--driver", "reactor": "--reactor",
               "run_id": "--run-id", "slo": "--slo",
               "web": "--web", "expect_workers": "--expect-workers"}


def calls_per_send(weights: Any) -> float:
    """Calls of a profile's mix per send: every user gets the same share of a fixed rate."""
    senders = weights.get("sender", 0)
    if senders <= 0:
        raise click.UsageError("--sends-per-second needs a profile with senders")
    return sum(w for w in weights.values() if w > 0) / senders


@click.command("load")
@home_option
@click.option("--profile", default="chat", show_default=True, help="load profile (lab/load/profiles.toml)")
@click.option("--rate", type=POSITIVE, default=None, help="fixed rate: total store calls per second (open loop)")
@click.option("--sends-per-second", "sends_per_second", type=POSITIVE, default=None, metavar="S",
              help="fixed rate given in sends/s: --rate is S x the profile's calls per send (its weights)")
@click.option("--users", type=COUNT, default=None, help="users (closed loop without --rate; with --rate or --slo: the users sharing the rate)")
@click.option("--duration", type=Duration(), default="60s", show_default=True, help="measured time, e.g. 60s, 2m")
@click.option("--warmup", type=Duration(zero_ok=True), default=None,
              help="unmeasured time before it (default: 5s at a fixed rate, where it also sizes the loader; 0s "
                   "closed loop)")
@click.option("--processes", type=Processes(), default="auto", show_default=True,
              help="Locust worker processes, one per core; auto: what the rate needs by the loader CPU per call "
                   "learned for the profile, up to the usable cores")
@click.option("--max-loader-cpu", "max_loader_cpu", type=click.FloatRange(min=0, min_open=True), default=70.0,
              show_default=True, metavar="PERCENT",
              help="a load process above this % of its core makes the run loader-bound (lab.load.verdict)")
@click.option("--max-machine-cpu", "max_machine_cpu", type=click.FloatRange(min=0, min_open=True, max=100),
              default=85.0, show_default=True, metavar="PERCENT",
              help="the node on this machine (loopback) and the machine busy at this % of its cores or more makes "
                   "the run machine-bound (100: no machine check)")
@click.option("--allow-loader-bound", is_flag=True,
              help=f"exit 0 when the run is loader-bound (default: exit {LOADER_BOUND_EXIT})")
@click.option("--metrics-port", type=PORT, default=None,
              help="serve the live counts in Prometheus' text format at http://127.0.0.1:PORT/metrics (off by "
                   "default; 9470 is the lab's usual port)")
@click.option("--metrics-host", default="127.0.0.1", show_default=True,
              help="address the metrics endpoint listens on (0.0.0.0 for a Prometheus on another machine)")
@click.option("--staircase", "staircase_max", type=POSITIVE, default=None,
              help="fixed-rate steps at 50/75/90/105% of this measured maximum rate")
@click.option("--step", "step", type=Duration(), default="20s", show_default=True, help="length of each staircase step")
@click.option("--slo", default=None, metavar="TARGET",
              help="search for the knee: the highest rate of the profile's mix whose corrected latency meets "
                   "TARGET, e.g. p99<=50ms (fixed-rate steps, each long enough for --slo-min-calls)")
@click.option("--slo-start", type=POSITIVE, default=20.0, show_default=True, metavar="RATE",
              help="with --slo: the first step's rate (calls/s); the steps double until one fails, then bisect")
@click.option("--slo-max", type=POSITIVE, default=None, metavar="RATE", help="with --slo: never step above this rate")
@click.option("--slo-steps", type=COUNT, default=8, show_default=True, help="with --slo: at most this many steps")
@click.option("--slo-min-calls", type=COUNT, default=1000, show_default=True,
              help="with --slo: calls a step needs before its percentile counts (fewer: 'too few', never the answer)")
@click.option("--seed-size", type=click.Choice(["tiny", "small", "standard"]), default="standard", show_default=True,
              help="conversations each worker seeds before the run")
@click.option("--driver", "driver_mode", type=click.Choice(list(DRIVER_MODES)), default="futures",
              show_default=True, help="futures: unpatched Locust workers; a store call with an asynchronous twin "
              "(history_async, ...) is the store's future, the user's greenlet woken through the gevent hub, the "
              "others in native threads; threads: every store call in a native thread; gevent: on the gevent loop "
              "of patched workers (asyncore reactor)")
@click.option("--reactor", default=None, help="driver reactor in the Locust processes (default: lab.reactors)")
@click.option("--no-audit", is_flag=True, help="skip reading back the acknowledged sends")
@click.option("--run-id", default=None, metavar="ID",
              help="name the run (results/ID/); a later load with the same ID reuses its seed, key ranges and "
                   "history (written to results/ID/load-2, ...)")
@click.option("--web", is_flag=True, help="Locust's web UI instead of a headless run (closed loop; Ctrl-C ends it, "
                                          "then the summary and the audit)")
@click.option("--web-host", default="127.0.0.1", show_default=True, help="address the web UI listens on")
@click.option("--web-port", type=PORT, default=None, help="web UI port (default: 8089, or a free one)")
@click.option("--master", "as_master", is_flag=True,
              help="distributed: run the Locust master here (no users) and wait for --expect-workers workers")
@click.option("--expect-workers", type=COUNT, default=None, help="with --master: workers to wait for")
@click.option("--master-bind-host", default="127.0.0.1", show_default=True,
              help="with --master: address the master and its coordinator listen on (an interface other machines "
                   "reach, e.g. 10.0.0.5; 0.0.0.0 for all)")
@click.option("--worker", "as_worker", is_flag=True,
              help="distributed: a worker on this machine; takes its plan from the master (--master-host)")
@click.option("--master-host", default=None, help="with --worker: the master's address")
@click.option("--master-port", type=click.IntRange(1, 65534), default=5557, show_default=True,
              help="the Locust master's port; the lab's coordinator listens on the next one")
@click.option("--join-timeout", type=Duration(), default="10m", show_default=True,
              help="--master: how long to wait for the workers; --worker: for the master")
@results_option
@services_options
@cluster_options
@click.pass_context
def load(ctx: click.Context, home: Path, profile: str, rate: float | None, sends_per_second: float | None,
         users: int | None, duration: float,
         warmup: float | None, processes: int | None, max_loader_cpu: float, max_machine_cpu: float,
         allow_loader_bound: bool,
         metrics_port: int | None, metrics_host: str, staircase_max: float | None, step: float, slo: str | None,
         slo_start: float, slo_max: float | None, slo_steps: int, slo_min_calls: int, seed_size: str,
         driver_mode: str,
         reactor: str | None, no_audit: bool, run_id: str | None, web: bool, web_host: str, web_port: int | None,
         as_master: bool, expect_workers: int | None, master_bind_host: str, as_worker: bool,
         master_host: str | None, master_port: int, join_timeout: float, results: Path, config: ClusterConfig,
         services: Any) -> None:
    """Run the Locust users against the cluster (headless, or Locust's web UI); write
    results/<run-id>/load/.

    Closed loop with --users N, fixed rate with --rate R (latency corrected for coordinated
    omission beside service time), or a staircase with --staircase MAX; --web: the UI with
    the plan's users as its default. Across machines: --master --expect-workers N here,
    --worker --master-host H on each load machine (loadgen/README.md). Ends with the audit:
    every acknowledged send read back exactly once (lost and duplicates must be 0), and
    found once in the outbox. --outbox / --hot-window (LAB_OUTBOX, LAB_HOT_WINDOW, the TOML
    file's [services]) pick the stores' commit log and archiver mode's Redis hot window."""
    from lab.load.runner import LoadOptions, WebOptions, run_load
    from lab.load.verdict import Limits

    if as_worker:
        given = ["--master"] * as_master + [flag for name, flag in _PLAN_FLAGS.items()
                                            if ctx.get_parameter_source(name) is not ParameterSource.DEFAULT]
        if given:
            raise click.UsageError(f"--worker takes its plan from the master: drop {', '.join(given)}")
        if master_host is None:
            raise click.UsageError("--worker needs --master-host H (the master's address)")
        _worker(config, master_host, master_port, join_timeout, results, audit=not no_audit, services=services)
        return
    if (expect_workers is None) == as_master:
        raise click.UsageError("--master needs --expect-workers N" if as_master
                               else "--expect-workers goes with --master")
    if sends_per_second is not None:
        if rate is not None:
            raise click.UsageError("give --rate (calls/s) or --sends-per-second, not both")
        from lab.load.plan import load_profile

        rate = sends_per_second * calls_per_send(load_profile(profile).weights)
        click.echo(f"--sends-per-second {sends_per_second:g}: {rate:,.1f} calls/s of the {profile} mix", err=True)
    if slo is not None:
        clash = [flag for name, flag in (("rate", "--rate"), ("staircase_max", "--staircase"),
                                         ("duration", "--duration"))
                 if ctx.get_parameter_source(name) is not ParameterSource.DEFAULT] + ["--web"] * web + \
            ["--master"] * as_master
        if clash:
            raise click.UsageError(f"--slo picks each step's rate and length itself: drop {', '.join(clash)}")
        _knee(config, slo=slo, start=slo_start, max_rate=slo_max, steps=slo_steps, min_calls=slo_min_calls,
              step=step, warmup=DEFAULT_FIXED_RATE_WARMUP_SECONDS if warmup is None else warmup,
              allow_loader_bound=allow_loader_bound, services=services,
              base=dict(profile=profile, users=users, processes=processes, seed_size=seed_size, reactor=reactor,
                        limits=Limits(max_loader_cpu_percent_of_core=max_loader_cpu,
                                      max_machine_cpu_percent=max_machine_cpu),
                        **DRIVER_MODES[driver_mode], audit=not no_audit, results=results, run_id=run_id))
        return
    if rate is None and users is None and staircase_max is None:
        if not web:
            raise click.UsageError("give --rate R, --users N or --staircase MAX")
        users = DEFAULT_WEB_USERS
    if warmup is None:
        warmup = DEFAULT_FIXED_RATE_WARMUP_SECONDS if (rate is not None or staircase_max is not None) else 0.0
    options = LoadOptions(profile=profile, rate=rate, users=users, duration_seconds=duration,
                          warmup_seconds=warmup, processes=processes, staircase_max=staircase_max,
                          limits=Limits(max_loader_cpu_percent_of_core=max_loader_cpu,
                                      max_machine_cpu_percent=max_machine_cpu), metrics_port=metrics_port,
                          metrics_host=metrics_host,
                          step_seconds=step, seed_size=seed_size, reactor=reactor,
                          **DRIVER_MODES[driver_mode], audit=not no_audit, results=results,
                          run_id=run_id, web=WebOptions(host=web_host, port=web_port) if web else None)
    if as_master:
        from lab.load.distributed import run_master

        result = run_master(config, options, expect_workers=expect_workers, bind_host=master_bind_host,
                            port=master_port, join_timeout_seconds=join_timeout,
                            progress=ConsoleProgress(), services=services)
    else:
        result = run_load(config, options, progress=ConsoleProgress(), services=services)
    _print_summary(result, allow_loader_bound=allow_loader_bound)


def _knee(config: ClusterConfig, *, slo: str, start: float, max_rate: float | None, steps: int, min_calls: int,
          step: float, warmup: float, allow_loader_bound: bool, services: Any, base: dict[str, Any]) -> None:
    from lab.load.knee_search import BOUND, NOT_MET, SearchPlan, Slo
    from lab.load.knee_run import KneeOptions, run_knee
    from lab.load.runner import LoadOptions

    try:
        target = Slo.parse(slo)
        search = SearchPlan(start_rate=start, max_rate=max_rate, max_steps=steps, min_calls=min_calls)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--slo") from None
    result = run_knee(config, LoadOptions(**base), KneeOptions(slo=target, search=search, step_seconds=step,
                                                                warmup_seconds=warmup),
                      progress=ConsoleProgress(), services=services)
    knee = result.knee
    click.echo(knee.statement())
    click.echo(f"knee: {result.path}" + (f"  figure: {result.figure}" if result.figure else ""))
    click.echo(f"  round trip: {result.rtt_us / 1000:g} ms added to every request (--rtt)" if result.rtt_us
               else "  round trip: direct (no --rtt): the latencies are this network's")
    if result.shared_machine:
        click.echo("  the node and the load generator share this machine's cores: a machine-bound step is never "
                   "the answer (lab.load.verdict)")
    if result.audit is not None:
        click.echo(audit_line(result.audit))
        if not result.audit.ok:
            sys.exit(1)
    if knee.status == BOUND and not allow_loader_bound:
        sys.exit(LOADER_BOUND_EXIT)
    if knee.status == NOT_MET:
        sys.exit(SLO_NOT_MET_EXIT)


def _worker(config: ClusterConfig, master_host: str, master_port: int, join_timeout: float, results: Path, *,
            audit: bool, services: Any) -> None:
    from lab.load.distributed import run_worker

    r = run_worker(config, master_host=master_host, port=master_port, results=results,
                   join_timeout_seconds=join_timeout, audit=audit, progress=ConsoleProgress(), services=services)
    a = r.audit
    click.echo(f"worker {r.index}: {units.count(r.acks.total_new)} acknowledged sends ({units.count(r.acks.seed)} "
               f"seed, {units.count(r.acks.measured)} measured); results sent to the master")
    if a is not None:
        click.echo(audit_line(a))
    click.echo(f"local files: {r.load_dir}")
    if a is not None and not a.ok:
        sys.exit(1)


def _print_summary(result: Any, *, allow_loader_bound: bool = False) -> None:
    s = result.summary
    for line in summary_lines(s):
        click.echo(line)
    click.echo(f"summary: {result.summary_path}")
    for line in verdict_lines(s, allowed=allow_loader_bound, exit_code=LOADER_BOUND_EXIT):
        click.echo(line)
    if s.audit is not None and not s.audit.ok:
        sys.exit(1)
    if result.interrupted:
        click.echo("interrupted: the summary covers the part that ran", err=True)
        sys.exit(130)
    if s.loader_bound and not allow_loader_bound:
        sys.exit(LOADER_BOUND_EXIT)


@click.command("soak")
@home_option
@click.option("--duration", type=Duration(), default="60s", show_default=True, help="how long the load runs, e.g. 90s, 10m, 2h")
@click.option("--threads", type=COUNT, default=8, show_default=True, help="worker threads driving the store")
@click.option("--conversations", type=COUNT, default=16, show_default=True, help="conversations of the soak tenant")
@click.option("--audit-every", "audit_every", type=Duration(), default="30s", show_default=True,
              help="interval of the audits (every acked send readable exactly once)")
@click.option("--max-operations", type=COUNT, default=None, help="stop after this many operations as well")
@click.option("--seed", type=SEED, default=None, help="random seed of the operation mix")
@results_option
@services_options
@cluster_options
def soak(home: Path, duration: float, threads: int, conversations: int, audit_every: float, max_operations: int | None,
         seed: int | None, results: Path, config: ClusterConfig, services: Any) -> None:
    """A sustained mixed load (send, retry, history, batch read, react, recall, edit) with periodic audits.

    Ends with the totals (operations and errors per kind, acked, lost, duplicated, recalls and
    edits lost) in results/<run-id>/soak/summary.json; exits 1 when anything acked was lost,
    duplicated or undone (the final audit checks the outbox too). --outbox / --hot-window as for
    `lab load`."""
    from lab.load.soak import SoakAudit, SoakOptions, run_soak

    options = SoakOptions(duration_seconds=duration, threads=threads, conversations=conversations,
                          audit_interval_seconds=audit_every, max_operations=max_operations, seed=seed,
                          results=results)

    def progress(audit: SoakAudit) -> None:
        what = "final audit" if audit.final else "audit"
        at = f"{units.seconds(audit.at_seconds):>10}"
        if audit.error is not None:
            click.echo(f"  {at} {what} failed: {audit.error}")
        else:
            click.echo(f"  {at} {what}: {units.count(audit.acked)} acked, lost {units.count(audit.lost)}, "
                       f"duplicated {units.count(audit.duplicated)}, recalls lost {units.count(audit.recalls_lost)}, "
                       f"edits lost {units.count(audit.edits_lost)} ({units.seconds(audit.seconds)})")

    click.echo(f"  outbox {services.outbox}, hot window {services.hot_window}"
               + (" (archiver mode)" if services.hot_window == "redis" else "") + f"; client GC {services.client_gc}")
    result = run_soak(config, options, progress=progress, services=services)
    t = result.summary.totals
    for op, o in t.operations.items():
        click.echo(f"  {op:<11} {units.count(o.ok):>9} ok {units.count(o.errors):>6} errors")
    final = t.final_audit
    counts = (f"acked {units.count(final.acked)}, lost {units.count(final.lost)}, duplicated "
              f"{units.count(final.duplicated)}, replay mismatches {units.count(final.replay_mismatches)}, recalls "
              f"lost {units.count(final.recalls_lost)}, edits lost {units.count(final.edits_lost)}") if final else "no audit ran"
    if final is not None and final.log is not None:
        counts += (f"; against the {final.log.outbox} outbox: {units.count(final.log.checked)} checked, missing "
                   f"{units.count(final.log.missing)}, logged twice {units.count(final.log.duplicated)}")
    click.echo(f"soak {result.summary.run_id}: {units.count(t.operations_total)} operations in "
               f"{units.seconds(t.elapsed_seconds)}, {units.count(t.errors_total)} errors; {counts}")
    click.echo(f"summary: {result.summary_path}")
    if not result.ok:
        sys.exit(1)
