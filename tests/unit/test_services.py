"""Outbox / hot-window settings (lab.cluster.services): precedence, validation, secrets, client config."""
from __future__ import annotations

import pytest

from lab.cluster.services import ServicesConfig, load_services
from lab.errors import ConfigError


def test_flags_over_env_over_toml_over_defaults(tmp_path):
    toml = tmp_path / "lab.toml"
    toml.write_text('[cluster]\nport = 9042\n[services]\noutbox = "kafka"\nkafka_partitions = 8\nredis_port = 1111\n')
    assert load_services().outbox == "local"
    s = load_services(toml_path=toml, env={"LAB_KAFKA_PARTITIONS": "6", "LAB_PORT": "1", "LAB_REDIS_PORT": "2222"},
                      flags={"redis_port": 3333})
    assert (s.outbox, s.kafka_partitions, s.redis_port) == ("kafka", 6, 3333)


def test_unknown_and_bad_values_are_config_errors(tmp_path):
    toml = tmp_path / "lab.toml"
    toml.write_text('[services]\nkafka_partitons = 8\n')
    with pytest.raises(ConfigError):
        load_services(toml_path=toml)
    for bad in ({"outbox": "redpanda"}, {"kafka_partitions": 0}, {"kafka_security_protocol": "TLS"},
                {"kafka_topic": "no spaces"}, {"hot_window": "memcached"}, {"redis_port": 70000}):
        with pytest.raises(ConfigError):
            load_services(flags=bad)
    with pytest.raises(ConfigError):  # SASL needs its mechanism, user and password
        ServicesConfig(kafka_security_protocol="SASL_SSL", kafka_sasl_username="u")
    with pytest.raises(ConfigError):
        ServicesConfig(kafka_tls_ca_file=tmp_path / "missing.pem")


def test_secrets_are_masked_but_reach_the_client(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    s = load_services(env={"LAB_KAFKA_SECURITY_PROTOCOL": "sasl_ssl", "LAB_KAFKA_SASL_MECHANISM": "scram-sha-512",
                           "LAB_KAFKA_SASL_USERNAME": "lab", "LAB_KAFKA_SASL_PASSWORD": "s3cret",
                           "LAB_KAFKA_TLS_CA_FILE": str(ca), "LAB_REDIS_PASSWORD": "r3dis"})
    assert "s3cret" not in repr(s) and "r3dis" not in repr(s) and "s3cret" not in str(s.redacted())
    assert "s3cret" not in str(s.describe())
    conf = s.kafka_client_config()
    assert (conf["security.protocol"], conf["sasl.mechanism"], conf["sasl.password"], conf["ssl.ca.location"]) == (
        "SASL_SSL", "SCRAM-SHA-512", "s3cret", str(ca))
    assert s.redis_client_kwargs()["password"] == "r3dis"


def test_one_topic_per_keyspace_unless_configured():
    assert ServicesConfig().topic_for("msglab") == "outbox.msglab"
    assert ServicesConfig(kafka_topic="chat.log").topic_for("msglab") == "chat.log"
