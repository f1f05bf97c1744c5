"""One worker's message templates, built once per run and handed to its Locust process.

More: docs/load-internals.md.
"""
from __future__ import annotations

import importlib
import pickle
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab.load.plan import LoadPlan, load_profile, message_templates
from lab.results.jsonio import write_atomic


def import_generator_meanwhile() -> threading.Thread:
    """Import the workload generator (pandas) in a thread while the caller waits on the cluster
    (``lab load``: creating the schema), so the seed's :func:`build_templates` finds it imported.
    The import is most of a tiny seed's time (docs/measurements.md), and the Locust processes wait
    for the seed. The caller joins the thread before it returns."""
    thread = threading.Thread(target=importlib.import_module, args=("lab.workload",), name="import-generator",
                              daemon=True)
    thread.start()
    return thread


def templates_path(plan: LoadPlan) -> Path:
    return plan.load_dir / "templates" / f"{plan.worker_name()}.pickle"


def build_templates(plan: LoadPlan) -> tuple[Any, ...]:
    """Build the worker's templates and write them for its Locust process."""
    templates = tuple(message_templates(load_profile(plan.profile).content, seed=plan.worker_index))
    path = templates_path(plan)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, pickle.dumps((plan.profile, templates), protocol=pickle.HIGHEST_PROTOCOL))
    return templates


def worker_templates(plan: LoadPlan) -> Sequence[Any]:
    """The worker's templates: the file its seeder wrote, or built now (and written)."""
    try:
        profile, templates = pickle.loads(templates_path(plan).read_bytes())
    except FileNotFoundError:
        return build_templates(plan)
    if profile != plan.profile:  # a reused folder's file from another profile: not this run's
        return build_templates(plan)
    return templates
