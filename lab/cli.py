"""The ``lab`` command: a thin layer over the library (parse, build config, call, format).

Library errors become CLI errors here and only here.
"""
from __future__ import annotations

import functools
import json
import os
import sys
import time
from pathlib import Path
from typing import Any
from collections.abc import Callable

import click

from lab.project import RESULTS_DIR
from lab.cluster.config import ClusterConfig, load_config
from lab.errors import LabError

DEFAULT_HOME = Path(".lab")

_CLUSTER_FLAGS = [
    ("--contact-points", "contact_points", str, "comma-separated hosts (LAB_CONTACT_POINTS)"),
    ("--port", "port", int, "CQL port (LAB_PORT)"),
    ("--local-dc", "local_dc", str, "local datacenter (LAB_LOCAL_DC)"),
    ("--username", "username", str, "role name (LAB_USERNAME)"),
    ("--password", "password", str, "password; prefer LAB_PASSWORD (never printed)"),
    ("--tls-ca-file", "tls_ca_file", str, "CA certificate: enables TLS (LAB_TLS_CA_FILE)"),
    ("--tls-cert-file", "tls_cert_file", str, "client certificate (LAB_TLS_CERT_FILE)"),
    ("--tls-key-file", "tls_key_file", str, "client key (LAB_TLS_KEY_FILE)"),
    ("--keyspace", "keyspace", str, "keyspace (LAB_KEYSPACE)"),
    ("--replication-class", "replication_class", str, "SimpleStrategy | NetworkTopologyStrategy"),
    ("--replication-factor", "replication_factor", int, "replication factor (LAB_REPLICATION_FACTOR)"),
    ("--read-consistency", "read_consistency", str, "e.g. LOCAL_QUORUM"),
    ("--write-consistency", "write_consistency", str, "e.g. LOCAL_QUORUM"),
    ("--admin", "admin", str, "auto | cassandra | scylla"),
    ("--dialect", "dialect", str, "server dialect: auto | cassandra | scylla (LAB_DIALECT)"),
    ("--tablets", "tablets", bool, "Scylla: the lab's keyspaces use tablets (default false) (LAB_TABLETS)"),
    ("--jmx-port", "jmx_port", int, "JMX port of external Cassandra nodes"),
    ("--rest-port", "rest_port", int, "Scylla REST API port"),
    ("--rest-addresses", "rest_addresses", str, "Scylla REST per node: NODE=HOST:PORT,... (LAB_REST_ADDRESSES)"),
]


def cluster_options(fn: Callable) -> Callable:
    """Add the cluster flags and ``--config``; passes a built ``config`` to the command."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        flags = {dest: kwargs.pop(dest) for _, dest, _, _ in _CLUSTER_FLAGS}
        toml_path = kwargs.pop("config_file")
        home = kwargs.get("home") or DEFAULT_HOME
        env = dict(os.environ)
        if toml_path is None and env.get("LAB_CONFIG"):
            toml_path = env["LAB_CONFIG"]
        flags.setdefault("lab_home", None)
        flags["lab_home"] = str(home)
        kwargs["config"] = load_config(flags=flags, env=env, toml_path=toml_path)
        return fn(*args, **kwargs)

    for flag, dest, typ, help_text in reversed(_CLUSTER_FLAGS):
        wrapper = click.option(flag, dest, type=typ, default=None, help=help_text)(wrapper)
    wrapper = click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
                           help="TOML file with cluster settings (LAB_CONFIG)")(wrapper)
    return wrapper


def home_option(fn: Callable) -> Callable:
    return click.option("--home", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_HOME,
                        show_default=True, envvar="LAB_HOME",
                        help="folder for the jars, node data and state")(fn)


class LabGroup(click.Group):
    """Turns LabError into a one-line message and exit code 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except LabError as exc:
            click.echo(f"error: {type(exc).__name__}: {exc}", err=True)
            sys.exit(2)


@click.group(cls=LabGroup)
@click.version_option(package_name="message-store-lab")
def main() -> None:
    """Message-store capacity lab: a real CQL node, the MessageStore, load and calibration."""


