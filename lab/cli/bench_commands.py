"""``lab bench store`` and ``lab bench load``: the store against its bare CQL floors (and, with
``--outboxes``, each outbox), and ``lab load`` against a plain driver client."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import click

from lab.cli.options import COUNT, POSITIVE, LabGroup, cluster_options, home_option, results_option, services_options
from lab.cluster.config import ClusterConfig
from lab.load.plan import DRIVER_MODES


@click.group(cls=LabGroup)
def bench() -> None:
    """Benchmarks: ratios measured on one node in one run (results/<run-id>/bench/)."""


@bench.command("store")
@home_option
@click.option("--quick/--full", default=False, help="quick (under a minute) or full parameters")
@click.option("--outboxes", "outboxes", is_flag=True,
              help="also store.send with each outbox (local, Kafka) and the hot window's cost per send")
@click.option("--outboxes-only", is_flag=True, help="only the outbox comparison (bench/outbox.json)")
@click.option("--profile", "profile", is_flag=True,
              help="instead of the comparisons: the store's hot paths under py-spy (bench/profile/)")
@click.option("--profile-modes", default=None, metavar="M1,M2",
              help="profile workloads (send, send_async, send_floor, history, history_async, grouped_1x500, grouped_20x5; "
                   "default all)")
@click.option("--profile-seconds", type=POSITIVE, default=None, help="seconds per profiled workload (default 20; --quick 4)")
@click.option("--idle", is_flag=True, help="profile: sample idle (waiting) frames in the wall-clock view too")
@results_option
@services_options
@cluster_options
def bench_store(home: Path, quick: bool, outboxes: bool, outboxes_only: bool, profile: bool,
                profile_modes: str | None, profile_seconds: float | None, idle: bool, results: Path,
                config: ClusterConfig, services: Any) -> None:
    """The store against its bare CQL floors: full write path vs its own statements raw
    (send_floor) and bare LWT inserts, latest history page vs its own statements raw
    (history_floor) and a bare SELECT, both against their driver floors (the statements chained
    through the driver's callbacks, client CPU per call), grouped vs naive per-message reads (S-1 shapes). Writes
    bench/store.json, store.csv and store.png; prints the closing note (the ratios).
    --outboxes: in the same run, send throughput and ack latency with each outbox (bench/outbox.json).
    --profile: only py-spy profiles of the hot paths: flame graphs (every thread, GIL holder) and
    top-frame tables per workload (bench/profile/)."""
    from lab.bench.store_paths import BenchParams, run_bench
    from lab.bench.store_paths.outboxes import OutboxBenchParams, run_outbox_bench
    from lab.bench.store_paths.profiling import ProfileParams, pyspy_path, run_profile
    from lab.cluster.connection import connect
    from lab.results.run_folders import new_run_dir

    log = lambda msg: click.echo(msg, err=True)  # noqa: E731
    if profile:  # options checked before anything connects or writes
        changes: dict[str, Any] = {"idle": idle, "client_gc": services.client_gc}
        if profile_modes:
            changes["modes"] = tuple(m.strip() for m in profile_modes.split(",") if m.strip())
        if profile_seconds is not None:
            changes["seconds"] = profile_seconds
        profile_params = ProfileParams.preset(quick=quick, **changes)
        pyspy_path()
    with connect(config):  # an unreachable cluster fails here, before a run folder exists
        run_dir = new_run_dir(Path(results))
    if profile:
        prof = run_profile(config, profile_params, run_dir=run_dir, log=log)
        click.echo(prof.closing_note)
        return
    if not outboxes_only:
        result = run_bench(config, BenchParams.preset(quick=quick), results=results, run_dir=run_dir, log=log,
                           gc_mode=services.client_gc)
        click.echo(result.closing_note)
        click.echo(f"store.json: {result.json_path}")
    if outboxes or outboxes_only:
        out = run_outbox_bench(config, services, OutboxBenchParams.preset(quick=quick), run_dir=run_dir, log=log)
        click.echo(out.closing_note)
        click.echo(f"outbox.json: {out.json_path}")


@bench.command("decode")
@click.option("--rounds", type=COUNT, default=200, show_default=True, help="interleaved rounds per page size")
@results_option
def bench_decode(rounds: int, results: Path) -> None:
    """A whole page decoded three ways, interleaved: the compiled path writing Message's slots at their
    offsets (raw CPython FFI), the compiled path setting them through PyO3's safe calls, and the
    Python path. Pure (a local key store, no node). Writes bench/decode.json; prints each path's time
    per page over the raw path's, with its 95% interval."""
    from lab.bench.decode_bench import DecodeParams, closing_lines, run_decode_bench
    from lab.results.run_folders import new_run_dir

    run_dir = new_run_dir(results)
    result = run_decode_bench(DecodeParams(rounds=rounds), run_dir, progress=lambda m: click.echo(m, err=True))
    for line in closing_lines(result):
        click.echo(line)
    click.echo(f"decode.json: {run_dir / 'bench' / 'decode.json'}")


@bench.command("load")
@home_option
@click.option("--quick/--full", default=False, help="quick (about two minutes) or full parameters")
@click.option("--concurrency", type=COUNT, default=None, help="plain client threads = Locust users")
@click.option("--processes", type=COUNT, default=None, help="Locust worker processes")
@click.option("--driver", type=click.Choice(list(DRIVER_MODES)), default="futures", show_default=True,
              help="how the Locust side runs store calls, as `lab load --driver` (threads: the native-thread "
                   "path, for comparison)")
@click.option("--profile", "profile", is_flag=True,
              help="instead of the comparisons: the chat profile's Locust worker(s) under py-spy, the loader's CPU "
                   "by layer against the chat goal (bench/profile-load/)")
@click.option("--profile-seconds", type=POSITIVE, default=None,
              help="--profile: the chat load's measured seconds (default: lab bench load's, shorter with --quick)")
@results_option
@services_options
@cluster_options
def bench_load(home: Path, quick: bool, concurrency: int | None, processes: int | None, driver: str, profile: bool,
               profile_seconds: float | None, results: Path, config: ClusterConfig, services: Any) -> None:
    """`lab load` against a plain driver client issuing the same store calls (max send and read
    throughput, ratio), then a send staircase at 50/75/90/105% of the max. Writes bench/load.json.
    --outbox / --hot-window / --client-gc: both sides' stores and processes (as for lab load).
    --profile: only the chat profile's load, its worker(s) under py-spy: flame graphs, top-frame
    tables and the loader's CPU by layer (bench/profile-load/)."""
    from lab.bench.load_generator import LoadBenchParams, run_load_bench

    changes = {k: v for k, v in (("concurrency", concurrency), ("processes", processes), ("driver", driver))
               if v is not None}
    log = lambda msg: click.echo(msg, err=True)  # noqa: E731
    if profile:
        from lab.bench.loader_profile import JSON_FILE, LoaderProfileParams, run_loader_profile

        prof_params = LoaderProfileParams.preset(quick=quick, seconds=profile_seconds)
        prof_params = dataclasses.replace(prof_params, load=dataclasses.replace(prof_params.load, **changes))
        prof = run_loader_profile(config, prof_params, results=results, services=services, log=log)
        click.echo(prof.closing_note)
        click.echo(f"{JSON_FILE}: {prof.out_dir / JSON_FILE}")
        return
    params = LoadBenchParams.preset(quick=quick)
    result = run_load_bench(config, dataclasses.replace(params, **changes), results=results, log=log,
                            services=services)
    click.echo(result.closing_note)
    click.echo(f"load.json: {result.json_path}")
