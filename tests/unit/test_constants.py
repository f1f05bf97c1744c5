"""Appendix B as data: appendix_b.toml is the one source; the code has no values of its own."""
from __future__ import annotations

import dataclasses
import difflib

import pytest
import tomlkit

from lab.calibration.propose import proposed_text
from lab.constants import APPENDIX_B_PATH, Constants, load_constants, read_entries
from lab.errors import CalibrationError, ConfigError


def test_the_code_has_no_constant_values():
    """No typed defaults to keep equal to the file: every field is required."""
    assert all(f.default is dataclasses.MISSING for f in dataclasses.fields(Constants))
    with pytest.raises(TypeError):
        Constants()  # type: ignore[call-arg]


def test_every_constant_comes_from_the_file_with_its_type():
    entries = read_entries()
    constants = load_constants()
    assert set(entries) == {f.name for f in dataclasses.fields(Constants)}
    for name, entry in entries.items():
        assert getattr(constants, name) == entry.value, name
        assert entry.unit and entry.section and entry.doc, name
    assert isinstance(constants.message_seq_bucket_width, int) and isinstance(constants.b_row_bytes, float)
    assert Constants.appendix_b() == constants and Constants.appendix_b() is Constants.appendix_b()


def test_module_defaults_are_the_files_values():
    """The modules that take appendix B as default arguments read it from the file."""
    from lab.calibration.capacity_model import disk_sizing
    from lab.store.rows import ids, media, retention

    c = Constants.appendix_b()
    assert ids.DEFAULT_SEQ_BUCKET_WIDTH == c.message_seq_bucket_width
    assert media.MEDIA_THUMBNAIL_MAX_BYTES == c.media_thumbnail_max_bytes
    assert retention.RetentionPolicy().default_days == c.default_retention_days
    assert disk_sizing.partition_bytes() == c.message_seq_bucket_width * c.b_row_bytes


def test_a_changed_file_changes_the_constants(tmp_path):
    path = tmp_path / "appendix_b.toml"
    path.write_text(APPENDIX_B_PATH.read_text().replace(
        "[constants.batch_read_in_list_limit]\nvalue = 100", "[constants.batch_read_in_list_limit]\nvalue = 7"))
    assert load_constants(path).batch_read_in_list_limit == 7


@pytest.mark.parametrize("edit, match", [
    (lambda t: t + '\n[constants.nope]\nvalue = 1\nunit = "x"\n', "nope"),
    (lambda t: t.replace("[constants.lsm_space_amp]\nvalue = 1.2\n", "[constants.lsm_space_amp]\n"), "no value"),
    (lambda t: t.replace('[constants.lsm_space_amp]\nvalue = 1.2\nunit = "x"\nsection = "§7"\n'
                         'doc = "LSM space amplification"\n', ""), "missing from .*lsm_space_amp"),
    (lambda t: t.replace("[constants.body_lru_entries]\nvalue = 10000", "[constants.body_lru_entries]\nvalue = 1.5"),
     "integer"),
    (lambda t: t.replace("[constants.body_lru_entries]\nvalue = 10000", '[constants.body_lru_entries]\nvalue = "x"'),
     "number"),
])
def test_a_bad_file_is_a_config_error(tmp_path, edit, match):
    path = tmp_path / "appendix_b.toml"
    path.write_text(edit(APPENDIX_B_PATH.read_text()))
    with pytest.raises(ConfigError, match=match):
        load_constants(path)


def test_a_proposal_changes_only_the_value_lines_of_the_toml():
    """tomlkit round trip: the proposed file differs from the file in the changed value lines
    only, each carrying its evidence; comments, order and layout stay."""
    text = APPENDIX_B_PATH.read_text()
    assert tomlkit.dumps(tomlkit.parse(text)) == text
    new = proposed_text(text, {"b_row_bytes": (412, "measured 412 B\n(b_row notebook)"), "lsm_space_amp": (1.35, "x")})
    changed = [line for line in difflib.unified_diff(text.splitlines(), new.splitlines(), lineterm="", n=0)
               if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert changed == ["-value = 600", "+value = 412 # measured 412 B (b_row notebook)", "-value = 1.2",
                       "+value = 1.35 # x"]
    assert text.splitlines()[:3] == new.splitlines()[:3]  # the file's own header comments
    applied = tomlkit.parse(new)["constants"]
    assert applied["b_row_bytes"]["value"] == 412 and applied["b_row_bytes"]["unit"] == "B"
    again = proposed_text(new, {"b_row_bytes": (500, "second run")})
    assert "value = 500 # second run" in again and "412" not in again
    with pytest.raises(CalibrationError, match="nope"):
        proposed_text(text, {"nope": (1, "x")})
