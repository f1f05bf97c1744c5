"""Fixtures every test may use: the session's run folder and its end-of-session reports.

``tests/unit/`` needs no node, no JDK and no network (``make unit``); ``tests/node/`` runs against
the real node ``make test`` starts, or the cluster named by ``LAB_*`` variables, and its
fixtures live in ``tests/node/conftest.py``. Nothing here fakes the database."""
from __future__ import annotations

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


def pytest_terminal_summary(terminalreporter) -> None:
    for title, text, path in _REPORTS:
        terminalreporter.write_sep("=", f"{title} ({path.relative_to(ROOT)})")
        terminalreporter.write_line(text.rstrip("\n"))
