"""The hot window's puts in several rounds at once, each lane on a Redis connection of its own
(lab.store.plumbing.lanes), on the real Redis: a second caller's round goes out and
is answered while the first's is still in flight (sent, its reply not read yet); a connection the
server closed under one lane reconnects while another lane's round is in flight, and that round
still lands; an error reply fails only its own lane's round; close() closes every lane's connection.
A round is held in flight by holding its connection's reply read (a real connection to the real
Redis: the request is on the server, its answer waits in the socket). Nothing about speed is asserted."""
from __future__ import annotations

import threading
import uuid

import pytest
from hot_records import hot_record

from lab.errors import HotWindowError
from lab.store import HotWindow
from lab.store.hot.redis_window import _member

pytestmark = pytest.mark.node
WAIT_SECONDS = 60  # a deadlock guard only: every wait below ends as soon as the other side acts


def _client_id(connection) -> int:
    connection.send_command("CLIENT", "ID")
    return connection.read_response()


def _seqs(window, tenant, conversation):
    return [int(m[:20]) for m in window.client.zrange(window.key(tenant, conversation), 0, -1)]


class _HeldRound:
    """A put on lane 0 whose round is sent and whose reply is not read until ``release()``."""

    def __init__(self, window, record) -> None:
        connection = window._rounds[0]._connection
        assert connection is not None, "lane 0 has no connection yet: put once first"
        self.sent, self._release, self.result, self.error = threading.Event(), threading.Event(), None, None
        real = connection.read_response

        def held(*args, **kwargs):
            self.sent.set()
            assert self._release.wait(WAIT_SECONDS), "the held round was never released"
            return real(*args, **kwargs)
        connection.read_response = held
        self._connection, self._real = connection, real
        self._thread = threading.Thread(target=self._put, args=(window, record))
        self._thread.start()
        assert self.sent.wait(WAIT_SECONDS), "the held put never reached its round"

    def _put(self, window, record) -> None:
        try:
            self.result = window.put(record)
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            self.error = exc

    @property
    def in_flight(self) -> bool:
        return self._thread.is_alive()

    def release(self) -> None:
        self._release.set()
        self._thread.join(WAIT_SECONDS)
        assert not self._thread.is_alive(), "the held put still running after its release"
        self._connection.read_response = self._real
        assert self.error is None, self.error


@pytest.fixture
def lanes_window(redis_services):
    w = HotWindow.open(redis_services, namespace=f"test_{uuid.uuid4().hex[:8]}", window_days=7, put_connections=3)
    yield w
    for key in w.client.scan_iter(f"{w.namespace}:*"):
        w.client.delete(key)
    w.close()


def test_a_second_round_is_sent_and_answered_while_the_first_is_in_flight(lanes_window):
    window, tenant, conversation = lanes_window, uuid.uuid4(), uuid.uuid4()
    assert window.put(hot_record(tenant, conversation, 1))  # alone: lane 0, which connects
    assert window._rounds[1]._connection is None  # a lone caller never opened a second connection
    held = _HeldRound(window, hot_record(tenant, conversation, 2))
    rounds_before = window._puts.rounds
    assert window.put(hot_record(tenant, conversation, 3))  # lane 0 busy: a round of its own on lane 1
    assert held.in_flight  # seq 3 was written and answered while seq 2's round waited for its reply
    assert window._puts.rounds == rounds_before + 1 and window._puts.most_in_flight >= 2
    second = window._rounds[1]._connection
    assert second is not None and second is not window._rounds[0]._connection
    held.release()
    assert held.result is True
    assert _client_id(window._rounds[0]._connection) != _client_id(second)  # two connections on the server
    assert _seqs(window, tenant, conversation) == [1, 2, 3]


def test_a_closed_connection_reconnects_while_another_lanes_round_is_in_flight(lanes_window):
    """The server drops lane 1's connection (CLIENT KILL of its own id) while lane 0's round waits for
    its reply: lane 1's next round reconnects and lands, and lane 0's round then lands too."""
    window, tenant, conversation = lanes_window, uuid.uuid4(), uuid.uuid4()
    assert window.put(hot_record(tenant, conversation, 1))
    held = _HeldRound(window, hot_record(tenant, conversation, 2))
    assert window.put(hot_record(tenant, conversation, 3))  # lane 1 connects
    killed = window._rounds[1]._connection
    assert window.client.client_kill_filter(_id=_client_id(killed)) == 1
    assert window.put(hot_record(tenant, conversation, 4))  # lane 1 again, on a new connection
    assert held.in_flight
    held.release()
    assert _seqs(window, tenant, conversation) == [1, 2, 3, 4]
    assert window.put(hot_record(tenant, conversation, 5))  # alone again: lane 0, still in step
    assert _seqs(window, tenant, conversation) == [1, 2, 3, 4, 5]


def test_an_error_reply_fails_only_its_own_lanes_round(lanes_window):
    """Lane 1's round carries a call the script rejects while lane 0's round is in flight: the error
    is typed, lane 0's put lands, and lane 1's connection (which read every reply) serves its next round."""
    window, tenant, conversation = lanes_window, uuid.uuid4(), uuid.uuid4()

    def item(seq, trim=window.trim_per_write):
        return (window.key(tenant, conversation), [f"{seq:020d}", _member(hot_record(tenant, conversation, seq)),
                                                   window.window_seconds * 1000, window._cutoff_ms(None), trim])
    assert window.put(hot_record(tenant, conversation, 1))
    held = _HeldRound(window, hot_record(tenant, conversation, 2))
    with pytest.raises(HotWindowError):
        window._put_round([item(3), item(4, trim="not a number")], lane=1)
    lane1 = window._rounds[1]._connection
    assert held.in_flight
    held.release()
    assert window._put_round([item(5)], lane=1) == [1]
    assert window._rounds[1]._connection is lane1  # kept: still in step
    assert window.put(hot_record(tenant, conversation, 6))
    assert _seqs(window, tenant, conversation) == [1, 2, 3, 4, 5, 6]


def test_close_closes_every_lanes_connection(redis_services):
    window = HotWindow.open(redis_services, namespace=f"test_{uuid.uuid4().hex[:8]}", window_days=7,
                            put_connections=2)
    tenant, conversation = uuid.uuid4(), uuid.uuid4()
    assert window.put(hot_record(tenant, conversation, 1))
    held = _HeldRound(window, hot_record(tenant, conversation, 2))
    assert window.put(hot_record(tenant, conversation, 3))
    held.release()
    ids = [_client_id(r._connection) for r in window._rounds]
    assert len(set(ids)) == 2
    window.client.delete(window.key(tenant, conversation))
    window.close()
    assert all(r._connection is None for r in window._rounds)
    probe = type(window.client)(**redis_services.redis_client_kwargs())
    try:
        listed = {c["id"] for c in probe.client_list()}
    finally:
        probe.close()
    assert not {str(i) for i in ids} & {str(i) for i in listed}


def test_put_connections_must_be_a_positive_int(redis_services):
    from lab.errors import ValidationError

    with pytest.raises(ValidationError):
        HotWindow.open(redis_services, namespace="x", window_days=7, put_connections=0)
