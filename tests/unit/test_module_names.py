"""No two modules or packages under lab/ share a name: a name says one concept, wherever it is.

Two ``clock.py`` (the measurement clock, the store's wall clock), two ``runs.py``, two ``base.py`` made a reader
(and a traceback, a grep, an editor tab) ask which one. The one exception: the members of the
two per-server registries, ``lab.cluster.admin`` and ``lab.cluster.dialect``, are named after
their server (``cassandra``, ``scylla``), since the registry key is the server's name.
"""
from __future__ import annotations

import collections
from pathlib import Path

LAB = Path(__file__).resolve().parents[2] / "lab"
# (package, member) pairs allowed to repeat a name: the per-server registries
SERVER_REGISTRIES = {"cluster/admin", "cluster/dialect"}
SERVER_NAMES = {"cassandra", "scylla"}


def _names() -> dict[str, list[str]]:
    """basename -> the modules and packages under lab/ that carry it (paths relative to lab/)."""
    names: dict[str, list[str]] = collections.defaultdict(list)
    for path in sorted(LAB.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        rel = path.relative_to(LAB)
        if path.name == "__init__.py":
            if path.parent != LAB:  # a package: its folder's name
                names[path.parent.name].append(str(rel.parent) + "/")
            continue
        if rel.parent.as_posix() in SERVER_REGISTRIES and path.stem in SERVER_NAMES:
            continue
        names[path.stem].append(str(rel))
    return names


def test_no_two_modules_or_packages_share_a_name():
    clashes = {name: where for name, where in _names().items() if len(where) > 1}
    assert clashes == {}, f"modules/packages sharing a name (rename one so each says its concept): {clashes}"


def test_the_check_sees_the_tree():
    names = _names()
    # it finds modules and packages at every depth, and skips only the stated registry members
    assert names["timing"] == ["measure/timing.py"]
    assert names["embedded"] == ["cluster/embedded/"]
    assert "cassandra" not in names and "scylla" not in names
    assert (LAB / "cluster" / "admin" / "cassandra.py").exists() and (LAB / "cluster" / "dialect" / "scylla.py").exists()


def test_no_variable_is_called_lab():
    """A dotted name that starts with ``lab`` reads as a module path: never a variable's."""
    import ast

    root = LAB.parent
    found = []
    for folder in ("lab", "tests", "loadgen"):
        for path in sorted((root / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            # ``import lab.store`` binds the name lab to the package: that lab is the module path
            imports_package = any(isinstance(n, ast.Import) and any(a.name.split(".")[0] == "lab" and not a.asname
                                                                     for a in n.names) for n in ast.walk(tree))
            for node in ast.walk(tree):
                if imports_package and isinstance(node, ast.Name):
                    continue
                named = (node.id if isinstance(node, ast.Name) else node.arg if isinstance(node, ast.arg)
                         else node.attr if isinstance(node, ast.Attribute) else None)
                if named == "lab":
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert found == []


def test_no_two_test_files_share_a_name():
    """pytest imports test files by basename (the test folders are not packages): two
    ``test_x.py`` in tests/unit and tests/node stop the whole suite at collection."""
    tests = LAB.parent / "tests"
    seen: dict[str, list[str]] = collections.defaultdict(list)
    for path in sorted(tests.rglob("test_*.py")):
        seen[path.name].append(str(path.relative_to(tests)))
    clashes = {name: where for name, where in seen.items() if len(where) > 1}
    assert clashes == {}, f"test files sharing a name (pytest cannot collect both): {clashes}"
