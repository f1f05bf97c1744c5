"""Code says what; history stays in git and measured figures in docs/measurements.md: no tracker
numbers and no load-average figures in lab/ (house style), and the figures page exists."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRACKER = re.compile(r"\bissues? \d+")
# a measured figure tagged with the machine's load: "load average 3.4-4.2", "at load 8", "load 1-4"
LOAD_FIGURE = re.compile(r"\bload(?: average)? \d+(?:\.\d+)?(?:\s*-\s*\d+(?:\.\d+)?)?\b")


def _sources() -> list[Path]:
    return sorted(p for p in (ROOT / "lab").rglob("*.py") if "__pycache__" not in p.parts)


def test_no_tracker_numbers_in_lab():
    found = [f"{p.relative_to(ROOT)}:{n}" for p in _sources()
             for n, line in enumerate(p.read_text().splitlines(), 1) if TRACKER.search(line)]
    assert not found, f"'issue N' in lab/ (git history keeps it): {found[:10]}"


def test_no_load_average_figures_in_lab():
    found = [f"{p.relative_to(ROOT)}:{n}" for p in _sources()
             for n, line in enumerate(p.read_text().splitlines(), 1) if LOAD_FIGURE.search(line)]
    assert not found, f"measured figures belong in docs/measurements.md: {found[:10]}"


def test_the_patterns_catch_what_they_are_for():
    assert TRACKER.search("(issue 24 item 4)") and TRACKER.search("issues 12")
    for text in ("load average 3.4-4.2", "at load 8", "(0d5a0aa, load 1-4)", "load average 15"):
        assert LOAD_FIGURE.search(text), text
    for text in ("the load average when the run started", "a load generator", "lab load --rate 40"):
        assert not LOAD_FIGURE.search(text), text


def test_the_figures_page_names_what_the_code_points_to():
    page = (ROOT / "docs" / "measurements.md").read_text()
    pointing = sorted({p.relative_to(ROOT).as_posix() for p in _sources() if "docs/measurements.md" in p.read_text()})
    missing = [f for f in pointing if f"`{f}`" not in page]
    assert not missing, f"code points to docs/measurements.md but the page has no entry for: {missing}"
