"""Importing the notebook tools (papermill, nbformat, nbconvert, scrapbook) without jsonschema's
optional IRI grammar.

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import sys

OPTIONAL_GRAMMAR = "rfc3987_syntax"


def skip_iri_grammar() -> None:
    """Mark the optional grammar absent in this process (jsonschema then skips its two format
    checks), unless something imported it already. Call before importing the notebook tools."""
    sys.modules.setdefault(OPTIONAL_GRAMMAR, None)
