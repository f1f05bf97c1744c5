"""Appendix B as data: the file, the typed defaults and the store agree."""
from __future__ import annotations

import dataclasses

import pytest

from lab.constants import APPENDIX_B_PATH, Constants, load_constants, read_entries
from lab.errors import ConfigError


def test_file_and_typed_defaults_agree():
    """Modules use ``Constants()`` defaults (ids, media, records, retention, crypto, capacity,
    workload); the store uses ``load_constants()``. They must be the same numbers, or a default
    argument would silently disagree with the file the store reads."""
    entries = read_entries()
    fields = {f.name: f.default for f in dataclasses.fields(Constants)}
    assert set(entries) == set(fields)
    for name, entry in entries.items():
        assert entry.value == fields[name], name
        assert entry.unit and entry.section and entry.doc, name
    assert load_constants() == Constants()


def test_a_changed_file_changes_the_constants(tmp_path):
    path = tmp_path / "appendix_b.toml"
    path.write_text(APPENDIX_B_PATH.read_text().replace(
        "[constants.batch_read_in_list_limit]\nvalue = 100", "[constants.batch_read_in_list_limit]\nvalue = 7"))
    assert load_constants(path).batch_read_in_list_limit == 7


def test_unknown_constant_is_an_error(tmp_path):
    path = tmp_path / "appendix_b.toml"
    path.write_text(APPENDIX_B_PATH.read_text() + '\n[constants.nope]\nvalue = 1\nunit = "x"\n')
    with pytest.raises(ConfigError, match="nope"):
        load_constants(path)
