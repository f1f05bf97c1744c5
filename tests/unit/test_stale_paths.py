"""Every dotted lab name a reader is pointed to exists: a module, or an attribute of one.

Read from the docs (README.md, ARCHITECTURE.md, DEVELOPMENT.md, docs/*.md and the READMEs of loadgen/, results/,
datasets/) and from the docstrings and comments of every Python file under lab/, tests/ and
loadgen/. A rename that leaves the old dotted name behind in a docstring sends the next reader
to a module that is gone; this test names each such place. ``lab.common`` is not a Python module
but the protobuf package of ``lab/store/rows/proto/common.proto`` (its messages are named so).
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import io
import re
import tokenize
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("README.md", "ARCHITECTURE.md", "DEVELOPMENT.md", "loadgen/README.md", "results/README.md", "datasets/README.md")
# lab.<dotted>, not inside a path or a word (.lab/nodes, message-store-lab.x, results/x/lab.json)
DOTTED = re.compile(r"(?<![\w./-])lab(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
PROTO_PACKAGE = "lab.common"
FILE_SUFFIXES = {"toml", "py", "json", "csv", "ipynb", "md", "yaml", "yml", "html", "png", "txt", "diff", "log"}


def _doc_texts() -> list[tuple[str, int, str]]:
    """(file, line, text) of every doc line."""
    out = []
    for name in (*DOCS, *(str(p.relative_to(ROOT)) for p in sorted((ROOT / "docs").glob("*.md")))):
        for i, line in enumerate((ROOT / name).read_text().splitlines(), 1):
            out.append((name, i, line))
    return out


def _python_texts() -> list[tuple[str, int, str]]:
    """(file, line, text) of every docstring and comment of the lab's Python files."""
    out = []
    for folder in ("lab", "tests", "loadgen"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            source = path.read_text()
            rel = str(path.relative_to(ROOT))
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
                    first = node.body[0]
                    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                            and isinstance(first.value.value, str):
                        for i, line in enumerate(first.value.value.splitlines()):
                            out.append((rel, first.lineno + i, line))
            for tok in tokenize.generate_tokens(io.StringIO(source).readline):
                if tok.type == tokenize.COMMENT:
                    out.append((rel, tok.start[0], tok.string))
    return out


@cache
def resolves(dotted: str) -> bool:
    """``dotted`` is a module, or a module's attribute (chain)."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        module = ".".join(parts[:n])
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            continue
        if n == len(parts):
            return True
        obj = importlib.import_module(module)
        for attr in parts[n:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def _names(texts: list[tuple[str, int, str]]) -> list[tuple[str, str]]:
    out = []
    for where, line, text in texts:
        for m in DOTTED.finditer(text):
            dotted = m.group(0)
            if dotted.count(".") == 1 and dotted.split(".")[1] in FILE_SUFFIXES:
                continue  # lab.toml: a file name
            if dotted == PROTO_PACKAGE or dotted.startswith(PROTO_PACKAGE + "."):
                continue  # a protobuf message, named by its package
            out.append((f"{where}:{line}", dotted))
    return out


def test_every_dotted_lab_name_in_the_docs_exists():
    assert [f"{w} {d}" for w, d in _names(_doc_texts()) if not resolves(d)] == []


def test_every_dotted_lab_name_in_docstrings_and_comments_exists():
    assert [f"{w} {d}" for w, d in _names(_python_texts()) if not resolves(d)] == []


def test_the_check_tells_a_gone_module_from_a_present_one():
    assert resolves("lab.measure.percentiles.percentile") and resolves("lab.store.MessageStore")
    assert resolves("lab.cluster.config.ClusterConfig.redacted")
    assert not resolves("lab.faults") and not resolves("lab.config.ClusterConfig")
    assert not resolves("lab.measure.percentiles.no_such_thing")
    assert [d for _, d in _names([("x", 1, "see lab.toml, .lab/nodes and `lab.results.jsonio.write_json`.")])] == [
        "lab.results.jsonio.write_json"]


SLASHED = re.compile(r"(?<![\w./-])lab/[A-Za-z0-9_/.-]*[A-Za-z0-9_/]")


def test_every_lab_path_in_the_docs_and_docstrings_exists():
    """``lab/store/write/send.py`` in a doc or docstring: the file (or folder) is there."""
    missing = []
    for where, line, text in _doc_texts() + _python_texts():
        for m in SLASHED.finditer(text):
            if not (ROOT / m.group(0)).exists():
                missing.append(f"{where}:{line} {m.group(0)}")
    assert missing == []
