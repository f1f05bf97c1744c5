"""Request accounting never takes a table name from a string literal in the CQL."""
from __future__ import annotations

from awkward_password import PASSWORD
from lab.cluster.accounting import classify


def test_accounting_never_takes_a_table_name_from_a_literal():
    info = classify(f"CREATE ROLE r WITH PASSWORD = '{PASSWORD.replace(chr(39), chr(39) * 2)}' AND LOGIN = true")
    assert (info.table, info.kind) == ("?", "schema")
