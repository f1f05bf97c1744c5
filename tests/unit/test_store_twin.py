"""A Locust process finds a store call's asynchronous twin by name alone (lab.load.locust.runtime.store_twin):
every store method the Locust users call has one, unreact and self_reaction included. No server: the
store is never opened, only its bound methods are looked at."""
from __future__ import annotations

import ast
from pathlib import Path

from lab.load.locust.runtime import store_twin
from lab.store import MessageStore

USERS = Path(__file__).resolve().parents[2] / "lab" / "load" / "locust" / "users.py"


def _unopened_store() -> MessageStore:
    return object.__new__(MessageStore)  # bound methods, nothing behind them: none is called


def _store_calls_of_the_users() -> set[str]:
    """The ``ctx.store.<name>`` the Locust users call, read from their source."""
    names = set()
    for node in ast.walk(ast.parse(USERS.read_text())):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
                and node.value.attr == "store"):
            names.add(node.attr)
    return names


def test_every_store_call_of_the_users_has_a_twin_found_by_name():
    store = _unopened_store()
    calls = _store_calls_of_the_users()
    assert {"send", "history", "batch_read", "react", "unreact", "self_reaction", "recall", "edit"} <= calls
    for name in calls:
        assert store_twin(store, getattr(store, name)) == getattr(store, f"{name}_async"), name


def test_no_twin_for_a_method_without_one_or_a_function_of_another_object():
    store, other = _unopened_store(), _unopened_store()
    assert store_twin(store, store.lookup) is None  # the admin lookup has no twin
    assert store_twin(store, other.unreact) is None  # another store's method
    assert store_twin(store, len) is None
