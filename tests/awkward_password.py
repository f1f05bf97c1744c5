"""The role password the security and accounting tests use: one made to break careless code.

It holds quotes and a ``FROM <table>`` clause, so CQL escaping (``CREATE ROLE ... PASSWORD``) and
request accounting (which must never take a table name from a string literal) both have to cope;
``SECRET_BITS`` are the pieces of it that must appear nowhere (reprs, output, results, logs).
Random per test session. Importable from ``tests/unit`` and ``tests/node`` alike: ``tests/`` is on
``sys.path`` because ``tests/conftest.py`` lives there (pytest's default ``prepend`` import mode).
"""
from __future__ import annotations

import secrets

# quotes and a FROM clause inside: escaping and accounting must both cope
PASSWORD = f"pw'{secrets.token_hex(6)}' FROM tbl_{secrets.token_hex(4)}"
SECRET_BITS = (PASSWORD, PASSWORD.split("'")[1], PASSWORD.rsplit(" ", 1)[1])
