"""The ``lab`` command: a thin layer over the library. Each command parses its options, builds
the library's config or options object, makes one library call and prints the result's fields.

    options               the shared flags (cluster, services, --home, --results), durations, LabGroup
    node_commands         ``lab node start|status|logs|stop|jars|wipe``: the embedded servers
    cluster_commands      ``lab info``, ``lab preflight``
    calibration_commands  ``lab calibrate``, ``lab compare``, ``lab runs``, ``lab jupyter``
    load_commands         ``lab load``, ``lab soak``
    bench_commands        ``lab bench store``, ``lab bench load``
    status_line           live progress of long commands on stderr
    load_text             the text `lab load` prints at the end (the summary in human units)

Library errors become CLI errors in one place (:class:`lab.cli.options.LabGroup`): one line,
exit code 2. Every command is documented in the README's command table (tests/unit/test_docs.py).
"""
from __future__ import annotations

import click

from lab.cli import bench_commands, calibration_commands, cluster_commands, load_commands, node_commands
from lab.cli.options import LabGroup

__all__ = ["main"]


@click.group(cls=LabGroup)
@click.version_option(package_name="message-store-lab")
def main() -> None:
    """Message-store capacity lab: a real CQL node, the MessageStore, load and calibration."""


for _command in (node_commands.node, cluster_commands.info, cluster_commands.preflight,
                 calibration_commands.calibrate, calibration_commands.compare, calibration_commands.runs,
                 calibration_commands.jupyter,
                 load_commands.load, load_commands.soak, bench_commands.bench):
    main.add_command(_command)
