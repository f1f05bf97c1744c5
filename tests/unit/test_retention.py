import dataclasses
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lab.constants import load_constants
from lab.errors import ConfigError, InvalidId, UnknownRetentionClass, ValidationError
from lab.store.rows.retention import (
    CASSANDRA_MAX_TTL_SECONDS,
    RetentionClass,
    RetentionPolicy,
    parse_retention_class,
)

DAY_S = 86_400
DAY_MS = DAY_S * 1000
TENANT = uuid.UUID("11111111-1111-1111-1111-111111111111")
OTHER = uuid.UUID("22222222-2222-2222-2222-222222222222")


@pytest.fixture
def policy():
    return RetentionPolicy(tenant_default_ttl_seconds={TENANT: 90 * DAY_S},
                           tenant_custom_ttl_seconds={TENANT: 400 * DAY_S})


@pytest.mark.parametrize("name,member", [("default", RetentionClass.DEFAULT),
                                         ("ephemeral_24h", RetentionClass.EPHEMERAL_24H),
                                         ("COMPLIANCE_HOLD", RetentionClass.COMPLIANCE_HOLD),
                                         ("tenant_custom", RetentionClass.TENANT_CUSTOM),
                                         (3, RetentionClass.TENANT_CUSTOM)])
def test_parse_retention_class(name, member):
    assert parse_retention_class(name) is member


@pytest.mark.parametrize("bad", ["forever", "ephemeral", 4, -1, None, True])
def test_parse_retention_class_rejects_unknown(bad):
    with pytest.raises(UnknownRetentionClass):
        parse_retention_class(bad)


def test_default_class_uses_30_days_unless_the_tenant_overrides(policy):
    assert RetentionPolicy().ttl_seconds("default", OTHER) == 30 * DAY_S == 2_592_000
    assert policy.ttl_seconds(RetentionClass.DEFAULT, OTHER) == 30 * DAY_S
    assert policy.ttl_seconds(RetentionClass.DEFAULT, TENANT) == 90 * DAY_S
    assert policy.ttl_seconds(RetentionClass.DEFAULT, str(TENANT)) == 90 * DAY_S


def test_ephemeral_is_24h_for_everyone(policy):
    assert policy.ttl_seconds("ephemeral_24h", TENANT) == 86_400
    assert policy.ttl_seconds(1, OTHER) == 86_400


def test_compliance_hold_never_gets_a_ttl(policy):
    for tenant in (TENANT, OTHER):
        assert policy.ttl_seconds(RetentionClass.COMPLIANCE_HOLD, tenant) == 0
        assert policy.remaining_ttl_seconds(RetentionClass.COMPLIANCE_HOLD, tenant,
                                            created_at_ms=0, now_ms=10**13) == 0


def test_tenant_custom_uses_the_mapping_and_fails_closed_to_no_expiry(policy):
    assert policy.ttl_seconds("tenant_custom", TENANT) == 400 * DAY_S
    assert policy.ttl_seconds("tenant_custom", OTHER) == 0  # no mapping: never expire


def test_defaults_come_from_constants():
    policy = RetentionPolicy.from_constants(load_constants().replace(default_retention_days=7, ephemeral_ttl_seconds=3600))
    assert policy.ttl_seconds("default", OTHER) == 7 * DAY_S
    assert policy.ttl_seconds("ephemeral_24h", OTHER) == 3600


def test_remaining_ttl_is_created_plus_period_minus_now_rounded_up(policy):
    now = 1_700_000_000_000
    assert policy.remaining_ttl_seconds("default", OTHER, created_at_ms=now, now_ms=now) == 30 * DAY_S
    assert policy.remaining_ttl_seconds("default", OTHER, created_at_ms=now - 10 * DAY_MS, now_ms=now) == 20 * DAY_S
    assert policy.remaining_ttl_seconds("default", TENANT, created_at_ms=now - 10 * DAY_MS, now_ms=now) == 80 * DAY_S
    created = now - 30 * DAY_MS
    assert policy.remaining_ttl_seconds("default", OTHER, created_at_ms=created + 1, now_ms=now) == 1
    assert policy.remaining_ttl_seconds("default", OTHER, created_at_ms=created + 1001, now_ms=now) == 2
    assert policy.remaining_ttl_seconds("default", OTHER, created_at_ms=created + 1000, now_ms=now) == 1


def test_remaining_ttl_is_none_once_expired(policy):
    now = 1_700_000_000_000
    assert policy.remaining_ttl_seconds("ephemeral_24h", OTHER, created_at_ms=now - DAY_MS, now_ms=now) is None
    assert policy.remaining_ttl_seconds("ephemeral_24h", OTHER, created_at_ms=now - 2 * DAY_MS, now_ms=now) is None
    assert policy.remaining_ttl_seconds("ephemeral_24h", OTHER, created_at_ms=now - DAY_MS + 1, now_ms=now) == 1


def test_remaining_ttl_of_a_future_created_at_is_capped_at_the_period(policy):
    now = 1_700_000_000_000
    assert policy.remaining_ttl_seconds("ephemeral_24h", OTHER, created_at_ms=now + 3_600_000, now_ms=now) == DAY_S


