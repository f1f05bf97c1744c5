"""The store is sealed as a package: nothing outside lab/store/ imports one of its modules.

Callers use ``from lab.store import ...`` (the façade and every public export); the packages
behind it (write/, read/, outbox/, hot/, rows/, crypto/, plumbing/) may move or change without
touching a caller. Tests of one store module may import that module (tests/ is not scanned)."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import lab.store

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("lab", "loadgen", "bench")


def _private_imports(source: str) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        out += [n for n in names if n.startswith("lab.store.")]
    return out


def _python_files() -> list[Path]:
    files = [f for d in SCANNED if (ROOT / d).is_dir() for f in (ROOT / d).rglob("*.py")]
    return [f for f in files if not f.is_relative_to(ROOT / "lab" / "store")]


def _notebook_code(path: Path) -> str:
    cells = json.loads(path.read_text())["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    # IPython magics and shell lines are not Python
    return "\n".join(line for cell in code for line in cell.splitlines() if not line.lstrip().startswith(("%", "!")))


def test_no_module_outside_the_store_imports_a_store_module():
    found = {str(f.relative_to(ROOT)): _private_imports(f.read_text()) for f in _python_files()}
    assert len(found) > 50  # the scan saw the lab
    assert {f: names for f, names in found.items() if names} == {}


def test_no_notebook_imports_a_store_module():
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert notebooks
    found = {nb.name: _private_imports(_notebook_code(nb)) for nb in notebooks}
    assert {nb: names for nb, names in found.items() if names} == {}


def test_the_scan_catches_a_private_import():
    assert _private_imports("from lab.store.write.send import SendRequest\nimport lab.store.rows.ids as ids\n"
                            "from lab.store import Message\n") == ["lab.store.write.send", "lab.store.rows.ids"]


@pytest.mark.parametrize("name", sorted(lab.store.__all__))
def test_every_export_exists(name):
    assert getattr(lab.store, name) is not None
