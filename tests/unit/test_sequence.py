"""conversation_seq reservation windows (lab.store.write.sequence): durable, monotonic, disjoint across
processes, bit-63 guarded. Pure: SQLite in tmp_path, no node."""
from __future__ import annotations

import multiprocessing
import uuid

import pytest

from lab.errors import Bit63Violation
from lab.store import BIT63, MessageIdGenerator
from lab.store.write.sequence import WRITE_TIME_SLOTS, SequenceAllocator, next_write_time_us

WINDOW = 16
TENANT, CONVERSATION = uuid.UUID(int=1), uuid.UUID(int=2)


def _allocator(path, node_id=1):
    return SequenceAllocator(path, window=WINDOW, id_generator=MessageIdGenerator(node_id))


def test_starts_at_one_and_restart_leaves_a_hole(tmp_path):
    path = tmp_path / "seq.sqlite"
    first = _allocator(path)
    assert [first.next_seq(TENANT, CONVERSATION) for _ in range(3)] == [1, 2, 3]
    assert first.next_seq(TENANT, uuid.UUID(int=3)) == 1  # per conversation
    restarted = _allocator(path)
    assert restarted.next_seq(TENANT, CONVERSATION) == WINDOW + 1
    assert first.reservations == 2 and restarted.reservations == 1


def test_window_rollover_and_ids_follow_seq_order(tmp_path):
    alloc = _allocator(tmp_path / "seq.sqlite")
    got = [alloc.allocate(TENANT, CONVERSATION) for _ in range(2 * WINDOW + 1)]
    assert [a.conversation_seq for a in got] == list(range(1, 2 * WINDOW + 2))
    assert alloc.reservations == 3
    message_ids = [a.message_id for a in got]
    assert message_ids == sorted(message_ids) and len(set(message_ids)) == len(message_ids)
    assert all(a.last_activity_id > a.message_id for a in got)


def test_advance_to_never_lowers_and_bit63_stops_allocation(tmp_path):
    alloc = _allocator(tmp_path / "seq.sqlite")
    alloc.advance_to(TENANT, CONVERSATION, 1000)
    assert alloc.next_seq(TENANT, CONVERSATION) == 1000
    alloc.advance_to(TENANT, CONVERSATION, 5)  # below what is reserved: continues above it
    assert alloc.next_seq(TENANT, CONVERSATION) > 1000
    alloc.advance_to(TENANT, CONVERSATION, BIT63 - 1)
    assert alloc.next_seq(TENANT, CONVERSATION) == BIT63 - 1
    with pytest.raises(Bit63Violation):
        alloc.next_seq(TENANT, CONVERSATION)
    with pytest.raises(Bit63Violation):
        _allocator(tmp_path / "seq.sqlite").next_seq(TENANT, CONVERSATION)
    with pytest.raises(Bit63Violation):
        alloc.advance_to(TENANT, CONVERSATION, BIT63)


def _worker(path, node_id, count, queue):
    alloc = _allocator(path, node_id)
    seqs = []
    for _ in range(count):
        seqs.append(alloc.next_seq(TENANT, CONVERSATION))
        alloc._windows.clear()  # force a reservation per value: maximal contention on the file
    queue.put(seqs)


def test_processes_get_disjoint_values(tmp_path):
    path = str(tmp_path / "seq.sqlite")
    _allocator(path).close()  # create the file (and WAL mode) once
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(path, n + 1, 20, queue)) for n in range(3)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    values = [v for seqs in results for v in seqs]
    assert len(values) == len(set(values)) == 60
    assert all(seqs == sorted(seqs) for seqs in results)


def test_two_writers_never_hand_out_one_write_time(tmp_path):
    """A tie of two edits' write times mixes the row cell by cell (CI: three processes racing edits
    left one edit's body under another's edited_at_activity_id): writers of different node_ids mod
    16, on one frozen millisecond, never share a write time; each one's strictly increase."""
    now = [1_700_000_000_000]
    writers = [SequenceAllocator(tmp_path / f"seq{n}.sqlite", window=WINDOW,
                                 id_generator=MessageIdGenerator(n, clock_ms=lambda: now[0])) for n in (61, 62, 63)]
    times = {n: [w.allocate(TENANT, CONVERSATION).written_at_us for _ in range(100)] for n, w in enumerate(writers)}
    for own in times.values():
        assert own == sorted(own) and len(set(own)) == len(own) and own[0] >= now[0] * 1000
    every = [t for own in times.values() for t in own]
    assert len(set(every)) == len(every)


@pytest.mark.parametrize("time_ms, last_us, slot", [(0, 0, 0), (1, 0, 15), (5, 5_000, 0), (5, 5_015, 15),
                                                   (2**40, 0, 7), (5, 9_999, 3)])
def test_next_write_time_is_above_the_last_in_its_slot(time_ms, last_us, slot):
    got = next_write_time_us(time_ms, last_us, slot=slot)
    assert got > last_us and got >= time_ms * 1000 and got % WRITE_TIME_SLOTS == slot
    assert got - max(time_ms * 1000, last_us + 1) < WRITE_TIME_SLOTS
