"""Importing the notebook tools (papermill, nbformat, nbconvert, scrapbook) without jsonschema's
optional IRI grammar.

nbformat validates notebooks with jsonschema, and jsonschema imports ``rfc3987_syntax`` whenever
it is installed (jupyter-events' ``jsonschema[format-nongpl]`` puts it in the venv): that module
builds a Lark grammar at import, which made importing papermill and nbconvert several times
slower (docs/measurements.md), once in every process that runs or reads a notebook. Only jsonschema's ``iri`` / ``iri-reference`` format checks use
it, and no schema the lab validates against names those formats. (The kernel already glues its
values without scrapbook for the same reason: lab.calibration.experiments.common.)
"""
from __future__ import annotations

import sys

OPTIONAL_GRAMMAR = "rfc3987_syntax"


def skip_iri_grammar() -> None:
    """Mark the optional grammar absent in this process (jsonschema then skips its two format
    checks), unless something imported it already. Call before importing the notebook tools."""
    sys.modules.setdefault(OPTIONAL_GRAMMAR, None)
