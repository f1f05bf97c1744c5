"""No DELETE statement in the reactions path (§3: expiry by TTL, withdrawal by overwrite)."""
from __future__ import annotations

import re
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2] / "lab" / "store" / "read" / "reactions.py"


def test_no_delete_statement_in_reactions():
    # a CQL text in the module starting with DELETE (prose in the docstring may name it)
    assert re.search(r"[\"']\s*DELETE\b", SOURCE.read_text(), re.IGNORECASE) is None
