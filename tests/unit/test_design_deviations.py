"""docs/design-deviations.md names, for every deviation, the test that pins it: each named test
file must exist and each named test function must be defined in it (a renamed or deleted test
fails here, so the page cannot rot)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "design-deviations.md"
# `tests/node/x.py::test_a`, and `::test_b` continuing the file named before it in the same cell
_REF = re.compile(r"`(tests/[\w/]+\.py)?(?:::(\w+))?`")


def references() -> list[tuple[str, str | None]]:
    refs = []
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        current = None
        for path, name in _REF.findall(line):
            if path:
                current = path
            if current and (path or name):
                refs.append((current, name or None))
    return refs


def test_the_page_names_tests():
    assert len({path for path, _ in references()}) >= 10


@pytest.mark.parametrize(("path", "name"), references(), ids=lambda v: str(v))
def test_every_named_test_exists(path, name):
    source = ROOT / path
    assert source.is_file(), f"{path} does not exist"
    if name is not None:
        assert re.search(rf"^def {re.escape(name)}\(", source.read_text(encoding="utf-8"), re.M), \
            f"{path} defines no {name}"
