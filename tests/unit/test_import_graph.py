"""lab's packages import downwards only, and no modules import each other in a circle.

The same reading as ``/work/shared/tools/import_graph.py`` (every import statement, function
level included, read with ``ast``; nothing of the project runs): a package-level edge from each
import of a lab module in a module of another package. Function-level imports count: one that only
hides a cycle from import time is still a cycle for a reader.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# lowest first: a package may import packages of lower layers only
LAYERS = (
    ("lab.errors",),
    ("lab.constants", "lab.project", "lab.measure"),
    ("lab.cluster",),
    ("lab.store", "lab.results"),
    ("lab.workload",),
    ("lab.load",),
    ("lab.calibration", "lab.bench"),
    ("lab.comparison",),
    ("lab.cli",),
)
LAYER = {package: i for i, layer in enumerate(LAYERS) for package in layer}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted((ROOT / "lab").rglob("*.py")):
        if "__pycache__" not in path.parts:
            out[".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")] = path
    return out


def _imports(path: Path) -> list[tuple[str, int, list[str]]]:
    """(module imported, line, names imported from it) for every absolute import of lab."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno, []) for a in node.names if a.name.startswith("lab.")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("lab."):
            out.append((node.module, node.lineno, [a.name for a in node.names]))
    return out


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def package_edges() -> dict[tuple[str, str], list[str]]:
    """(importing package, imported package) -> where (``path:line``)."""
    edges: dict[tuple[str, str], list[str]] = {}
    for module, path in _modules().items():
        for target, line, _ in _imports(path):
            a, b = _package(module), _package(target)
            if a != b and a != "lab":
                edges.setdefault((a, b), []).append(f"{path.relative_to(ROOT)}:{line}")
    return edges


def test_every_package_has_a_layer():
    packages = {_package(m) for m in _modules()} - {"lab"}
    assert packages == set(LAYER), "place a new package in LAYERS (tests/unit/test_import_graph.py)"


def test_packages_import_downwards_only():
    upward = {f"{a} -> {b}": where for (a, b), where in package_edges().items() if LAYER[b] >= LAYER[a]}
    assert upward == {}


def test_no_cycle_between_packages():
    graph: dict[str, set[str]] = {}
    for a, b in package_edges():
        graph.setdefault(a, set()).add(b)
    assert _cycles(graph) == []


def test_no_cycle_between_modules():
    """Module level, within packages too (``calibration.run`` and ``propose`` imported each
    other). A module importing its own ancestor package (``from lab.store import X`` inside the
    store) is the package's ``__init__``, not a cycle of modules, and is left out."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        for target, _, names in _imports(path):
            for t in [target] + [f"{target}.{n}" for n in names]:
                if t in modules and t != module and not module.startswith(t + "."):
                    graph.setdefault(module, set()).add(t)
    assert _cycles(graph) == []


def test_the_check_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)
