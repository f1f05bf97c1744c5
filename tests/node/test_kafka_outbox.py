"""The Kafka-protocol outbox (lab.store.outbox.kafka_log) on the embedded broker: every semantic
of lab.store.outbox's docstring, across instances that stand for separate writers."""
from __future__ import annotations

import threading
import time
import uuid

import pytest

from lab.cluster.services import ServicesConfig
from lab.errors import OutboxError, ValidationError
from lab.store.outbox.kafka_log import KafkaOutbox, partition_of
from lab.store import OUTBOXES, EditEvent, OutboxRecord, RecallEvent, open_outbox
from outbox_records import message, tag

pytestmark = pytest.mark.node


@pytest.fixture
def boxes(kafka_services, topic):
    opened = []

    def _open() -> KafkaOutbox:
        box = open_outbox("kafka", path="ignored", services=kafka_services, topic=topic)
        opened.append(box)
        return box

    yield _open
    for box in opened:
        box.close()


def test_registered_by_name_and_local_still_there():
    assert set(OUTBOXES) >= {"local", "kafka"}


def test_append_acks_after_the_broker_and_keys_are_idempotent(boxes):
    box = boxes()
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    first = box.append(message(tenant, conversation, 1, "first"))
    assert not first.duplicate and first.partition == partition_of(tenant, conversation, box.partitions)
    assert box.end_offset(partition=first.partition) == first.offset + 1  # on the broker, not in a buffer
    again = box.append(message(tenant, conversation, 1, "second"))
    assert again.duplicate and again.offset == first.offset and tag(again) == "first"
    assert again.record == first.record  # the typed record round-trips the topic
    # the replay is in the log as a second record, and every reader skips it
    assert box.end_offset(partition=first.partition) == first.offset + 2
    assert [e.offset for e in box.read(0, 100, partition=first.partition)] == [first.offset]
    assert tag(box.get(tenant, conversation, 1)) == "first"
    assert box.get(tenant, conversation, 2) is None


def test_one_conversation_is_one_partition_in_append_order(boxes):
    box = boxes()
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    entries = [box.append(message(tenant, conversation, seq)) for seq in range(1, 21)]
    assert {e.partition for e in entries} == {entries[0].partition}
    offsets = [e.offset for e in entries]
    assert offsets == sorted(offsets)
    read = [e.record.conversation_seq for e in box.read(0, 1000, partition=entries[0].partition)
            if e.record.conversation_id == conversation]
    assert read == list(range(1, 21))


def test_other_writers_see_an_acked_append_at_once(boxes):
    """get / controls_for catch up to the partition's end before answering: read-your-writes
    across instances (a retried send or recall on another writer)."""
    writer, other = boxes(), boxes()
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    for seq in range(1, 30):
        writer.append(message(tenant, conversation, seq))
        assert other.get(tenant, conversation, seq).record.conversation_seq == seq
    recall = RecallEvent(actor_id=uuid.uuid4(), activity_id=2**127 + 3, created_at_ms=11)
    event = writer.append(OutboxRecord(tenant_id=tenant, conversation_id=conversation, conversation_seq=100,
                                       target_seq=7, payload=recall))
    [seen] = other.controls_for(tenant, conversation, 7, "recall")
    assert (seen.offset, seen.record.target_seq, seen.record.payload) == (event.offset, 7, recall)
    assert other.controls_for(tenant, conversation, 7, "edit") == []
    edit = EditEvent(actor_id=uuid.uuid4(), activity_id=12, created_at_ms=12, payload_or_ciphertext=b"\x01e2ee",
                     dek_id=("conversation", "k", 2))
    writer.append(OutboxRecord(tenant_id=tenant, conversation_id=conversation, conversation_seq=101, target_seq=7,
                               payload=edit))
    assert [e.record.payload for e in other.controls_for(tenant, conversation, 7, "edit")] == [edit]


def test_racing_appends_of_one_key_agree_on_the_first(boxes):
    writers = [boxes() for _ in range(4)]
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    gate = threading.Barrier(len(writers) * 3)
    results, errors = [], []

    def append(box, i):
        try:
            gate.wait()
            results.append(box.append(message(tenant, conversation, 1, f"writer-{i}")))
        except Exception as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=append, args=(w, i)) for i, w in enumerate(writers * 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len({(e.partition, e.offset) for e in results}) == 1, "every append names the first record"
    assert sum(not e.duplicate for e in results) == 1
    assert len({repr(e.record.payload) for e in results}) == 1


def test_consumer_group_commits_and_skips_replays(boxes):
    box = boxes()
    tenant = uuid.uuid4()
    conversations = [uuid.uuid4() for _ in range(8)]
    for seq in range(1, 6):
        for c in conversations:
            box.append(message(tenant, c, seq))
    box.append(message(tenant, conversations[0], 5, "replay"))  # a replay at the end of a partition
    assert box.lag("archiver") == 41
    batch = box.consume("archiver", 25)
    assert len(batch.entries) == 25
    box.commit_batch("archiver", batch)
    rest = box.consume("archiver", 1000)
    box.commit_batch("archiver", rest)
    keys = [(e.record.conversation_id, e.record.conversation_seq) for e in batch.entries + rest.entries]
    assert len(keys) == len(set(keys)) == 40
    assert box.lag("archiver") == 0, "the group moved past the skipped replay too"
    assert not box.consume("archiver")
    # commits never move backwards, and the offsets live in the broker: a new instance sees them
    p = rest.entries[-1].partition
    assert box.commit("archiver", 0, partition=p) == box.committed("archiver", partition=p) > 0
    fresh = boxes()
    assert fresh.lag("archiver") == 0 and fresh.committed("archiver", partition=p) == box.committed(
        "archiver", partition=p)
    assert fresh.lag("another-group") == 41
    assert len(fresh.scan()) == 40


def test_bad_input_is_refused_before_anything_is_sent(boxes):
    box = boxes()
    with pytest.raises(ValidationError):
        box.append({"not": "a record"})
    with pytest.raises(ValidationError):
        box.read(0, partition=box.partitions)
    with pytest.raises(ValidationError):  # an untyped payload is refused before it reaches the outbox
        box.append(OutboxRecord(tenant_id=uuid.uuid4(), conversation_id=uuid.uuid4(), conversation_seq=1,
                                payload={"x": object()}))
    assert sum(box.end_offset(partition=p) for p in range(box.partitions)) == 0


def test_an_unreachable_broker_is_a_typed_error_within_bounds():
    closed_port = ServicesConfig(outbox="kafka", kafka_bootstrap_servers="127.0.0.1:1", request_timeout_seconds=2.0)
    t0 = time.monotonic()
    with pytest.raises(OutboxError):
        KafkaOutbox(services=closed_port, topic="never")
    assert time.monotonic() - t0 < 60
