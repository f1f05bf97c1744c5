"""Every CLI command is documented in the README's command table."""
from __future__ import annotations

from pathlib import Path

import click

from lab.cli import main

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def _commands(group: click.Group, prefix: str) -> list[str]:
    out = []
    for name, cmd in group.commands.items():
        path = f"{prefix} {name}"
        if isinstance(cmd, click.Group):
            out += _commands(cmd, path)
        else:
            out.append(path)
    return out


def test_every_command_is_in_the_readme_table():
    commands = _commands(main, "lab")
    assert len(commands) >= 10
    missing = [c for c in commands if f"| `{c}`" not in README]
    assert missing == []


def test_readme_opens_with_the_two_commands():
    block = README.split("```")[1]
    lines = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert lines == ["make report", "make test"]
