"""The hand-off lock (lab.store.plumbing.handoff_lock): threads and futures wait for it in one FIFO
queue, it changes hands on release (never free while someone waits) and excludes every holder from
every other. Pure: threads."""
from __future__ import annotations

import threading

import pytest

from lab.store.plumbing.handoff_lock import HandoffLock


def test_a_free_lock_is_taken_at_once_both_ways():
    lock = HandoffLock()
    assert lock.try_acquire() and not lock.try_acquire()
    lock.release()
    assert lock.acquire_async().done() and not lock.try_acquire()
    lock.release()
    with pytest.raises(RuntimeError):
        lock.release()


def test_waiters_get_it_in_arrival_order_and_it_is_never_free_between():
    lock = HandoffLock()
    lock.acquire()
    order: list[str] = []
    futures = []
    threads = []
    for i in range(6):
        if i % 2:
            future = lock.acquire_async()
            future.add_done_callback(lambda _f, i=i: (order.append(f"f{i}"), lock.release()))
            futures.append(future)
        else:
            queued = threading.Event()

            def take(i: int = i, queued: threading.Event = queued) -> None:
                queued.set()
                with lock:
                    order.append(f"t{i}")
            thread = threading.Thread(target=take)
            thread.start()
            queued.wait(5)
            while len(lock._waiters) < i + 1:  # the thread is queued before the next waiter comes
                threading.Event().wait(0.001)
            threads.append(thread)
    assert not lock.try_acquire(), "free while waited for"
    lock.release()
    for thread in threads:
        thread.join(5)
    assert order == ["t0", "f1", "t2", "f3", "t4", "f5"]
    assert lock.try_acquire()


def test_it_excludes_threads_and_futures_from_each_other():
    lock = HandoffLock()
    inside = [0]
    overlaps = [0]
    done = threading.Semaphore(0)

    def critical() -> None:
        inside[0] += 1
        overlaps[0] += inside[0] > 1
        threading.Event().wait(0.0002)
        inside[0] -= 1

    def by_thread() -> None:
        for _ in range(50):
            with lock:
                critical()

    def by_future() -> None:
        for _ in range(50):
            def held(_f: object) -> None:
                critical()
                lock.release()
                done.release()
            lock.acquire_async().add_done_callback(held)
    threads = [threading.Thread(target=f) for f in (by_thread, by_thread, by_future, by_future)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for _ in range(100):
        assert done.acquire(timeout=30)
    assert overlaps[0] == 0 and lock.try_acquire()
