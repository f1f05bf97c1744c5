"""The embedded broker's KRaft cluster id (lab.cluster.embedded.kafka_broker.new_cluster_id): a
fresh-clone CI failed once in `kafka-storage format -t <id>` because the id began with '-' (its
parser took it for an option); Kafka's own Uuid.randomUuid() draws again in that case."""
from __future__ import annotations

import base64

from lab.cluster.embedded.kafka_broker import new_cluster_id

DASH_FIRST = bytes([0xF8]) + bytes(15)  # URL-safe base64 '-' is 62: the first 6 bits 111110
PLAIN = bytes(range(16))


def test_an_id_that_starts_with_a_dash_is_drawn_again():
    assert base64.urlsafe_b64encode(DASH_FIRST).decode().startswith("-")
    draws = iter([DASH_FIRST, DASH_FIRST, PLAIN])
    cluster_id = new_cluster_id(lambda: next(draws))
    assert cluster_id == base64.urlsafe_b64encode(PLAIN).rstrip(b"=").decode() and len(cluster_id) == 22


def test_random_ids_are_22_characters_and_never_start_with_a_dash():
    ids = {new_cluster_id() for _ in range(2000)}  # ~31 of 2,000 raw draws would start with '-'
    assert len(ids) == 2000 and all(len(i) == 22 and not i.startswith("-") for i in ids)
