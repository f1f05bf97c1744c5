"""``lab node``: the embedded Cassandra node(s), the Kafka broker and Redis the lab starts and owns."""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import click

from lab.cli.options import COUNT, PORT, POSITIVE, LabGroup, home_option
from lab.measure import Stopwatch


@click.group(cls=LabGroup)
def node() -> None:
    """The embedded Apache Cassandra 5.0 node(s) the lab starts and owns."""


def _embedded(home: Path, **kw: Any):
    from lab.cluster.embedded.node import EmbeddedCluster, NodeOptions

    return EmbeddedCluster(NodeOptions(home=home, **kw))


def _heap_size(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    if not re.fullmatch(r"[1-9]\d*[KMGkmg]", value):
        raise click.BadParameter(f"{value!r} is not a JVM heap size (e.g. 512M, 2G)")
    return value


@node.command("start")
@home_option
@click.option("--nodes", type=click.Choice(["1", "3"]), default="1", show_default=True)
@click.option("--heap", default="1G", show_default=True, callback=_heap_size, help="JVM heap per node (e.g. 512M, 2G)")
@click.option("--auth/--no-auth", default=False, help="PasswordAuthenticator (role cassandra/cassandra)")
@click.option("--tls-keystore", type=click.Path(dir_okay=False), default=None, help="PKCS12/JKS keystore: TLS on the CQL port")
@click.option("--tls-keystore-password", default=None, envvar="LAB_TLS_KEYSTORE_PASSWORD")
@click.option("--timeout", type=POSITIVE, default=180.0, show_default=True, help="seconds to wait for CQL")
@click.option("--address", default="127.0.0.1", show_default=True, envvar="LAB_NODE_ADDRESS",
              help="first node's loopback address (.2, .3 follow)")
@click.option("--jmx-port", type=PORT, default=7199, show_default=True, envvar="LAB_NODE_JMX_PORT",
              help="first node's JMX port (+1 per node)")
@click.option("--tls", "tls", is_flag=True, help="TLS on the CQL port with certificates made in <home>/tls")
@click.option("--secure", is_flag=True,
              help="--auth --tls, plus a login role (--role) whose password is LAB_PASSWORD")
@click.option("--role", default="lab", show_default=True, help="with --secure: the lab's login role")
@click.option("--broker/--no-broker", default=True, show_default=True, envvar="LAB_NODE_BROKER",
              help="also the embedded Kafka broker (the Kafka outbox's log)")
@click.option("--redis/--no-redis", "with_redis", default=True, show_default=True, envvar="LAB_NODE_REDIS",
              help="also the embedded Redis (archiver mode's hot window)")
@click.option("--throwaway", is_flag=True,
              help="a node for tests (make test): schema changes stay in the commit log, not flushed at once "
                   "(keyspaces made ~4x faster), and no fsync; a stop keeps them, a SIGKILL loses the newest")
def node_start(home: Path, nodes: str, heap: str, auth: bool, tls_keystore: str | None,
               tls_keystore_password: str | None, timeout: float, address: str, jmx_port: int,
               tls: bool, secure: bool, role: str, broker: bool, with_redis: bool, throwaway: bool) -> None:
    """Resolve the jars (once), start the node(s), wait for CQL, print contact points; then the
    Kafka broker and Redis beside it (--no-broker / --no-redis skip them)."""
    from lab.cluster.embedded.node import EmbeddedCluster, NodeOptions
    from lab.cluster.embedded import security

    options = NodeOptions(home=home, nodes=int(nodes), heap=heap, auth=auth, first_address=address,
                          jmx_port_base=jmx_port, tls_keystore=Path(tls_keystore) if tls_keystore else None,
                          tls_keystore_password=tls_keystore_password, timeout_seconds=timeout, throwaway=throwaway)
    ca_file = secure_node = None
    watch = Stopwatch()
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
                   f"{watch.seconds():.1f}s (jar resolution {state.resolve_seconds:.1f}s, "
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
    _start_sidecars(home, broker=broker, redis=with_redis)


def _start_sidecars(home: Path, *, broker: bool, redis: bool) -> None:
    from lab.cluster.embedded.sidecars import start_sidecars

    kafka, rds = start_sidecars(home, broker=broker, redis=redis)
    if kafka is not None:
        how = "reusing running" if kafka.reused else f"started in {kafka.startup_seconds:.1f}s (jar resolution " \
              f"{kafka.resolve_seconds:.1f}s, format {kafka.format_seconds:.1f}s):"
        click.echo(f"Kafka {kafka.version} broker {how} bootstrap {kafka.bootstrap_servers}  pid {kafka.pid} "
                   "(LAB_OUTBOX=kafka selects the Kafka outbox)")
    if rds is not None:
        how = "reusing running" if rds.reused else f"started in {rds.startup_seconds:.2f}s:"
        click.echo(f"Redis {rds.version} {how} {rds.address}:{rds.port}  pid {rds.pid} "
                   "(LAB_HOT_WINDOW=redis: archiver mode's hot window)")


@node.command("status")
@home_option
def node_status(home: Path) -> None:
    """Show the recorded nodes, broker and Redis, and whether each is running."""
    from lab.cluster.embedded.sidecars import sidecar_status

    cluster = _embedded(home)
    state = cluster.read_state()
    sidecars = sidecar_status(home)
    if state is None:
        click.echo("no embedded node recorded (run `lab node start`)")
    alive = {n.pid for n in cluster.running()}
    for n in state.nodes if state else ():
        status = "running" if n.pid in alive else "stopped"
        click.echo(f"{n.name}  {n.address}:{n.native_port}  jmx {n.jmx_port}  pid {n.pid}  {status}  "
                   f"start {n.startup_seconds:.1f}s  {n.directory}")
    for sc in sidecars:
        click.echo(f"{sc.name}  {sc.endpoint}  {sc.version}  pid {sc.pid}  {'running' if sc.running else 'stopped'}  "
                   f"start {sc.startup_seconds:.1f}s  {sc.directory}")
    if state is None or len(alive) != len(state.nodes) or not all(sc.running for sc in sidecars):
        sys.exit(1)


@node.command("logs")
@home_option
@click.option("--lines", "-n", type=COUNT, default=40, show_default=True)
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
    """Stop only the processes the lab started (nodes, broker, Redis), by their recorded PIDs."""
    from lab.cluster.embedded.sidecars import stop_sidecars

    homes = [home]
    if all_homes and home.exists():
        homes += sorted({p.parent.parent for p in home.glob("**/nodes/cluster.json")} - {home})
    pids = [pid for h in homes for pid in _embedded(h).stop()] + stop_sidecars(home, nested=all_homes)
    click.echo(f"stopped pids {', '.join(map(str, pids))}" if pids else "no running embedded node")


@node.command("jars")
@home_option
def node_jars(home: Path) -> None:
    """Resolve cassandra-all and kafka_2.13 with their dependencies with Maven (once; reused after)."""
    from lab.cluster.embedded.kafka_broker import BrokerOptions, EmbeddedBroker

    cluster = _embedded(home)
    seconds = cluster.resolve_jars()
    if seconds:
        click.echo(f"resolved Cassandra {cluster.options.version} jars in {seconds:.1f}s into {cluster.lib_dir}")
    else:
        click.echo(f"Cassandra {cluster.options.version} jars present in {cluster.lib_dir}")
    broker = EmbeddedBroker(BrokerOptions(home=home))
    seconds = broker.resolve_jars()
    click.echo(f"Kafka {broker.options.version} jars " + (f"resolved in {seconds:.1f}s into {broker.lib_dir}"
                                                           if seconds else f"present in {broker.lib_dir}"))


@node.command("wipe")
@home_option
def node_wipe(home: Path) -> None:
    """Delete the node data folders (refuses while running)."""
    _embedded(home).wipe()
    click.echo(f"wiped {home / 'nodes'}")
