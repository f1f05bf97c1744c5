"""S-5 on the real node: compliance_hold rows outlive the tenant's default TTL, and the
server's message_record has default_time_to_live == 0.

The tenant default is configured to a few seconds (RetentionPolicy), so the test waits
seconds, not days.
"""
from __future__ import annotations

import time
import uuid

import pytest

from lab.store import RetentionClass, RetentionPolicy
from store_checks import new_request, record_row, record_rows

pytestmark = pytest.mark.node

SHORT_DEFAULT_TTL_SECONDS = 3


def test_s5_message_record_table_ttl_is_zero(store):
    assert [d for d in store.check_schema()] == []
    row = store.connection.execute(
        "SELECT default_time_to_live FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
        (store.keyspace, "message_record")).one()
    assert row.default_time_to_live == 0


def test_s5_table_ttl_other_than_zero_is_reported(store, connection):
    """The check must be able to fail: give message_record a table TTL and it says so."""
    connection.execute(f"ALTER TABLE {store.keyspace}.message_record WITH default_time_to_live = 60")
    try:
        diffs = store.check_schema()
        assert [(d.table, d.what, d.expected, d.actual) for d in diffs] == \
               [("message_record", "default_time_to_live", 0, 60)]
    finally:
        connection.execute(f"ALTER TABLE {store.keyspace}.message_record WITH default_time_to_live = 0")
    assert store.check_schema() == []


def test_s5_compliance_hold_outlives_the_tenant_default_ttl(open_store, store):
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    s = open_store(retention=RetentionPolicy(tenant_default_ttl_seconds={tenant: SHORT_DEFAULT_TTL_SECONDS}))
    held_req = new_request(tenant_id=tenant, conversation_id=conversation, body=b"legal hold",
                           retention_class=RetentionClass.COMPLIANCE_HOLD)
    default_req = new_request(tenant_id=tenant, conversation_id=conversation, body=b"ordinary")
    held, default = s.send(held_req), s.send(default_req)
    ttl = record_row(store, tenant, conversation, default.conversation_seq, "TTL(payload_or_ciphertext) AS t").t
    assert 1 <= ttl <= SHORT_DEFAULT_TTL_SECONDS
    assert record_row(store, tenant, conversation, held.conversation_seq, "TTL(payload_or_ciphertext) AS t").t is None

    time.sleep(SHORT_DEFAULT_TTL_SECONDS + 1.5)
    rows = record_rows(store, tenant, conversation, [held.conversation_seq, default.conversation_seq])
    assert [r.conversation_seq for r in rows] == [held.conversation_seq]  # the default row expired
    assert s.decode_record(rows[0]).body == b"legal hold"  # the held one is still readable
