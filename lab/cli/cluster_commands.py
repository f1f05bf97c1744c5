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