# ---- node --------------------------------------------------------------------------
@main.group(cls=LabGroup)
def node() -> None:
    """The embedded Apache Cassandra 5.0 node(s) the lab starts and owns."""


def _embedded(home: Path, **kw: Any):
    from lab.cluster.embedded.node import EmbeddedCluster, NodeOptions

    return EmbeddedCluster(NodeOptions(home=home, **kw))


@node.command("start")
@home_option
@click.option("--nodes", type=click.Choice(["1", "3"]), default="1", show_default=True)
@click.option("--heap", default="1G", show_default=True, help="JVM heap per node")
@click.option("--auth/--no-auth", default=False, help="PasswordAuthenticator (role cassandra/cassandra)")
@click.option("--tls-keystore", type=click.Path(dir_okay=False), default=None, help="PKCS12/JKS keystore: TLS on the CQL port")
@click.option("--tls-keystore-password", default=None, envvar="LAB_TLS_KEYSTORE_PASSWORD")
@click.option("--timeout", type=float, default=180.0, show_default=True, help="seconds to wait for CQL")
@click.option("--address", default="127.0.0.1", show_default=True, envvar="LAB_NODE_ADDRESS",
              help="first node's loopback address (.2, .3 follow)")
@click.option("--jmx-port", type=int, default=7199, show_default=True, envvar="LAB_NODE_JMX_PORT",
              help="first node's JMX port (+1 per node)")
@click.option("--tls", "tls", is_flag=True, help="TLS on the CQL port with certificates made in <home>/tls")
@click.option("--secure", is_flag=True,
              help="--auth --tls, plus a login role (--role) whose password is LAB_PASSWORD")
@click.option("--role", default="lab", show_default=True, help="with --secure: the lab's login role")
def node_start(home: Path, nodes: str, heap: str, auth: bool, tls_keystore: str | None,
               tls_keystore_password: str | None, timeout: float, address: str, jmx_port: int,
               tls: bool, secure: bool, role: str) -> None:
    """Resolve the jars (once), start the node(s), wait for CQL, print contact points."""
    from lab.cluster.embedded.node import EmbeddedCluster, NodeOptions
    from lab.cluster.embedded import security

    options = NodeOptions(home=home, nodes=int(nodes), heap=heap, auth=auth, first_address=address,
                          jmx_port_base=jmx_port, tls_keystore=Path(tls_keystore) if tls_keystore else None,
                          tls_keystore_password=tls_keystore_password, timeout_seconds=timeout)
    ca_file = secure_node = None
    t0 = time.monotonic()
    if secure:
        secure_node = security.start_secure(options, role=role,
                                            password=os.environ.get(security.PASSWORD_ENV, ""))
        state, ca_file = secure_node.state, secure_node.ca_file
    else:
        if tls and tls_keystore is None:
            options, material = security.with_local_tls(options)
            ca_file = material.ca_file
        state = EmbeddedCluster(options).start()
    if state.reused:
        click.echo(f"reusing running Cassandra {state.version} ({len(state.nodes)} node(s), "
                   f"pids {', '.join(str(n.pid) for n in state.nodes)})")
    else:
        click.echo(f"started Cassandra {state.version}: {len(state.nodes)} node(s) in "
                   f"{time.monotonic() - t0:.1f}s (jar resolution {state.resolve_seconds:.1f}s, "
                   f"JVM start to CQL {state.startup_seconds:.1f}s)")
    click.echo(f"contact points: {','.join(state.contact_points)}  port: {state.nodes[0].native_port}")
    if ca_file is not None:
        click.echo(f"TLS: CA certificate {ca_file} (--tls-ca-file / LAB_TLS_CA_FILE)")
    if secure_node is not None:
        click.echo(f"auth: role {secure_node.role!r}, password from ${security.PASSWORD_ENV} (not shown); "
                   f"granted keyspace {secure_node.keyspace!r} and may create keyspaces")
        click.echo(f"connect: LAB_CONTACT_POINTS={','.join(state.contact_points)} "
                   f"LAB_USERNAME={secure_node.role} LAB_TLS_CA_FILE={ca_file} "
                   f"LAB_PASSWORD=... lab info --home {home}")
    elif state.auth:
        click.echo("auth: PasswordAuthenticator; default superuser 'cassandra' (--secure creates a lab role)")


