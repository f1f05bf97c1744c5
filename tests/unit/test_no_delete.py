"""No DELETE statement anywhere in the store (design §3: "所有表禁止显式 DELETE"; S-6).

Expiry is by TTL, compliance erasure by destroying the DEK, unreact by overwrite: nothing in
``lab/store/`` may issue a CQL DELETE (nor a batch holding one, nor a TRUNCATE). Every string
literal of every module is inspected (f-strings and implicit concatenations included, via the
AST), so prose in docstrings that merely names DELETE does not count and a statement split over
several literals still does.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

STORE = Path(__file__).resolve().parents[2] / "lab" / "store"
# a CQL statement text: DELETE / TRUNCATE opening it, or DELETE ... FROM inside a BATCH
_STATEMENT = re.compile(r"^\s*(DELETE|TRUNCATE)\b|\bDELETE\s+(\w+(\s*\[[^\]]*\])?\s*,\s*)*\w*(\s*\[[^\]]*\])?\s*FROM\b",
                        re.IGNORECASE)


def _literals(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of every string literal; an f-string's constant parts joined with a blank."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            out.append((node.lineno, " ".join(v.value for v in node.values
                                              if isinstance(v, ast.Constant) and isinstance(v.value, str))))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append((node.lineno, node.value))
    return out


def _modules() -> list[Path]:
    return sorted(STORE.rglob("*.py"))


def test_the_store_has_modules_to_inspect():
    assert len(_modules()) > 20


@pytest.mark.parametrize("module", _modules(), ids=lambda p: str(p.relative_to(STORE)))
def test_no_delete_statement(module):
    tree = ast.parse(module.read_text(encoding="utf-8"))
    found = [(line, text) for line, text in _literals(tree) if _STATEMENT.search(text)]
    assert not found, f"{module.relative_to(STORE.parents[1])}: DELETE/TRUNCATE statement text at {found}"


@pytest.mark.parametrize("text", ["DELETE FROM {ks}.message_record WHERE tenant_id = ?",
                                  "  delete counts['like'] FROM {ks}.message_reaction_summary WHERE x = ?",
                                  "BEGIN BATCH INSERT INTO t (a) VALUES (1); DELETE FROM t WHERE a = 2; APPLY BATCH",
                                  "TRUNCATE {ks}.client_dedup"])
def test_the_pattern_catches_statements(text):
    assert _STATEMENT.search(text)


@pytest.mark.parametrize("text", ["No DELETE on any table (§3)", "rows leave only by TTL (§3: no DELETE), so",
                                  "PRAGMA secure_delete = ON", "Unreact without DELETE (§3 forbids DELETE on every table)"])
def test_the_pattern_ignores_prose(text):
    assert not _STATEMENT.search(text)
