"""Code says what; history stays in git and measured figures in docs/measurements.md: no tracker
numbers in the code, tests, loadgen, notebooks or docs (the two history pages may cite them), no
load-average figures in lab/ (house style), and the figures page exists."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRACKER = re.compile(r"\bissues? ?#?\d+", re.IGNORECASE)
# the pages that are history: a tracker number there says where a figure or a deviation came from
HISTORY_PAGES = {"design-deviations.md", "measurements.md"}
# a measured figure tagged with the machine's load: "load average 3.4-4.2", "at load 8", "load 1-4"
LOAD_FIGURE = re.compile(r"\bload(?: average)? \d+(?:\.\d+)?(?:\s*-\s*\d+(?:\.\d+)?)?\b")


def _sources() -> list[Path]:
    return sorted(p for p in (ROOT / "lab").rglob("*.py") if "__pycache__" not in p.parts)


def _tracker_sources() -> list[Path]:
    tests = [p for p in (ROOT / "tests").rglob("*.py") if "__pycache__" not in p.parts]
    docs = [p for p in (ROOT / "docs").glob("*.md") if p.name not in HISTORY_PAGES]
    loadgen = [p for p in (ROOT / "loadgen").rglob("*") if p.is_file() and p.suffix in (".py", ".md")]
    return [*_sources(), *tests, *loadgen, *sorted((ROOT / "notebooks").glob("*.ipynb")), *docs, ROOT / "README.md"]


def test_no_tracker_numbers_in_code_tests_notebooks_or_docs():
    found = [f"{p.relative_to(ROOT)}:{n}" for p in _tracker_sources()
             for n, line in enumerate(p.read_text().splitlines(), 1) if TRACKER.search(line)]
    assert not found, f"'issue N' outside the history pages (git history keeps it): {found[:10]}"


def test_no_load_average_figures_in_lab():
    found = [f"{p.relative_to(ROOT)}:{n}" for p in _sources()
             for n, line in enumerate(p.read_text().splitlines(), 1) if LOAD_FIGURE.search(line)]
    assert not found, f"measured figures belong in docs/measurements.md: {found[:10]}"


def test_the_patterns_catch_what_they_are_for():
    # the numbers interpolated: this file's own text holds no tracker number
    for text in (f"(issue {24} item 4)", f"issues {12}", f"Issue #{35}", f"issue{7}"):
        assert TRACKER.search(text), text
    assert not TRACKER.search("the issues the lab found") and not TRACKER.search("an issue of 3 sends")
    for text in ("load average 3.4-4.2", "at load 8", "(0d5a0aa, load 1-4)", "load average 15"):
        assert LOAD_FIGURE.search(text), text
    for text in ("the load average when the run started", "a load generator", "lab load --rate 40"):
        assert not LOAD_FIGURE.search(text), text


def test_the_figures_page_names_what_the_code_points_to():
    page = (ROOT / "docs" / "measurements.md").read_text()
    pointing = sorted({p.relative_to(ROOT).as_posix() for p in _sources() if "docs/measurements.md" in p.read_text()})
    missing = [f for f in pointing if f"`{f}`" not in page]
    assert not missing, f"code points to docs/measurements.md but the page has no entry for: {missing}"
