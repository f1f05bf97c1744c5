"""The broker dies under load: SIGKILL of a Kafka broker of this test's own,
on loopback, mid-load; bounded in time and sends.

- while it is down, no send is acknowledged: every send that started after the kill and ended
  before the restart failed (OutboxError, nothing acked);
- after it is back, the clients retry what failed (same requests) and the audit finds every
  acknowledged message exactly once: one message_record row with the acked ids, one entry in
  the log, client_dedup COMMITTED.

The numbers (sends, acked, refused, retried, lost, duplicated) go to
results/tests-<run-id>/broker_kill.md.
"""
from __future__ import annotations

import shutil
import threading
import time
import uuid

import pytest

from lab.cluster.embedded.kafka_broker import BrokerOptions, EmbeddedBroker
from lab.errors import LabError
from lab.store import DedupState, blob_to_u128
from store_checks import dedup_row, new_request

pytestmark = pytest.mark.node

PORT, CONTROLLER_PORT = 19192, 19193   # not the shared broker's 19092/19093
THREADS = 6
CONVERSATIONS = 12
BEFORE_KILL_SECONDS = 3.0
DOWN_SECONDS = 9.0                     # > 3 refusals' length: some sends start and end while it is down
AFTER_RESTART_SECONDS = 3.0
MAX_SENDS = 20_000                     # a bound on the loop whatever the timings
RETRY_ATTEMPTS = 5
DELIVERY_TIMEOUT_MS = 2500             # shorter than the outage: a send during it is refused, not parked


@pytest.fixture(scope="module")
def own_broker(lab_home):
    broker = EmbeddedBroker(BrokerOptions(home=lab_home, folder=f"test-brokers/kill-{uuid.uuid4().hex[:8]}",
                                          port=PORT, controller_port=CONTROLLER_PORT, heap="384m"))
    broker.start()
    yield broker
    broker.stop()
    shutil.rmtree(broker.directory, ignore_errors=True)  # its own folder: data of this test only


class Load:
    """Closed-loop senders over a few conversations; every outcome recorded with its times."""

    def __init__(self, store, tenant) -> None:
        self.store, self.tenant = store, tenant
        self.conversations = [uuid.uuid4() for _ in range(CONVERSATIONS)]
        self.outcomes: list[tuple[float, float, object, object]] = []  # (start, end, request, ack | error)
        self.lock = threading.Lock()
        self.halt = threading.Event()
        self.count = 0

    def run(self, i: int) -> None:
        while not self.halt.is_set():
            with self.lock:
                if self.count >= MAX_SENDS:
                    return
                self.count += 1
            conversation = self.conversations[self.count % CONVERSATIONS]
            req = new_request(tenant_id=self.tenant, conversation_id=conversation, sender_id=conversation,
                              body=b"kill %d" % self.count)
            t0 = time.monotonic()
            try:
                result = self.store.send(req)
            except LabError as exc:
                result = exc
            with self.lock:
                self.outcomes.append((t0, time.monotonic(), req, result))


def test_killing_the_broker_loses_no_acked_message(own_broker, open_store, store, report):
    services = own_broker_services(own_broker)
    s = open_store(outbox="kafka", services=services)
    load = Load(s, uuid.uuid4())
    threads = [threading.Thread(target=load.run, args=(i,), daemon=True) for i in range(THREADS)]
    for t in threads:
        t.start()
    time.sleep(BEFORE_KILL_SECONDS)
    own_broker.kill()
    killed_at = time.monotonic()
    time.sleep(DOWN_SECONDS)
    restarting_at = time.monotonic()
    restarted = own_broker.restart()
    back_at = time.monotonic()
    time.sleep(AFTER_RESTART_SECONDS)
    load.halt.set()
    for t in threads:
        t.join(timeout=60)

    acked = {r.client_message_id: (r, a) for _, _, r, a in load.outcomes if not isinstance(a, Exception)}
    failed = [(t0, t1, r, a) for t0, t1, r, a in load.outcomes if isinstance(a, Exception)]
    during = [(t0, t1, a) for t0, t1, _, a in load.outcomes if t0 > killed_at + 0.5 and t1 < restarting_at]
    acked_while_down = [a for _, _, a in during if not isinstance(a, Exception)]

    # the clients retry every send that was not acknowledged, now that the broker is back
    retried = 0
    for _, _, req, _ in failed:
        for _attempt in range(RETRY_ATTEMPTS):
            try:
                ack = s.send(req)
                break
            except LabError:
                time.sleep(0.5)
        else:
            pytest.fail(f"a retry of {req.client_message_id} still failed after the broker came back")
        retried += 1
        acked.setdefault(req.client_message_id, (req, ack))
    s.drain()

    # the audit: each acked message once in message_record, once in the log, COMMITTED
    rows: dict[str, list] = {}
    for conversation in load.conversations:
        for row in s.connection.execute(
                f"SELECT client_message_id, conversation_seq, message_id FROM {s.keyspace}.message_record "
                "WHERE tenant_id = %s AND conversation_id = %s AND seq_bucket IN (0, 1, 2, 3)",
                (load.tenant, conversation)):
            rows.setdefault(row.client_message_id, []).append(row)
    log: dict[str, int] = {}
    for entry in s.log.scan():
        if entry.record.tenant_id == load.tenant and entry.record.kind == "message":
            cmid = entry.record.payload.record.client_message_id
            log[cmid] = log.get(cmid, 0) + 1
    lost = [c for c in acked if c not in rows or c not in log]
    duplicated = [c for c in acked if len(rows.get(c, ())) > 1 or log.get(c, 0) > 1]
    wrong = [c for c, (req, ack) in acked.items() if c in rows and (
        rows[c][0].conversation_seq, blob_to_u128(rows[c][0].message_id)) != (ack.conversation_seq, ack.message_id)]
    uncommitted = [c for c, (req, _) in list(acked.items())[:200] if dedup_row(s, req).state != DedupState.COMMITTED]

    lines = ["| what | value |", "|---|---|",
             f"| sends before the retries | {len(load.outcomes)} |",
             f"| acked on the first attempt | {len(load.outcomes) - len(failed)} |",
             f"| refused (no ack) | {len(failed)} |",
             f"| sends started and ended while the broker was down | {len(during)} |",
             f"| of which acked | {len(acked_while_down)} |",
             f"| broker down (kill -> ready again) | {back_at - killed_at:.1f} s (restart {restarted.startup_seconds:.1f} s) |",
             f"| retried after the restart | {retried} |",
             f"| acked messages audited | {len(acked)} |",
             f"| lost / duplicated / wrong ids / not COMMITTED | {len(lost)} / {len(duplicated)} / {len(wrong)} / "
             f"{len(uncommitted)} |"]
    report("broker_kill.md", "SIGKILL of the Kafka broker mid-load, restart, client retries, audit",
           "\n".join(lines) + "\n")
    print("\n".join(lines))
    assert failed, "the outage refused no send: the broker was not down long enough to matter"
    assert during and acked_while_down == [], "a send was acknowledged while the broker was down"
    assert (lost, duplicated, wrong, uncommitted) == ([], [], [], [])
    assert len(load.outcomes) - len(failed) > 0


def own_broker_services(broker):
    from lab.cluster.services import ServicesConfig

    return ServicesConfig(outbox="kafka", kafka_bootstrap_servers=broker.options.bootstrap_servers,
                          kafka_topic=f"kill.{uuid.uuid4().hex[:8]}", kafka_delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
                          request_timeout_seconds=5.0)
