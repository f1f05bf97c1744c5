"""Every `lab` command is registered, answers --help with its own text and stays a thin layer."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from lab.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    out = []
    for name, cmd in sorted(group.commands.items()):
        path = (*prefix, name)
        out.append((path, cmd))
        if isinstance(cmd, click.Group):
            out += _commands(cmd, path)
    return out


COMMANDS = _commands(main)


def test_the_command_tree():
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"node start", "node stop", "info", "calibrate", "compare", "load", "soak", "jupyter", "bench store",
            "bench load"} <= names


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=lambda p: " ".join(p))
def test_every_command_has_help(path):
    cmd = dict(COMMANDS)[path]
    out = CliRunner().invoke(main, [*path, "--help"])
    assert out.exit_code == 0, out.output
    assert cmd.help and cmd.help.strip(), f"lab {' '.join(path)} has no docstring"
    first = cmd.help.strip().splitlines()[0].split("(")[0].strip()[:40]
    assert " ".join(first.split()) in " ".join(out.output.split()), path
    assert "Usage: " in out.output


def test_commands_that_connect_take_the_cluster_flags():
    for name in ("info", "calibrate", "load", "soak"):
        out = CliRunner().invoke(main, [name, "--help"])
        assert "--contact-points" in out.output and "--config" in out.output, name
    out = CliRunner().invoke(main, ["bench", "store", "--help"])
    assert "--quick" in out.output and "--contact-points" in out.output


def test_a_library_error_is_one_line_and_exit_2(tmp_path):
    """A LabError (here: an unknown notebook) becomes `error: <Type>: <message>` and exit code 2."""
    proc = subprocess.run([sys.executable, "-m", "lab.cli", "calibrate", "--notebooks", "no_such_notebook",
                           "--results", str(tmp_path)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("error: CalibrationError: ")
    assert "Traceback" not in proc.stderr and not any(tmp_path.iterdir())


def test_bad_usage_is_a_usage_error():
    out = CliRunner().invoke(main, ["load"])
    assert out.exit_code == 2 and "give --rate R, --users N or --staircase MAX" in out.output