@node.command("status")
@home_option
def node_status(home: Path) -> None:
    """Show the recorded nodes and whether each is running."""
    cluster = _embedded(home)
    state = cluster.read_state()
    if state is None:
        click.echo("no embedded node recorded (run `lab node start`)")
        sys.exit(1)
    alive = {n.pid for n in cluster.running()}
    for n in state.nodes:
        status = "running" if n.pid in alive else "stopped"
        click.echo(f"{n.name}  {n.address}:{n.native_port}  jmx {n.jmx_port}  pid {n.pid}  {status}  "
                   f"start {n.startup_seconds:.1f}s  {n.directory}")
    if len(alive) != len(state.nodes):
        sys.exit(1)


@node.command("logs")
@home_option
@click.option("--lines", "-n", type=int, default=40, show_default=True)
@click.option("--node", "name", default=None, help="node name (default: all)")
def node_logs(home: Path, lines: int, name: str | None) -> None:
    """Print the tail of each node's system.log."""
    cluster = _embedded(home)
    state = cluster.read_state()
    if state is None:
        click.echo("no embedded node recorded")
        sys.exit(1)
    for n in state.nodes:
        if name and n.name != name:
            continue
        click.echo(f"==> {n.name} {n.log_path}")
        click.echo(cluster.log_tail(n, lines))


@node.command("stop")
@home_option
@click.option("--all", "all_homes", is_flag=True, help="also clusters recorded in sub-folders of --home (tests)")
def node_stop(home: Path, all_homes: bool) -> None:
    """Stop only the JVMs the lab started, by their recorded PIDs."""
    homes = [home]
    if all_homes and home.exists():
        homes += sorted({p.parent.parent for p in home.glob("**/nodes/cluster.json")} - {home})
    pids = [pid for h in homes for pid in _embedded(h).stop()]
    click.echo(f"stopped pids {', '.join(map(str, pids))}" if pids else "no running embedded node")


@node.command("jars")
@home_option
def node_jars(home: Path) -> None:
    """Resolve cassandra-all and its dependencies with Maven (once; reused after)."""
    cluster = _embedded(home)
    seconds = cluster.resolve_jars()
    if seconds:
        click.echo(f"resolved Cassandra {cluster.options.version} jars in {seconds:.1f}s into {cluster.lib_dir}")
    else:
        click.echo(f"Cassandra {cluster.options.version} jars present in {cluster.lib_dir}")


@node.command("wipe")
@home_option
def node_wipe(home: Path) -> None:
    """Delete the node data folders (refuses while running)."""
    _embedded(home).wipe()
    click.echo(f"wiped {home / 'nodes'}")


# ---- cluster info ------------------------------------------------------------------
@main.command("info")
@home_option
@cluster_options
def info(home: Path, config: ClusterConfig) -> None:
    """Connect and print the server, its version and the admin adapter chosen."""
    from lab.cluster.admin import admin_for
    from lab.cluster.connection import connect

    with connect(config) as conn:
        admin = admin_for(config, conn)
        click.echo(json.dumps({"server": conn.server_kind(), "version": conn.server_version(),
                               "dialect": conn.dialect.name, "admin": admin.name,
                               "hosts": [str(h.address) for h in conn.hosts()],
                               "config": config.redacted()}, indent=2))


def _preflight(config: ClusterConfig) -> Any:
    from lab.cluster.preflight import run_preflight
    from lab.constants import load_constants

    return run_preflight(config, in_list_limit=load_constants().batch_read_in_list_limit)


