"""Fixtures every test may use: the session's run folder and its end-of-session reports.

``tests/unit/`` needs no node, no JDK and no network (``make unit``); ``tests/node/`` runs against
the real node ``make test`` starts, or the cluster named by ``LAB_*`` variables, and its
fixtures live in ``tests/node/conftest.py``. Nothing here fakes the database."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]  # the project folder


# ---- reports ------------------------------------------------------------------------------
# Tables the reliability tests produce (crash points, node failure): written to this session's
# run folder results/tests-<run-id>/ and printed at the end of the session whatever -s says.
_REPORTS: list[tuple[str, str, Path]] = []


@pytest.fixture(scope="session")
def results_dir() -> Path:
    from lab.results.run_folders import new_run_dir

    return new_run_dir(ROOT / "results", prefix="tests-")


@pytest.fixture(scope="session")
def report(results_dir):
    """``report(file_name, title, text)``: write ``text`` to the run folder and print it at the end."""
    def add(file_name: str, title: str, text: str) -> Path:
        path = results_dir / file_name
        path.write_text(text)
        _REPORTS.append((title, text, path))
        return path
    return add


@pytest.fixture(scope="session")
def notebook_artifacts():
    """``notebook_artifacts(folder, name, figure)``: a notebook run left its executed notebook, its HTML
    with the figures embedded, ``<figure>.png``, values.json and conclusion.md, and papermill injected
    the parameters beside the notebook's own ``parameters`` cell."""
    def check(folder: Path, name: str, figure: str) -> None:
        assert (folder / f"{name}.ipynb").exists()
        assert (folder / f"{name}.html").stat().st_size > 10_000  # figures embedded
        assert (folder / f"{figure}.png").stat().st_size > 5_000
        assert (folder / "values.json").exists() and (folder / "conclusion.md").exists()
        executed = json.loads((folder / f"{name}.ipynb").read_text())
        tags = [c["metadata"].get("tags", []) for c in executed["cells"]]
        assert ["parameters"] in tags and ["injected-parameters"] in tags
    return check


def pytest_terminal_summary(terminalreporter) -> None:
    for title, text, path in _REPORTS:
        terminalreporter.write_sep("=", f"{title} ({path.relative_to(ROOT)})")
        terminalreporter.write_line(text.rstrip("\n"))
