"""Module docstrings say what the module is and where to read more: short (median <= 6 lines, none
over 25 but a drawn tree), and every module pointing to a docs/ page has its section there. The
story (tracker numbers, load figures) is kept out by tests/unit/test_code_explains.py."""
from __future__ import annotations

import ast
import re
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MEDIAN_LINES = 6
MAX_LINES = 25
TREE = "├"  # a drawn tree (lab/errors.py's error tree) may run longer
PAGE = re.compile(r"docs/([a-z0-9-]+-internals\.md)")


def _docstrings() -> dict[str, str]:
    """module path -> its docstring, for every module of lab/ that has one."""
    out = {}
    for path in sorted((ROOT / "lab").rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        doc = ast.get_docstring(ast.parse(path.read_text()), clean=False)
        if doc is not None and doc.strip():
            out[path.relative_to(ROOT).as_posix()] = doc
    return out


def _lines(doc: str) -> int:
    return len(doc.strip("\n").splitlines())


def _dotted(module: str) -> str:
    parts = module.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_the_median_module_docstring_is_short():
    lengths = [_lines(d) for d in _docstrings().values()]
    assert len(lengths) > 100
    assert statistics.median(lengths) <= MEDIAN_LINES, statistics.median(lengths)


def test_no_module_docstring_is_an_essay():
    long = {m: _lines(d) for m, d in _docstrings().items() if _lines(d) > MAX_LINES and TREE not in d}
    assert not long, f"over {MAX_LINES} lines (move the reasons to a docs/ page): {long}"


def test_every_module_pointing_to_an_internals_page_has_its_section():
    missing = []
    for module, doc in _docstrings().items():
        for page in set(PAGE.findall(doc)):
            text = (ROOT / "docs" / page).read_text()
            if f"## `{_dotted(module)}`" not in text:
                missing.append(f"{module} -> docs/{page}")
    assert not missing, missing


def test_every_section_of_an_internals_page_names_a_module_that_points_there():
    docs = {_dotted(m): d for m, d in _docstrings().items()}
    stray = []
    for page in sorted((ROOT / "docs").glob("*-internals.md")):
        for name in re.findall(r"^## `(lab[\w.]*)`", page.read_text(), re.M):
            if f"docs/{page.name}" not in docs.get(name, ""):
                stray.append(f"{page.name}: {name}")
    assert not stray, f"a section whose module is gone or points elsewhere: {stray}"


def test_the_tree_exception_is_the_error_tree():
    trees = [m for m, d in _docstrings().items() if TREE in d]
    assert trees == ["lab/errors.py"]
