"""The ``lab`` command: a thin layer over the library. Each command parses its options, builds
the library's config or options object, makes one library call and prints the result's fields.

    options      the shared flags (cluster, services, --home, --results), durations, LabGroup
    node         ``lab node start|status|logs|stop|jars|wipe``: the embedded servers
    cluster      ``lab info``, ``lab preflight``
    calibration  ``lab calibrate``, ``lab compare``, ``lab jupyter``
    load         ``lab load``, ``lab soak``
    bench        ``lab bench store``, ``lab bench load``
    progress     live progress of long commands on stderr
    load_text    the text `lab load` prints at the end (the summary in human units)

Library errors become CLI errors in one place (:class:`lab.cli.options.LabGroup`): one line,
exit code 2. Every command is documented in the README's command table (tests/unit/test_docs.py).
"""
from __future__ import annotations

import click

from lab.cli import bench, calibration, cluster, load, node
from lab.cli.options import LabGroup

__all__ = ["main"]


@click.group(cls=LabGroup)
@click.version_option(package_name="message-store-lab")
def main() -> None:
    """Message-store capacity lab: a real CQL node, the MessageStore, load and calibration."""


for _command in (node.node, cluster.info, cluster.preflight, calibration.calibrate, calibration.compare,
                 calibration.jupyter, load.load, load.soak, bench.bench):
    main.add_command(_command)
