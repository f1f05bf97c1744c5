"""What the ``lab`` commands share: the cluster and services flags (each builds its config
object), ``--home``, ``--results``, durations, and the group that turns a LabError into one line.

Library errors become CLI errors here and only here (:class:`LabGroup`).
"""
from __future__ import annotations

import functools
import inspect
import os
import re
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from lab.cluster.config import load_config
from lab.errors import LabError, LabWarning
from lab.project import RESULTS_DIR

DEFAULT_HOME = Path(".lab")
SECONDS_PER_UNIT = {"h": 3600, "m": 60, "s": 1}
LAB_ERROR_EXIT_CODE = 2
INTERRUPTED_EXIT_CODE = 130  # 128 + SIGINT, what a shell reports for Ctrl-C

PORT = click.IntRange(1, 65535)
COUNT = click.IntRange(min=1)                      # users, processes, threads, lines, ...
SEED = click.IntRange(min=0)
POSITIVE = click.FloatRange(min=0, min_open=True)  # rates, seconds


_CLUSTER_FLAGS = [
    ("--contact-points", "contact_points", str, "comma-separated hosts (LAB_CONTACT_POINTS)"),
    ("--port", "port", PORT, "CQL port (LAB_PORT)"),
    ("--local-dc", "local_dc", str, "local datacenter (LAB_LOCAL_DC)"),
    ("--username", "username", str, "role name (LAB_USERNAME)"),
    ("--password", "password", str, "password; prefer LAB_PASSWORD (never printed)"),
    ("--tls-ca-file", "tls_ca_file", str, "CA certificate: enables TLS (LAB_TLS_CA_FILE)"),
    ("--tls-cert-file", "tls_cert_file", str, "client certificate (LAB_TLS_CERT_FILE)"),
    ("--tls-key-file", "tls_key_file", str, "client key (LAB_TLS_KEY_FILE)"),
    ("--keyspace", "keyspace", str, "keyspace (LAB_KEYSPACE)"),
    ("--replication-class", "replication_class", str, "SimpleStrategy | NetworkTopologyStrategy"),
    ("--replication-factor", "replication_factor", COUNT, "replication factor (LAB_REPLICATION_FACTOR)"),
    ("--read-consistency", "read_consistency", str, "e.g. LOCAL_QUORUM"),
    ("--write-consistency", "write_consistency", str, "e.g. LOCAL_QUORUM"),
    ("--admin", "admin", str, "auto | cassandra | scylla"),
    ("--dialect", "dialect", str, "server dialect: auto | cassandra | scylla (LAB_DIALECT)"),
    ("--tablets", "tablets", bool, "Scylla: the lab's keyspaces use tablets (default false) (LAB_TABLETS)"),
    ("--tcp-nodelay", "tcp_nodelay", bool, "TCP_NODELAY on the driver's sockets (default true) (LAB_TCP_NODELAY)"),
    ("--jmx-port", "jmx_port", PORT, "JMX port of external Cassandra nodes"),
    ("--rest-port", "rest_port", PORT, "Scylla REST API port"),
    ("--rest-addresses", "rest_addresses", str, "Scylla REST per node: NODE=HOST:PORT,... (LAB_REST_ADDRESSES)"),
    ("--rtt", "rtt_us", str, "round trip added by a latency proxy: 0 | 1ms | 2ms ... (LAB_RTT_US)"),
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


SERVICES_FLAGS = [
    ("--outbox", "outbox", str, "local | kafka (LAB_OUTBOX)"),
    ("--kafka-bootstrap-servers", "kafka_bootstrap_servers", str, "host:port,... (LAB_KAFKA_BOOTSTRAP_SERVERS)"),
    ("--kafka-security-protocol", "kafka_security_protocol", str, "PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL"),
    ("--hot-window", "hot_window", str, "off | redis: archiver mode's hot window (LAB_HOT_WINDOW)"),
    ("--redis-host", "redis_host", str, "Redis of the hot window (LAB_REDIS_HOST)"),
    ("--redis-port", "redis_port", PORT, "(LAB_REDIS_PORT)"),
    ("--client-gc", "client_gc", str, "freeze | default: this lab process's cyclic GC after set-up (LAB_CLIENT_GC)"),
]


def services_options(fn: Callable) -> Callable:
    """Add the outbox / hot-window flags; passes a built ``services`` (lab.cluster.services) to
    the command. Put it above ``cluster_options``: it reads the same ``--config`` file's
    ``[services]`` table. SASL / Redis passwords come from LAB_* variables or the file only."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from lab.cluster.services import load_services

        flags = {dest: kwargs.pop(dest) for _, dest, _, _ in SERVICES_FLAGS}
        toml_path = kwargs.get("config_file") or os.environ.get("LAB_CONFIG")
        kwargs["services"] = load_services(flags=flags, env=dict(os.environ), toml_path=toml_path)
        return fn(*args, **kwargs)

    for flag, dest, typ, help_text in reversed(SERVICES_FLAGS):
        wrapper = click.option(flag, dest, type=typ, default=None, help=help_text)(wrapper)
    return wrapper


def home_option(fn: Callable) -> Callable:
    return click.option("--home", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_HOME,
                        show_default=True, envvar="LAB_HOME",
                        help="folder for the jars, node data and state")(fn)


def results_option(fn: Callable) -> Callable:
    """``--results``: the folder run folders go in."""
    return click.option("--results", type=click.Path(file_okay=False, path_type=Path), default=RESULTS_DIR,
                        show_default=True, help="folder of the run folders")(fn)


def whole_help(cmd: click.Command) -> str:
    """A command's line in its group's list: its ``short_help``, else the first paragraph of its
    help, whole (click's own list cuts it at about 45 characters with "...")."""
    if cmd.short_help:
        return cmd.short_help
    return " ".join(inspect.cleandoc(cmd.help or "").split("\n\n")[0].split())


class LabGroup(click.Group):
    """Turns LabError into a one-line message and exit code 2, a LabWarning into one
    ``warning:`` line on stderr and Ctrl-C into one ``interrupted`` line and exit code 130 (no
    "Aborted!", no traceback); lists its commands with their whole descriptions."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, whole_help(cmd)) for name in self.list_commands(ctx)
                if (cmd := self.get_command(ctx, name)) is not None and not cmd.hidden]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        previous = warnings.showwarning

        def show(message: Any, category: type, *args: Any, **kwargs: Any) -> None:
            if issubclass(category, LabWarning):
                click.echo(f"warning: {message}", err=True)
            else:
                previous(message, category, *args, **kwargs)

        warnings.showwarning = show
        try:
            return super().invoke(ctx)
        except LabError as exc:
            click.echo(f"error: {type(exc).__name__}: {exc}", err=True)
            sys.exit(LAB_ERROR_EXIT_CODE)
        except KeyboardInterrupt:  # a command with more to say (lab calibrate, lab load) says it itself
            click.echo("interrupted", err=True)
            sys.exit(INTERRUPTED_EXIT_CODE)
        finally:
            warnings.showwarning = previous


class Duration(click.ParamType):
    """'60s', '2m', '1m30s' or a bare number of seconds, in seconds; more than 0 (or at
    least 0 with ``zero_ok``). Bad input is a usage error before anything starts."""

    name = "duration"

    def __init__(self, *, zero_ok: bool = False) -> None:
        self.zero_ok = zero_ok

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, int | float):
            seconds = float(value)
        else:
            text = str(value).strip()
            try:
                seconds = -parse_seconds(text[1:]) if text.startswith("-") else parse_seconds(text)
            except click.BadParameter as exc:
                self.fail(exc.message, param, ctx)
        if seconds < 0 or (seconds == 0 and not self.zero_ok):
            self.fail(f"{value!r} must be {'at least 0' if self.zero_ok else 'more than 0'} seconds", param, ctx)
        return seconds


def parse_seconds(value: str) -> float:
    """'60s', '2m', '1m30s' or a bare number of seconds."""
    text = str(value).strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    parts = re.findall(r"(\d+(?:\.\d+)?)([hms])", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise click.BadParameter(f"{value!r} is not a duration (e.g. 60s, 2m, 1m30s)")
    return sum(float(n) * SECONDS_PER_UNIT[u] for n, u in parts)