def test_remaining_ttl_is_zero_for_classes_without_ttl(policy):
    assert policy.remaining_ttl_seconds("tenant_custom", OTHER, created_at_ms=0, now_ms=10**13) == 0


@pytest.mark.parametrize("kwargs", [{"created_at_ms": -1, "now_ms": 0}, {"created_at_ms": 0, "now_ms": True},
                                    {"created_at_ms": 1.5, "now_ms": 0}])
def test_remaining_ttl_validates_times(policy, kwargs):
    with pytest.raises(ValidationError):
        policy.remaining_ttl_seconds("default", OTHER, **kwargs)


@given(created=st.integers(0, 2**45), age_ms=st.integers(-(10**9), 400 * DAY_MS),
       cls=st.sampled_from(["default", "ephemeral_24h", "tenant_custom"]))
def test_remaining_ttl_never_expires_early_nor_a_second_late(created, age_ms, cls):
    policy = RetentionPolicy(tenant_custom_ttl_seconds={TENANT: 100 * DAY_S})
    now = created + age_ms
    if now < 0:
        return
    period = policy.ttl_seconds(cls, TENANT)
    remaining = policy.remaining_ttl_seconds(cls, TENANT, created_at_ms=created, now_ms=now)
    deadline_ms = created + period * 1000
    if deadline_ms <= now:
        assert remaining is None
    else:
        assert 1 <= remaining <= period
        expires_ms = now + remaining * 1000
        if age_ms >= 0:
            assert deadline_ms <= expires_ms < deadline_ms + 1000
        else:
            assert expires_ms <= deadline_ms


def test_max_ttl_is_enforced():
    assert CASSANDRA_MAX_TTL_SECONDS == 630_720_000
    RetentionPolicy(default_days=7300)
    with pytest.raises(ValidationError):
        RetentionPolicy(default_days=7301)
    RetentionPolicy(tenant_custom_ttl_seconds={TENANT: CASSANDRA_MAX_TTL_SECONDS})
    with pytest.raises(ValidationError):
        RetentionPolicy(tenant_custom_ttl_seconds={TENANT: CASSANDRA_MAX_TTL_SECONDS + 1})
    with pytest.raises(ValidationError):
        RetentionPolicy(ephemeral_ttl_seconds=CASSANDRA_MAX_TTL_SECONDS + 1)


@pytest.mark.parametrize("kwargs", [{"default_days": 0}, {"default_days": True}, {"default_days": 1.5},
                                    {"ephemeral_ttl_seconds": 0},
                                    {"tenant_default_ttl_seconds": {TENANT: 0}},
                                    {"tenant_default_ttl_seconds": {TENANT: "30"}},
                                    {"tenant_custom_ttl_seconds": [(TENANT, 5)]}])
def test_policy_rejects_bad_settings(kwargs):
    with pytest.raises(ValidationError):
        RetentionPolicy(**kwargs)


def test_policy_rejects_malformed_tenant_ids():
    with pytest.raises(InvalidId):
        RetentionPolicy(tenant_custom_ttl_seconds={"tenant-a": 5})


def test_policy_is_immune_to_later_changes_of_the_callers_dict():
    mapping = {TENANT: 5 * DAY_S}
    policy = RetentionPolicy(tenant_custom_ttl_seconds=mapping)
    mapping[TENANT] = 1
    mapping[OTHER] = 1
    assert policy.ttl_seconds("tenant_custom", TENANT) == 5 * DAY_S
    assert policy.ttl_seconds("tenant_custom", OTHER) == 0
    with pytest.raises(TypeError):
        policy.tenant_custom_ttl_seconds[OTHER] = 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.default_days = 1


def test_from_toml(tmp_path):
    path = tmp_path / "retention.toml"
    path.write_text(f"""
default_days = 14
[tenant_default_ttl_seconds]
"{TENANT}" = 604800
[tenant_custom_ttl_seconds]
"{OTHER}" = 31536000
""")
    policy = RetentionPolicy.from_toml(path)
    assert policy.ttl_seconds("default", OTHER) == 14 * DAY_S
    assert policy.ttl_seconds("default", TENANT) == 7 * DAY_S
    assert policy.ttl_seconds("tenant_custom", OTHER) == 365 * DAY_S
    assert policy.ttl_seconds("tenant_custom", TENANT) == 0
    assert policy.ttl_seconds("ephemeral_24h", TENANT) == 86_400


def test_from_mapping_takes_missing_values_from_constants():
    policy = RetentionPolicy.from_mapping({}, constants=load_constants().replace(default_retention_days=60))
    assert policy.ttl_seconds("default", TENANT) == 60 * DAY_S


def test_from_toml_errors(tmp_path):
    with pytest.raises(ConfigError):
        RetentionPolicy.from_toml(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("default_days = [")
    with pytest.raises(ConfigError):
        RetentionPolicy.from_toml(bad)
    unknown = tmp_path / "unknown.toml"
    unknown.write_text("retention_days = 3\n")
    with pytest.raises(ConfigError) as info:
        RetentionPolicy.from_toml(unknown)
    assert info.value.keys == ["retention_days"]
