"""A bad setting names where it came from: the variable, the flag or the file's section;
a misspelt section or key gets a "did you mean" hint."""
from __future__ import annotations

import pytest

from lab.cluster.config import load_config
from lab.cluster.services import load_services
from lab.errors import ConfigError


def test_a_bad_variable_is_named_with_its_value():
    with pytest.raises(ConfigError, match=r"^LAB_PORT=abc: port must be a whole number") as err:
        load_config(env={"LAB_PORT": "abc"})
    assert err.value.facts["source"] == "LAB_PORT"
    with pytest.raises(ConfigError, match=r"^LAB_PORT=70000: port must be a TCP port \(1-65535\), got 70000"):
        load_config(env={"LAB_PORT": "70000"})
    with pytest.raises(ConfigError, match=r"^LAB_READ_CONSISTENCY=five: read_consistency must be one of"):
        load_config(env={"LAB_READ_CONSISTENCY": "five"})
    with pytest.raises(ConfigError, match=r"^LAB_REDIS_PORT=x: redis_port must be a whole number"):
        load_services(env={"LAB_REDIS_PORT": "x"})


def test_a_bad_file_value_names_the_file_and_section(tmp_path):
    path = tmp_path / "lab.toml"
    path.write_text("[cluster]\nport = 'abc'\n")
    with pytest.raises(ConfigError, match=rf"^port = 'abc' in \[cluster\] of {path}: port must be a whole number"):
        load_config(toml_path=path)


def test_a_flag_is_named_as_a_flag():
    with pytest.raises(ConfigError, match=r"^--read-consistency twelve: read_consistency must be one of"):
        load_config(flags={"read_consistency": "twelve"})


def test_a_misspelt_section_is_unknown_with_a_hint(tmp_path):
    path = tmp_path / "lab.toml"
    path.write_text("[clutser]\nport = 9042\n")
    with pytest.raises(ConfigError, match=r"unknown section \[clutser\] in .*did you mean \[cluster\]\?") as err:
        load_config(toml_path=path)
    assert "known sections: [cluster], [services]" in str(err.value) and "unknown keys" not in str(err.value)
    path.write_text("[cluster]\nport = 9042\n[servics]\noutbox = 'kafka'\n")
    for load in (lambda: load_config(toml_path=path), lambda: load_services(toml_path=path)):
        with pytest.raises(ConfigError, match=r"unknown section \[servics\].*did you mean \[services\]\?"):
            load()


def test_a_bare_file_of_cluster_keys_and_its_inline_tables_still_read(tmp_path):
    path = tmp_path / "lab.toml"
    path.write_text("port = 9043\nrest_addresses = { '10.0.0.5' = '127.0.0.1:10005' }\n")
    cfg = load_config(toml_path=path)
    assert cfg.port == 9043 and cfg.rest_addresses == (("10.0.0.5", "127.0.0.1:10005"),)


def test_a_misspelt_key_gets_a_hint(tmp_path):
    path = tmp_path / "lab.toml"
    path.write_text("[cluster]\nprot = 9042\n")
    with pytest.raises(ConfigError, match=r"unknown keys in \[cluster\] of .*: prot \(did you mean port\?\)"):
        load_config(toml_path=path)


def test_a_secret_is_never_shown_in_the_error():
    from lab.cluster.settings import source_of

    assert source_of("password", file_values={}, env={"LAB_PASSWORD": "s3cret"}, flags=None,
                     where="x") == ("LAB_PASSWORD", "LAB_PASSWORD=***")
    with pytest.raises(ConfigError) as err:
        load_config(env={"LAB_USERNAME": "alice", "LAB_PASSWORD": "s3cret", "LAB_PORT": "x"})
    assert "s3cret" not in str(err.value)
