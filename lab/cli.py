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
from typing import Any, Callable

import click

from .config import ClusterConfig, load_config
from .errors import LabError

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
    ("--jmx-port", "jmx_port", int, "JMX port of external Cassandra nodes"),
    ("--rest-port", "rest_port", int, "Scylla REST API port"),
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
    from .node import EmbeddedCluster, NodeOptions

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
    from .node import EmbeddedCluster, NodeOptions
    from . import security

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
                   f"it owns keyspace {secure_node.keyspace!r} and may create others")
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
    from .admin import admin_for
    from .connection import connect

    with connect(config) as conn:
        admin = admin_for(config, conn)
        click.echo(json.dumps({"server": conn.server_kind(), "version": conn.server_version(),
                               "admin": admin.name, "hosts": [str(h.address) for h in conn.hosts()],
                               "config": config.redacted()}, indent=2))


@main.command("calibrate")
@home_option
@click.option("--quick/--full", default=True, help="quick (minutes) or full parameters")
@click.option("--results", type=click.Path(file_okay=False, path_type=Path), default=Path("results"),
              show_default=True)
@cluster_options
def calibrate(home: Path, quick: bool, results: Path, config: ClusterConfig) -> None:
    """Run the headless calibration suite and print where the report is."""
    from .calibrate import run_calibration

    result = run_calibration(config, quick=quick, results=results)
    click.echo(f"calibration.json: {result.run_dir / 'calibration.json'}")
    click.echo(f"report: {result.report_path.resolve()}")


if __name__ == "__main__":
    main()
