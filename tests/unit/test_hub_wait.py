"""Greenlets wait on futures that native threads complete (lab.load.locust.hub_wait): each wakes
with its own future, the hub keeps running the others meanwhile, and nothing is lost when a burst
of completions coalesces into one wakeup. Real threads and a real gevent hub; no server."""
from __future__ import annotations

import random
import threading
import time
from concurrent.futures import Future

import gevent
import pytest

from lab.load.locust.hub_wait import HubWaiter


def _complete_later(futures: list[Future], *, delay: float = 0.05, fail_every: int = 0, shuffle: bool = True) -> threading.Thread:
    """Complete ``futures`` from a native thread after ``delay``, in random order (every
    ``fail_every``-th with an error)."""
    def run() -> None:
        time.sleep(delay)
        order = list(enumerate(futures))
        if shuffle:
            random.Random(7).shuffle(order)
        for i, f in order:
            if fail_every and i % fail_every == 0:
                f.set_exception(ValueError(i))
            else:
                f.set_result(i)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@pytest.fixture
def waiter():
    w = HubWaiter()
    yield w
    w.close()


def _take(waiter: HubWaiter, future: Future):
    waiter.wait(future)
    try:
        return future.result()
    except ValueError as exc:
        return ("error", exc.args[0])


def test_each_greenlet_wakes_with_its_own_future_while_the_hub_runs_others(waiter):
    futures = [Future() for _ in range(50)]
    ticks = []
    ticker = gevent.spawn(lambda: [ticks.append(gevent.sleep(0.005)) for _ in range(5)])
    users = [gevent.spawn(_take, waiter, f) for f in futures]
    thread = _complete_later(futures, fail_every=7)
    gevent.joinall(users + [ticker], raise_error=True, timeout=10)
    thread.join()
    assert [g.value for g in users] == [("error", i) if i % 7 == 0 else i for i in range(50)]
    assert len(ticks) == 5  # the ticker ran while every user waited: the hub was never blocked


def test_a_burst_of_a_thousand_completions_wakes_every_waiter(waiter):
    futures = [Future() for _ in range(1000)]
    users = [gevent.spawn(_take, waiter, f) for f in futures]
    thread = _complete_later(futures, delay=0.02, shuffle=False)  # one thread, back to back: sends coalesce
    gevent.joinall(users, raise_error=True, timeout=10)
    thread.join()
    assert [g.value for g in users] == list(range(1000))


def test_a_done_future_returns_at_once(waiter):
    f = Future()
    f.set_result("page")
    assert gevent.spawn(_take, waiter, f).get(timeout=1) == "page"


def test_a_lone_waiter_keeps_the_hub_alive_until_its_future_completes(waiter):
    """While one greenlet waits, with no timer or other greenlet to hold the loop, the hub must
    not give up (gevent's LoopExit): the watcher is referenced while a greenlet waits."""
    f = Future()
    user = gevent.spawn(_take, waiter, f)
    _complete_later([f], delay=0.2)
    assert user.get() == 0  # no timeout: nothing but the waiter holds the loop


def test_a_killed_waiter_leaves_its_late_future_harmless(waiter):
    doomed, other = Future(), Future()
    user = gevent.spawn(_take, waiter, doomed)
    gevent.sleep(0)
    user.kill()  # as Locust stops a user mid-call
    survivor = gevent.spawn(_take, waiter, other)
    _complete_later([doomed, other], shuffle=False)
    assert survivor.get(timeout=5) == 1 and user.dead
