"""`lab soak`: a short mixed load with periodic audits on the real node,
its totals in results/<run-id>/soak/summary.json, and an audit that does see a loss."""
from __future__ import annotations

import json
import uuid

import pytest
from click.testing import CliRunner

from lab.load.audit import Ack
from lab.cli import main
from lab.load.soak import SOAK_OPERATIONS, Soak, SoakOptions

pytestmark = pytest.mark.node


def test_lab_soak_runs_audits_and_writes_totals(store, tmp_path):
    results = tmp_path / "results"
    out = CliRunner().invoke(main, ["soak", "--duration", "4s", "--audit-every", "1.5s", "--threads", "4",
                                    "--conversations", "4", "--seed", "7", "--keyspace", store.keyspace,
                                    "--home", str(tmp_path / "home"), "--results", str(results)])
    assert out.exit_code == 0, out.output
    [summary_path] = results.glob("*/soak/summary.json")
    s = json.loads(summary_path.read_text())
    assert set(s["operations"]) == set(SOAK_OPERATIONS)
    assert s["operations"]["send"]["ok"] > 0 and s["operations"]["history"]["ok"] > 0
    assert s["operations_total"] == sum(o["ok"] + o["errors"] for o in s["operations"].values())
    assert s["errors_total"] == 0 and s["acked"] == s["operations"]["send"]["ok"]
    assert (s["lost"], s["duplicated"], s["replay_mismatches"], s["recalls_lost"], s["batch_missing"]) == (0,) * 5
    assert s["audits_run"] >= 2 and s["audits"][-1]["final"] and s["ok"]
    cluster = s["environment"]["cluster"]
    assert cluster["keyspace"] == store.keyspace and "password" in cluster and s["environment"]["server"]
    assert "acked" in out.output and "summary:" in out.output


def test_the_audit_sees_a_lost_and_a_duplicated_ack(store):
    soak = Soak(store, SoakOptions(duration_seconds=1, threads=2, conversations=2, max_operations=20))
    totals = soak.run()
    assert totals.ok and totals.final_audit.acked > 0 and 0 < totals.operations_total <= 20
    first = soak._acks[0]
    # an ack for a message the store never wrote, and a second "first" ack of an acked client id
    ghost = Ack(phase="soak", tenant_id=first.tenant_id, conversation_id=first.conversation_id,
                conversation_seq=first.conversation_seq + 1_000, message_id=first.message_id + 1,
                client_message_id=f"ghost-{uuid.uuid4().hex}", sender_id=first.sender_id)
    twice = Ack(**{**first.__dict__, "message_id": first.message_id + 2})
    soak._acks += [ghost, twice]
    audit = soak.audit(final=True)
    assert (audit.lost, audit.duplicated) == (1, 1) and not audit.clean
    assert not soak.totals().ok
