"""``lab info`` and ``lab preflight``: what the cluster in front of the lab is, and whether a long
run would get through on it."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from lab.cli.options import cluster_options, home_option
from lab.cluster.config import ClusterConfig


@click.command("info")
@home_option
@click.option("--json", "as_json", is_flag=True, help="print everything as JSON, every cluster setting included")
@cluster_options
def info(home: Path, as_json: bool, config: ClusterConfig) -> None:
    """Connect and print the server, its version, its nodes and the admin adapter chosen (--json: every setting)."""
    from lab.cluster.admin import admin_for
    from lab.cluster.connection import connect

    with connect(config) as conn:
        admin = admin_for(config, conn)
        data = {"server": conn.server_kind(), "version": conn.server_version(), "dialect": conn.dialect.name,
                "admin": admin.name, "hosts": [str(h.address) for h in conn.hosts()], "config": config.redacted()}
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    for line in info_lines(data):
        click.echo(line)


def info_lines(data: dict[str, Any]) -> list[str]:
    """``lab info`` in three lines: the server and its nodes, the lab's keyspace, how it connects."""
    c = data["config"]
    hosts = data["hosts"]
    auth = f"user {c['username']}" if c.get("username") else "no credentials"
    return [f"{data['server']} {data['version']} at {','.join(c['contact_points'])}:{c['port']}: {len(hosts)} "
            f"node{'s' if len(hosts) != 1 else ''} ({', '.join(hosts)}); dialect {data['dialect']}, "
            f"admin {data['admin']}",
            f"keyspace {c['keyspace']} ({c['replication_class']}, RF {c['replication_factor']}); consistency "
            f"{c['read_consistency']} reads, {c['write_consistency']} writes; {auth}, "
            f"TLS {'on' if c.get('tls_ca_file') else 'off'}",
            "every setting: lab info --json"]


def run_preflight_checks(config: ClusterConfig) -> Any:
    from lab.cluster.preflight import run_preflight
    from lab.constants import Constants

    return run_preflight(config, in_list_limit=Constants.appendix_b().batch_read_in_list_limit)


@click.command("preflight")
@home_option
@click.option("--json", "as_json", is_flag=True, help="print the checks as JSON")
@cluster_options
def preflight(home: Path, as_json: bool, config: ClusterConfig) -> None:
    """Check, before a long run, what would stop it: server and version, nodes and shards,
    tablets, LWT, REST/JMX on every node, IN-list limit, replication, auth/TLS, free disk.
    Prints a fix for each problem; exits 1 when a check fails."""
    report = run_preflight_checks(config)
    click.echo(json.dumps(report.to_json(), indent=2) if as_json else report.to_text(), nl=as_json)
    if not report.ok:
        sys.exit(1)
