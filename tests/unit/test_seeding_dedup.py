"""Seeding's client_dedup row is the send path's (no node: the statements it builds). The bytes
it leaves on disk are checked against a sent row's on the node (tests/node/test_model_check.py)."""
from __future__ import annotations

from lab.store.write.seeding import DEDUP_COMMIT_AFTER_US, DEDUP_COMMIT_CQL, DEDUP_RESERVE_CQL
from lab.store.write.send import COMMIT_CQL, RESERVE_CQL


def test_dedup_texts_are_the_send_paths_with_a_pinned_write_time_and_no_paxos():
    assert "IF NOT EXISTS" in RESERVE_CQL and "IF NOT EXISTS" not in DEDUP_RESERVE_CQL
    assert DEDUP_RESERVE_CQL == RESERVE_CQL.replace(" IF NOT EXISTS", " USING TIMESTAMP ?")
    assert DEDUP_COMMIT_CQL.startswith("UPDATE {ks}.client_dedup USING TTL ? AND TIMESTAMP ? SET state = ?")
    assert DEDUP_COMMIT_CQL.replace(" AND TIMESTAMP ?", "") == COMMIT_CQL
    assert DEDUP_COMMIT_AFTER_US > 0   # the commit is the later write, whatever order the two land in