@main.command("preflight")
@home_option
@click.option("--json", "as_json", is_flag=True, help="print the checks as JSON")
@cluster_options
def preflight(home: Path, as_json: bool, config: ClusterConfig) -> None:
    """Check, before a long run, what would stop it: server and version, nodes and shards,
    tablets, LWT, REST/JMX on every node, IN-list limit, replication, auth/TLS, free disk.
    Prints a fix for each problem; exits 1 when a check fails."""
    report = _preflight(config)
    click.echo(json.dumps(report.to_json(), indent=2) if as_json else report.to_text(), nl=as_json)
    if not report.ok:
        sys.exit(1)


def _parse_overrides(items: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """``NOTEBOOK.KEY=VALUE`` (VALUE as JSON when it parses, else a string) -> nested dict."""
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        target, sep, raw = item.partition("=")
        notebook, dot, key = target.partition(".")
        if not sep or not dot or not notebook or not key:
            raise click.BadParameter(f"{item!r}: expected NOTEBOOK.KEY=VALUE, e.g. b_row.rows=200")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        out.setdefault(notebook, {})[key] = value
    return out


@main.command("calibrate")
@home_option
@click.option("--quick/--full", default=True, help="quick (minutes) or full (the notebooks' own) parameters")
@click.option("--notebooks", "notebooks", default=None, metavar="NAMES",
              help="comma-separated subset of the suite, in suite order; 'none' = environment + round trip only")
@click.option("-p", "--param", "params", multiple=True, metavar="NOTEBOOK.KEY=VALUE",
              help="override one notebook parameter (VALUE is JSON, else a string); repeatable")
@click.option("--propose", is_flag=True, help="also write appendix_b.diff (the proposed change; never applied)")
@click.option("--propose-from", "propose_from", type=click.Path(file_okay=False, exists=True, path_type=Path),
              default=None, metavar="RUN_DIR", help="only write appendix_b.diff for an existing run; measure nothing")
@click.option("--keep-going", is_flag=True, help="run the remaining notebooks after one fails (the run still fails)")
@click.option("--cell-timeout", type=float, default=None, help="seconds per notebook cell (default: none)")
@click.option("--progress/--no-progress", default=True, show_default=True, help="progress bar on stderr")
@click.option("--preflight/--no-preflight", "check_first", default=True, show_default=True,
              help="run `lab preflight` first and stop when a check fails")
@click.option("--results", type=click.Path(file_okay=False, path_type=Path), default=RESULTS_DIR,
              show_default=True)
@cluster_options
def calibrate(home: Path, quick: bool, notebooks: str | None, params: tuple[str, ...], propose: bool,
              propose_from: Path | None, keep_going: bool, cell_timeout: float | None, progress: bool,
              check_first: bool, results: Path, config: ClusterConfig) -> None:
    """Run the headless calibration suite and print where the report is.

    Writes results/<run-id>/: the executed notebooks and their HTML, figures, calibration.json
    (constants.<name>: current, measured, recommended, unit, confidence, evidence) and
    report.html. A failed notebook fails the run (exit 2) naming the notebook and the cell;
    the partial results stay in the run folder."""
    from lab.calibration.run import CalibrationOptions, propose_from as _propose_from, run_calibration

    if propose_from is not None:
        diff = _propose_from(propose_from)
        click.echo(diff.read_text())
        click.echo(f"proposal: {diff}")
        return
    if check_first:
        report = _preflight(config)
        if not report.ok:
            click.echo(report.to_text(), err=True, nl=False)
            click.echo("error: preflight failed: fix the checks above (or --no-preflight)", err=True)
            sys.exit(2)
    selected = None
    if notebooks is not None:
        selected = () if notebooks.strip() == "none" else tuple(n.strip() for n in notebooks.split(",") if n.strip())
    options = CalibrationOptions(quick=quick, results=results, notebooks=selected, overrides=_parse_overrides(params),
                                 propose=propose, keep_going=keep_going, progress=progress,
                                 cell_timeout_seconds=cell_timeout)
    result = run_calibration(config, options)
    cal = result.calibration
    measured = [n for n, c in cal["constants"].items() if c.get("measured") is not None]
    changed = [n for n, c in cal["constants"].items() if c.get("changed")]
    click.echo(f"run {result.run_dir.name}: {cal['status']} in {cal['wall_seconds']:.0f} s; "
               f"measured {', '.join(measured) or 'no constant'}; recommended changes: {', '.join(changed) or 'none'}")
    click.echo(f"calibration.json: {result.calibration_path}")
    if result.proposal_path is not None:
        click.echo(f"proposal: {result.proposal_path}")
    click.echo(f"report: {result.report_path.resolve()}")


@main.command("compare")
@click.argument("run_a", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.argument("run_b", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--results", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="where compare-<a>-<b>/ goes (default: the folder holding RUN_A)")
def compare(run_a: Path, run_b: Path, results: Path | None) -> None:
    """Two runs side by side: constants, load operations, notebook latency samples.

    Latencies are tested with a two-sided Mann-Whitney U test on samples (Holm-corrected);
    prints the text table and writes compare-<a>-<b>/index.html."""
    from lab.results.compare import compare_runs, to_text, write_comparison

    cmp = write_comparison(compare_runs(run_a, run_b), results or run_a.resolve().parent)
    click.echo(to_text(cmp), nl=False)
    click.echo(f"html: {cmp.html_path.resolve()}")


def _seconds(value: str) -> float:
    """'60s', '2m', '1m30s' or a bare number of seconds."""
    import re

    text = str(value).strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    parts = re.findall(r"(\d+(?:\.\d+)?)([hms])", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise click.BadParameter(f"{value!r} is not a duration (e.g. 60s, 2m, 1m30s)")
    return sum(float(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts)


@main.command("load")
@home_option
@click.option("--profile", default="chat", show_default=True, help="load profile (lab/load/profiles.toml)")
@click.option("--rate", type=float, default=None, help="fixed rate: total store calls per second (open loop)")
@click.option("--users", type=int, default=None, help="users (closed loop without --rate)")
@click.option("--duration", default="60s", show_default=True, help="measured time, e.g. 60s, 2m")
@click.option("--warmup", default="0s", show_default=True, help="unmeasured time before it")
@click.option("--processes", type=int, default=1, show_default=True, help="Locust worker processes (one per core)")
@click.option("--staircase", "staircase_max", type=float, default=None,
              help="fixed-rate steps at 50/75/90/105% of this measured maximum rate")
@click.option("--step", "step", default="20s", show_default=True, help="length of each staircase step")
@click.option("--seed-size", type=click.Choice(["tiny", "small", "standard"]), default="standard", show_default=True,
              help="conversations each worker seeds before the run")
@click.option("--driver", "driver_mode", type=click.Choice(["threads", "gevent"]), default="threads",
              show_default=True, help="threads: store calls in native threads of unpatched Locust workers "
              "(measured best); gevent: on the gevent loop of patched workers (asyncore reactor)")
@click.option("--reactor", default=None, help="driver reactor in the Locust processes (default: lab.reactors)")
@click.option("--no-audit", is_flag=True, help="skip reading back the acknowledged sends")
@click.option("--results", type=click.Path(file_okay=False, path_type=Path), default=RESULTS_DIR,
              show_default=True)
@cluster_options
def load(home: Path, profile: str, rate: float | None, users: int | None, duration: str, warmup: str,
         processes: int, staircase_max: float | None, step: str, seed_size: str, driver_mode: str,
         reactor: str | None, no_audit: bool, results: Path, config: ClusterConfig) -> None:
    """Run the Locust users headless against the cluster; write results/<run-id>/load/.

    Closed loop with --users N, fixed rate with --rate R (latency corrected for coordinated
    omission beside service time), or a staircase with --staircase MAX. Ends with the audit:
    every acknowledged send read back exactly once (lost and duplicates must be 0)."""
    from lab.load.runner import LoadOptions, run_load

    if rate is None and users is None and staircase_max is None:
        raise click.UsageError("give --rate R, --users N or --staircase MAX")
    options = LoadOptions(profile=profile, rate=rate, users=users, duration_seconds=_seconds(duration),
                          warmup_seconds=_seconds(warmup), processes=processes, staircase_max=staircase_max,
                          step_seconds=_seconds(step), seed_size=seed_size, reactor=reactor,
                          native_threads=driver_mode == "threads", audit=not no_audit, results=results)
    result = run_load(config, options)
    s = result.summary
    click.echo(f"{s['mode']} {s['profile']}: {s['users']} users, {s['processes']} process(es); "
               f"achieved {s['achieved_rate']} calls/s" + (f" of {s['requested_rate']} requested"
                                                            if s['requested_rate'] else ""))
    for op, o in s["operations"].items():
        lat = o.get("corrected_us") or o["service_us"]
        click.echo(f"  {op:<20} {o['count']:>8} calls {o['errors']:>5} errors  p50 {lat['p50']} "
                   f"p99 {lat['p99']} p999 {lat['p999']} max {lat['max']} us")
    for st in s.get("steps", []):
        click.echo(f"  step {st['requested_rate']:>9.1f}/s -> {st['achieved_rate']:>9.1f}/s  "
                   f"p99 {st['corrected_us']['p99']} us (service {st['service_us']['p99']} us)")
    if s.get("loadgen_cpu"):
        click.echo(f"  load generator CPU: {s['loadgen_cpu'].get('mean_percent_of_one_core')}% of one core")
    audit = s.get("audit")
    if audit is not None:
        click.echo(f"  audit: {audit['acked']} acked sends, {audit['found']} found, lost {audit['lost']}, "
                   f"duplicates {audit['duplicates']}, replay mismatches {audit['replay_mismatches']}")
    click.echo(f"summary: {result.load_dir / 'summary.json'}")
    if audit is not None and not audit["ok"]:
        sys.exit(1)


@main.command("jupyter", context_settings={"ignore_unknown_options": True})
@home_option
@click.option("--ip", default="127.0.0.1", show_default=True, help="address JupyterLab listens on")
@click.option("--port", "jupyter_port", type=int, default=None, help="port (default: 8888 or the next free one)")
@click.option("--browser/--no-browser", default=False, show_default=True, help="open a browser")
@click.argument("jupyter_args", nargs=-1, type=click.UNPROCESSED)
def jupyter(home: Path, ip: str, jupyter_port: int | None, browser: bool, jupyter_args: tuple[str, ...]) -> None:
    """JupyterLab on notebooks/ with the project's kernel (extra arguments go to jupyter lab).

    Cluster settings reach the notebooks through LAB_* variables (or their `cluster` parameter);
    --home is exported as LAB_HOME so they find the embedded node."""
    from lab.calibration.notebooks import ensure_kernel, jupyter_command

    ensure_kernel()
    argv, env = jupyter_command(home=home, ip=ip, port=jupyter_port, browser=browser, extra=jupyter_args)
    click.echo(f"JupyterLab on notebooks/ (kernel python3 = {sys.executable}); stop with Ctrl-C")
    os.execvpe(argv[0], argv, env)  # JupyterLab replaces this process: Ctrl-C and signals reach it


@main.group(cls=LabGroup)
def bench() -> None:
    """Benchmarks: ratios measured on one node in one run (results/<run-id>/bench/)."""


@bench.command("store")
@home_option
@click.option("--quick/--full", default=False, help="quick (under a minute) or full parameters")
@click.option("--results", type=click.Path(file_okay=False, path_type=Path), default=RESULTS_DIR,
              show_default=True)
@cluster_options
def bench_store(home: Path, quick: bool, results: Path, config: ClusterConfig) -> None:
    """The store against its bare CQL floors: full write path vs bare LWT inserts, latest history
    page vs a bare SELECT, grouped vs naive per-message reads (S-1 shapes). Writes
    bench/store.json, store.csv and store.png; prints the closing note (the ratios)."""
    from lab.bench.store import BenchParams, run_bench

    result = run_bench(config, BenchParams.preset(quick=quick), results=results,
                       log=lambda msg: click.echo(msg, err=True))
    click.echo(result.closing_note)
    click.echo(f"store.json: {result.json_path}")


@bench.command("load")
@home_option
@click.option("--quick/--full", default=False, help="quick (about two minutes) or full parameters")
@click.option("--concurrency", type=int, default=None, help="plain client threads = Locust users")
@click.option("--processes", type=int, default=None, help="Locust worker processes")
@click.option("--results", type=click.Path(file_okay=False, path_type=Path), default=RESULTS_DIR,
              show_default=True)
@cluster_options
def bench_load(home: Path, quick: bool, concurrency: int | None, processes: int | None, results: Path,
               config: ClusterConfig) -> None:
    """`lab load` against a plain driver client issuing the same store calls (max send and read
    throughput, ratio), then a send staircase at 50/75/90/105% of the max. Writes bench/load.json."""
    import dataclasses

    from lab.bench.load import LoadBenchParams, run_load_bench

    params = LoadBenchParams.preset(quick=quick)
    changes = {k: v for k, v in (("concurrency", concurrency), ("processes", processes)) if v is not None}
    result = run_load_bench(config, dataclasses.replace(params, **changes), results=results,
                            log=lambda msg: click.echo(msg, err=True))
    click.echo(result.closing_note)
    click.echo(f"load.json: {result.json_path}")


@main.command("soak")
@home_option
@click.option("--duration", default="60s", show_default=True, help="how long the load runs, e.g. 90s, 10m, 2h")
@click.option("--threads", type=int, default=8, show_default=True, help="worker threads driving the store")
@click.option("--conversations", type=int, default=16, show_default=True, help="conversations of the soak tenant")
@click.option("--audit-every", "audit_every", default="30s", show_default=True,
              help="interval of the audits (every acked send readable exactly once)")
@click.option("--max-operations", type=int, default=None, help="stop after this many operations as well")
@click.option("--seed", type=int, default=None, help="random seed of the operation mix")
@click.option("--results", type=click.Path(file_okay=False, path_type=Path), default=RESULTS_DIR,
              show_default=True)
@cluster_options
def soak(home: Path, duration: str, threads: int, conversations: int, audit_every: str, max_operations: int | None,
         seed: int | None, results: Path, config: ClusterConfig) -> None:
    """A sustained mixed load (send, retry, history, batch read, react, recall) with periodic audits.

    Ends with the totals (operations and errors per kind, acked, lost, duplicated) in
    results/<run-id>/soak/summary.json; exits 1 when anything acked was lost or duplicated."""
    from lab.load.soak import SoakOptions, run_soak

    options = SoakOptions(duration_seconds=_seconds(duration), threads=threads, conversations=conversations,
                          audit_interval_seconds=_seconds(audit_every), max_operations=max_operations, seed=seed,
                          results=results)

    def progress(audit: dict[str, Any]) -> None:
        what = "final audit" if audit["final"] else "audit"
        if "error" in audit:
            click.echo(f"  {audit['at_seconds']:>8.1f}s {what} failed: {audit['error']}")
        else:
            click.echo(f"  {audit['at_seconds']:>8.1f}s {what}: {audit['acked']} acked, lost {audit['lost']}, "
                       f"duplicated {audit['duplicated']}, recalls lost {audit['recalls_lost']} "
                       f"({audit['seconds']:.1f}s)")

    s = run_soak(config, options, progress=progress).summary
    for op, o in s["operations"].items():
        click.echo(f"  {op:<11} {o['ok']:>9} ok {o['errors']:>6} errors")
    click.echo(f"soak {s['run_id']}: {s['operations_total']} operations in {s['elapsed_seconds']}s, "
               f"{s['errors_total']} errors; acked {s['acked']}, lost {s['lost']}, duplicated {s['duplicated']}, "
               f"replay mismatches {s['replay_mismatches']}, recalls lost {s['recalls_lost']}")
    click.echo(f"summary: {Path(results) / s['run_id'] / 'soak' / 'summary.json'}")
    if not s["ok"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
