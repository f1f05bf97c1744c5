"""Where the project's user-facing folders are, defined once.

Package assets (profiles, the Locust side, the node's pom and JMX helper, appendix B) live inside
``lab/``; ``notebooks/``, ``results/`` and ``datasets/out/`` sit in the project folder, the checkout
this package was installed from (``pip install -e .``), so a run started from a notebook lands in
the same ``results/`` as one started by ``lab``, whatever the kernel's working directory.
"""
from __future__ import annotations

from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parents[1]
NOTEBOOKS_DIR = PROJECT_DIR / "notebooks"
RESULTS_DIR = PROJECT_DIR / "results"
DATASETS_OUT_DIR = PROJECT_DIR / "datasets" / "out"
DATASETS_PROFILES_DIR = PROJECT_DIR / "datasets" / "profiles"   # your workload profiles (beside the packaged ones)
