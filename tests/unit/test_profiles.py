"""Workload profiles are input: every field typed and bounded, names kept inside the profile
folders; each problem one ConfigError naming the field."""
from __future__ import annotations

import pytest

from lab.errors import ConfigError
from lab.workload.profiles import load_profile, profile_from_mapping, profile_path


@pytest.mark.parametrize("name", ["../../pyproject", "../profiles/chat_mix", "/etc/passwd", "a/b", ".hidden", ""])
def test_a_profile_name_never_leaves_the_profile_folders(name):
    with pytest.raises(ConfigError, match="not a profile name"):
        profile_path(name)


@pytest.mark.parametrize("data, field", [
    ({}, "name"),
    ({"name": 5}, "name"),
    ({"name": "x", "sizes": 5}, "sizes"),
    ({"name": "x", "sizes": {"quick": "many"}}, "sizes.quick"),
    ({"name": "x", "sizes": {"quick": 0}}, "sizes.quick"),
    ({"name": "x", "conversations": {"e2ee_direct_share": 1.5}}, "e2ee_direct_share"),
    ({"name": "x", "conversations": {"group_share": -0.1}}, "group_share"),
    ({"name": "x", "conversations": {"tenants": 2.5}}, "tenants"),
    ({"name": "x", "conversations": {"tenants": True}}, "tenants"),
    ({"name": "x", "messages": {"text": "lots"}}, "text"),
    ({"name": "x", "messages": {"text_bytes_max": 0}}, "text_bytes_max"),
    ({"name": "x", "messages": {"mention_share": float("nan")}}, "mention_share"),
    ({"name": "x", "holes": {"crash_probability": 2}}, "crash_probability"),
    ({"name": "x", "retention": {"default": "all"}}, "retention.default"),
    ({"name": "x", "retention": 1}, "retention"),
    ({"name": "x", "time": {"days": -1}}, "time.days"),
    ({"name": "x", "time": {"start": "yesterday"}}, "time.start"),
    ({"name": "x", "messages": 3}, "messages"),
])
def test_each_bad_field_is_one_error_naming_it(data, field):
    with pytest.raises(ConfigError) as err:
        profile_from_mapping(data, source="datasets/profiles/x.toml")
    assert field in str(err.value)
    assert "\n" not in str(err.value)


def test_the_shipped_profiles_pass():
    for name in ("chat_mix", "media_heavy", "text_only", "example_mix"):
        assert load_profile(name).name
