"""The documentation matches the code: every CLI command in the README's table (and no command
that does not exist), every package's __init__ docstring naming its modules, the two commands first."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import click
import pytest

from lab.cli import main

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
PACKAGES = sorted(p.parent for p in (ROOT / "lab").rglob("__init__.py"))
# Known gaps: package -> module names its docstring may leave out (none today).
KNOWN_UNNAMED: dict[str, set[str]] = {}


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


def test_the_readme_table_names_only_real_commands():
    documented = re.findall(r"^\| `(lab [a-z -]+)`", README, re.M)
    assert documented and set(documented) <= set(_commands(main, "lab"))


def test_readme_opens_with_the_two_commands():
    block = README.split("```")[1]
    lines = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert lines == ["make report", "make test"]


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_each_package_docstring_names_its_modules(package):
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    parts = [p.stem for p in package.glob("*.py") if not p.name.startswith("__") and not p.name.endswith("_pb2.py")]
    parts += [p.name for p in package.iterdir() if (p / "__init__.py").is_file()]
    unnamed = {n for n in parts if not re.search(rf"\b{re.escape(n)}\b", doc)}
    assert doc and unnamed == KNOWN_UNNAMED.get(str(package.relative_to(ROOT)), set())


def test_the_layout_section_names_every_package():
    layout = README.split("## Layout", 1)[1].split("\n## ", 1)[0]
    top = [p.name for p in (ROOT / "lab").iterdir() if (p / "__init__.py").is_file()]
    assert [n for n in top if f"{n}/" not in layout] == []


def test_the_loader_sizing_section_has_its_measured_table():
    """Issue 22's "Done when": the README says how to size loaders with the measured calls/s per
    loader core per operation (a placeholder line, LOADER_TABLE, stood there on main)."""
    text = (ROOT / "loadgen" / "README.md").read_text()
    section = text[text.index("### Sizing the loader"):]
    section = section[:section.index("\n## ")]
    assert not re.search(r"^[A-Z][A-Z_]{3,}$", section, re.M), "a placeholder line in the sizing section"
    rows = [r for r in section.splitlines() if r.startswith("| ") and re.search(r"\d+(\.\d+)? ms", r)]
    ops = {r.split("|")[1].strip().split(" ")[0] for r in rows}
    assert {"send", "history_latest", "backfill_s1_group", "react", "edit", "recall"} <= ops, ops
    assert "calls/s per loader core" in section
