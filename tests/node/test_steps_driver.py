"""The event loop's driver of a walk (lab.store.plumbing.steps.start) against the real node: a
step's ``Cql.concurrency`` bounds the requests in flight as the calling thread's driver bounds
them (a sliding window), answers come in input order, and nothing is started after an error; a
closed store's asynchronous calls start nothing."""
from __future__ import annotations

import threading
import uuid

import pytest

from lab.errors import InvalidRequest, InvalidState
from store_checks import new_request, snapshot_tables

pytestmark = pytest.mark.node

ROWS = 120


class Counting:
    """The session's connection, counting this test's requests in flight (answered or failed)."""

    def __init__(self, connection) -> None:
        self.connection = connection
        self.lock = threading.Lock()
        self.in_flight = self.most = self.started = self.errors = self.started_at_error = 0

    def execute_async(self, stmt, params):
        with self.lock:
            self.started += 1
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        response = self.connection.execute_async(stmt, params)
        response.add_callbacks(self._answered, self._failed)  # before the walk's own callbacks
        return response

    def _answered(self, _result) -> None:
        with self.lock:
            self.in_flight -= 1

    def _failed(self, _error) -> None:
        with self.lock:
            self.in_flight -= 1
            self.errors += 1
            self.started_at_error = self.started

    def translate_error(self, error, stmt):
        return self.connection.translate_error(error, stmt)


@pytest.fixture(scope="module")
def table(connection, scratch_keyspace):
    name = f"{scratch_keyspace}.window_{uuid.uuid4().hex[:6]}"
    connection.execute(f"CREATE TABLE {name} (k int PRIMARY KEY, v int)")
    insert = connection.prepare(f"INSERT INTO {name} (k, v) VALUES (?, ?)")
    connection.execute_concurrent([(insert, (k, k * 7)) for k in range(ROWS)])
    return name


def _walk(items, concurrency):
    from lab.store.plumbing.steps import Cql

    answer = yield Cql(tuple(items), concurrency=concurrency)
    return answer


def _reads(connection, table):
    select = connection.prepare(f"SELECT v FROM {table} WHERE k = ?")
    return [(select, (k,)) for k in range(ROWS)]


@pytest.mark.parametrize("concurrency", [1, 8, 32, 0])
def test_the_window_bounds_requests_in_flight_and_answers_in_input_order(connection, table, concurrency):
    from lab.store.plumbing.steps import BlockingPool, run, start

    counting, pool = Counting(connection), BlockingPool(1, "test-window")
    try:
        answer = start(_walk(_reads(connection, table), concurrency), counting, pool).result(timeout=60)
    finally:
        pool.close()
    assert [rows[0].v for rows in answer] == [k * 7 for k in range(ROWS)]
    assert counting.started == ROWS
    assert 1 <= counting.most <= (concurrency or ROWS)  # 0: all at once
    assert answer == run(_walk(_reads(connection, table), concurrency), connection)


@pytest.mark.parametrize("window", [1, 4, 0])
def test_nothing_is_started_after_an_error(connection, table, window):
    """A negative TTL is refused by the node (not by the bind): the 31st write fails. Answers come
    in any order, so the requests after it go on until its error arrives; none starts after that
    (with a window of one, exactly the 31 up to it were started). A window of 0 starts all at once
    from the calling thread, which stops at the first it finds the error arrived."""
    from lab.store.plumbing.steps import BlockingPool, start

    insert = connection.prepare(f"INSERT INTO {table} (k, v) VALUES (?, ?) USING TTL ?")
    items = [(insert, (ROWS + k, k, -1 if k == 30 else 0)) for k in range(100)]
    counting, pool = Counting(connection), BlockingPool(1, "test-window")
    try:
        future = start(_walk(items, window), counting, pool)
        with pytest.raises(InvalidRequest):
            future.result(timeout=60)
    finally:
        pool.close()
    assert counting.errors == 1
    # the walk's errback runs right after the counter's on the loop thread; only the calling thread's
    # first fill of the window could start a request in between
    assert 31 <= counting.started <= counting.started_at_error + (window or len(items)) - 1
    if window == 1:
        assert counting.started == 31


def test_an_empty_step_answers_at_once(connection):
    from lab.store.plumbing.steps import BlockingPool, start

    pool = BlockingPool(1, "test-window")
    try:
        assert start(_walk((), 0), connection, pool).result(timeout=10) == []
        assert start(_walk((), 8), connection, pool).result(timeout=10) == []
    finally:
        pool.close()


def test_a_closed_stores_asynchronous_calls_start_nothing(store, open_store, tmp_path):
    from lab.store import BatchEntry, MessageStore

    closing = open_store(state_dir=tmp_path)
    req = new_request()
    ack = closing.send(req)
    closing.close()
    threads, before = set(threading.enumerate()), snapshot_tables(store)
    requests = store.connection.counter.snapshot()  # the one connection both stores use
    t, c, q, u = req.tenant_id, req.conversation_id, ack.conversation_seq, req.sender_id
    futures = {
        "send_async": closing.send_async(new_request(tenant_id=t, conversation_id=c)),
        "history_async": closing.history_async(t, c),
        "recall_async": closing.recall_async(t, c, q, actor_id=u),
        "edit_async": closing.edit_async(t, c, q, body=b"x", actor_id=u),
        "react_async": closing.react_async(t, c, q, u, "ok"),
        "unreact_async": closing.unreact_async(t, c, q, u),
        "self_reaction_async": closing.self_reaction_async(t, c, q, u),
        "batch_read_async": closing.batch_read_async(t, [BatchEntry(conversation_id=c, conversation_seq=q,
                                                                    message_id=ack.message_id)]),
    }
    assert set(futures) == {name for name in dir(MessageStore) if name.endswith("_async")}  # every twin
    for name, future in futures.items():
        assert isinstance(future.exception(timeout=10), InvalidState), name
    assert store.connection.counter.snapshot() == requests  # not a read issued either
    made = [t.name for t in set(threading.enumerate()) - threads if "blocking" in t.name or "group-submit" in t.name]
    assert made == [] and snapshot_tables(store) == before
