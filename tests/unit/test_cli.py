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


@pytest.mark.spawns
def test_a_library_error_is_one_line_and_exit_2(tmp_path):
    """A LabError (here: an unknown notebook) becomes `error: <Type>: <message>` and exit code 2."""
    proc = subprocess.run([sys.executable, "-m", "lab.cli", "calibrate", "--notebooks", "no_such_notebook",
                           "--results", str(tmp_path)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("error: CalibrationError: ")
    assert "Traceback" not in proc.stderr and not any(tmp_path.iterdir())


def test_bad_usage_is_a_usage_error():
    out = CliRunner().invoke(main, ["load"])
    assert out.exit_code == 2 and "give --rate R, --users N or --staircase MAX" in out.output


# ---- bad input: refused before anything starts, nothing written ---------------------------------
def test_every_numeric_option_has_a_range():
    """A bare int/float option would let `--rate -5` reach the library; durations are typed too."""
    from lab.cli.options import Duration

    bare = []
    for path, cmd in COMMANDS:
        for p in cmd.params:
            if not isinstance(p, click.Option):
                continue
            if type(p.type) in (click.types.IntParamType, click.types.FloatParamType):
                bare.append(f"lab {' '.join(path)} {p.opts[0]}")
            if p.name in ("duration", "warmup", "step", "audit_every", "join_timeout"):
                assert isinstance(p.type, Duration), f"lab {' '.join(path)} {p.opts[0]}"
    assert not bare, bare


@pytest.mark.parametrize("args, message", [
    (["load", "--rate", "-5"], "Invalid value for '--rate': -5.0 is not in the range x>0"),
    (["load", "--users", "0"], "Invalid value for '--users': 0 is not in the range x>=1"),
    (["load", "--users", "2", "--duration", "0s"], "'0s' must be more than 0 seconds"),
    (["load", "--users", "2", "--warmup", "-2s"], "'-2s' must be at least 0 seconds"),
    (["load", "--users", "2", "--duration", "soon"], "'soon' is not a duration (e.g. 60s, 2m, 1m30s)"),
    (["load", "--users", "2", "--processes", "0"], "'--processes': '0': give auto or a number of processes >= 1"),
    (["load", "--web", "--rate", "5"], "the web UI runs closed loop"),
    (["load", "--users", "2", "--run-id", "../up"], "run id '../up': use letters, digits"),
    (["load", "--users", "2", "--profile", "nope"], "no load profile 'nope'"),
    (["load", "--users", "2", "--port", "70000"], "'--port': 70000 is not in the range 1<=x<=65535"),
    (["soak", "--threads", "0"], "'--threads': 0 is not in the range x>=1"),
    (["soak", "--audit-every", "0"], "'0' must be more than 0 seconds"),
    (["calibrate", "--cell-timeout", "-1"], "'--cell-timeout': -1.0 is not in the range x>0"),
    (["calibrate", "-p", "b_row.rows=abc"],
     'notebook b_row: parameter rows takes an integer (its default is 10000), got "abc" (a string)'),
    (["calibrate", "-p", "in_limit.in_sizes=[1,\"x\"]"], "parameter in_sizes takes a list of integers"),
    (["calibrate", "-p", "b_row.rowz=5"], "notebook b_row has no parameter rowz"),
    (["calibrate", "-p", "rows=5"], "expected NOTEBOOK.KEY=VALUE"),
    (["node", "start", "--heap", "lots"], "'lots' is not a JVM heap size"),
    (["jupyter", "--port", "0"], "'--port': 0 is not in the range 1<=x<=65535"),
    (["bench", "load", "--concurrency", "0"], "'--concurrency': 0 is not in the range x>=1"),
])
def test_bad_input_is_one_clear_line_and_leaves_no_folder(tmp_path, args, message):
    home = tmp_path / "home"
    results = tmp_path / "results"
    extra = ["--results", str(results)] if args[0] in ("load", "soak", "calibrate") or args[:2] == ["bench", "load"] \
        else []
    out = CliRunner().invoke(main, [*args, *extra], env={"LAB_HOME": str(home)})
    assert out.exit_code == 2, out.output
    assert message in out.output, out.output
    assert "Traceback" not in out.output and not results.exists() and not home.exists()


@pytest.mark.spawns
def test_an_unreachable_cluster_is_one_line_with_the_fix_and_leaves_no_folder(tmp_path):
    """`calibrate --port 1` (no preflight) and `load --port 1`: nothing answers on port 1."""
    for args in (["calibrate", "--no-preflight", "--notebooks", "none"], ["load", "--users", "2"],
                 ["soak", "--duration", "2s"], ["bench", "load", "--quick"]):
        proc = subprocess.run([sys.executable, "-m", "lab.cli", *args, "--port", "1", "--results", str(tmp_path)],
                              capture_output=True, text=True, cwd=ROOT, timeout=120)
        last = proc.stderr.strip().splitlines()[-1]
        assert proc.returncode == 2 and last.startswith("error: ConnectError: cannot connect to 127.0.0.1:1: "
                                                        "connection refused (nothing answers there"), proc.stderr
        assert "`lab node start`" in last and "Traceback" not in proc.stderr and "{" not in last
        assert not any(tmp_path.iterdir()), args


@pytest.mark.spawns
def test_calibrate_preflight_failure_names_the_failed_check(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "lab.cli", "calibrate", "--port", "1", "--results", str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and "FAIL  connect" in proc.stderr
    assert proc.stderr.rstrip().endswith("error: preflight failed: fix the checks above (or --no-preflight)")
    assert not any(tmp_path.iterdir())


def test_lab_help_lists_every_command_with_its_whole_description():
    """click cuts a command's line at ~45 characters ("Run the headless calibration suite and print
    where the..."): the lab's groups print the whole first paragraph."""
    import inspect

    for group in [main] + [cmd for _, cmd in COMMANDS if isinstance(cmd, click.Group)]:
        out = CliRunner().invoke(group, ["--help"], terminal_width=100)
        assert out.exit_code == 0, out.output
        listed = " ".join(out.output.split("Commands:", 1)[1].split())
        for name, cmd in group.commands.items():
            first = " ".join(inspect.cleandoc(cmd.help or "").split("\n\n")[0].split())
            assert first in listed, (name, first)
        assert "..." not in listed
