"""Where the project's user-facing folders are, defined once.

The package's own assets (profiles, the Locust side, the node's pom and JMX helper, appendix B)
live inside ``lab/`` as package data. What users open and what runs write sit beside the
package, in the project folder: ``notebooks/`` (the notebooks engineers edit), ``results/``
(every run) and ``datasets/out/`` (generated workloads). The project folder is the checkout this
package was installed from (``pip install -e .``, as the Makefile does); runs started from a
notebook therefore land in the same ``results/`` as runs started by ``lab`` from the project
root, whatever the kernel's working directory.
"""
from __future__ import annotations

from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parents[1]
NOTEBOOKS_DIR = PROJECT_DIR / "notebooks"
RESULTS_DIR = PROJECT_DIR / "results"
DATASETS_OUT_DIR = PROJECT_DIR / "datasets" / "out"
DATASETS_PROFILES_DIR = PROJECT_DIR / "datasets" / "profiles"   # your workload profiles (beside the packaged ones)
