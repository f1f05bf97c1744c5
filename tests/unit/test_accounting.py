"""Request accounting never takes a table name from a string literal in the CQL."""
from __future__ import annotations

import secrets
import sys
from pathlib import Path

from lab.cluster.accounting import classify

ROOT = Path(__file__).resolve().parents[2]
LAB = [sys.executable, "-m", "lab.cli"]
ADDRESS = "127.0.0.31"
JMX_PORT = 7831
ROLE = "labrole"
# quotes and a FROM clause inside: escaping and accounting must both cope
PASSWORD = f"pw'{secrets.token_hex(6)}' FROM tbl_{secrets.token_hex(4)}"
SECRET_BITS = (PASSWORD, PASSWORD.split("'")[1], PASSWORD.rsplit(" ", 1)[1])


def test_accounting_never_takes_a_table_name_from_a_literal():
    info = classify(f"CREATE ROLE r WITH PASSWORD = '{PASSWORD.replace(chr(39), chr(39) * 2)}' AND LOGIN = true")
    assert (info.table, info.kind) == ("?", "schema")
