"""docs/store-api.md is the store's contract: every public member of the façade is in it, and
the façade's parts stay private (no public attribute hands out a path object)."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

from lab.store import MessageStore

DOC = (Path(__file__).resolve().parents[2] / "docs" / "store-api.md").read_text()


def _public_members() -> set[str]:
    return {name for name, _ in inspect.getmembers(MessageStore) if not name.startswith("_")}


def test_every_public_member_is_documented():
    documented = set(re.findall(r"store\.(\w+)", DOC)) | {"open"}
    assert _public_members() - documented == set()


def test_the_parts_are_not_public():
    parts = {"ctx", "sequences", "head_writer", "send_path", "recall_path", "outbox", "archiver",
             "history_reader", "batch_reader", "encryptor", "reactions"}
    assert parts & _public_members() == set()
