"""conversation_head is restored from durable state after a writer crash.

A writer process sends over a few conversations and is killed with SIGKILL mid-stream (not an
in-process fault: no ``finally``, no drain, whatever its head thread had queued is gone): by the
test after some acks, or by itself right after printing an ack (its head update then still in
flight, the case a crash hits most often). A new
process opens a store on the same state folder, with or without calling ``recover()``: every
acknowledged message must then be on history, the latest page of each conversation starting at
its newest acknowledged message (the head re-driven from the log), each message exactly once.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.node

SCRIPT = Path(__file__).with_name("crash_writers.py")
CONVERSATIONS = 3
ACKS_BEFORE_KILL = 45
PROCESS_TIMEOUT_SECONDS = 180


def run_writer(keyspace: str, state_dir: Path, tenant: uuid.UUID, conversations: list[uuid.UUID],
               acks_before_kill: int, store_options: dict, *, self_kill: bool) -> list[dict]:
    """Start a sending writer and SIGKILL it after ``acks_before_kill`` acks (or let it SIGKILL
    itself then); every ack it printed."""
    args = {"keyspace": keyspace, "state_dir": str(state_dir), "tenant_id": str(tenant),
            "conversations": [str(c) for c in conversations], "node_id": 7, "options": store_options,
            "die_after": acks_before_kill if self_kill else None}
    proc = subprocess.Popen([sys.executable, str(SCRIPT), "send", json.dumps(args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    acks = []
    try:
        for line in proc.stdout:
            acks.append(json.loads(line))
            if len(acks) >= acks_before_kill:
                break
    finally:
        proc.kill()  # SIGKILL, our own child, by handle
        rest, err = proc.communicate(timeout=PROCESS_TIMEOUT_SECONDS)
    acks += [json.loads(line) for line in rest.splitlines() if line.strip()]
    assert len(acks) >= acks_before_kill, f"the writer died on its own: {err[-2000:]}"
    return acks


def run_restarted(keyspace: str, state_dir: Path, *, call_recover: bool, store_options: dict) -> dict:
    args = {"keyspace": keyspace, "state_dir": str(state_dir), "node_id": 8, "call_recover": call_recover,
            "options": store_options}
    done = subprocess.run([sys.executable, str(SCRIPT), "recover", json.dumps(args)], capture_output=True,
                          text=True, timeout=PROCESS_TIMEOUT_SECONDS, env=os.environ.copy())
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def history_seqs(store, tenant, conversation) -> list[int]:
    seqs, anchor = [], None
    while True:
        page = store.history(tenant, conversation, anchor=anchor, limit=20)
        seqs += [m.conversation_seq for m in page.messages]
        if not page.has_more:
            return seqs
        anchor = page.next_anchor


# Two of the four combinations (each a writer process and a restarted one, ~10 s): each way of
# dying and each way of restarting is run once; a restart's open recovers whether or not
# recover() is then called, so the cross terms add no case.
@pytest.mark.parametrize(("call_recover", "self_kill"), [(True, True), (False, False)],
                         ids=["recover-killed-itself", "open-only-killed-by-test"])
def test_sigkilled_writer_head_is_restored(store, open_store, tmp_path, call_recover, self_kill, store_options):
    tenant = uuid.uuid4()
    conversations = [uuid.uuid4() for _ in range(CONVERSATIONS)]
    options = {k: v for k, v in store_options(tmp_path).items() if k == "outbox"}
    acks = run_writer(store.keyspace, tmp_path, tenant, conversations, ACKS_BEFORE_KILL, options, self_kill=self_kill)
    heads_after_kill = {c: getattr(store.head(tenant, c), "latest_conversation_seq", None) for c in conversations}
    restarted = run_restarted(store.keyspace, tmp_path, call_recover=call_recover, store_options=options)
    reader = open_store(state_dir=tmp_path, node_id=9)  # the state folder's DEKs open the rows
    summary = []
    for conversation in conversations:
        acked = sorted(a["conversation_seq"] for a in acks if a["conversation_id"] == str(conversation))
        latest = reader.history(tenant, conversation, limit=5)
        seqs = history_seqs(reader, tenant, conversation)
        summary.append(f"{conversation}: acked up to {acked[-1]}, head after kill {heads_after_kill[conversation]}, "
                       f"latest page starts at {latest.messages[0].conversation_seq if latest.messages else None}")
        assert latest.messages and latest.messages[0].conversation_seq >= acked[-1], summary[-1]
        assert len(seqs) == len(set(seqs)), "a message shown twice"
        assert set(acked) <= set(seqs), f"acked but not in history: {sorted(set(acked) - set(seqs))}"
    print("\n".join(summary), restarted)
