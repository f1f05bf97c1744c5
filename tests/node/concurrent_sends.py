"""Senders that race on one client_message_id, for tests/test_concurrency.py.

A separate module (not the test file) because ``multiprocessing``'s spawn start method
imports the target function by module name in a fresh interpreter; a test module would
drag pytest's collection into every child.

Each sender behaves like a client: a send that fails on the cluster (an LWT losing a
Paxos contention round times out, for instance) is retried with the same request.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from fan_out import fan_out

CLIENT_ATTEMPTS = 5


def send_as_client(store: Any, request: Any) -> tuple[Any, int]:
    """(ack, failed attempts) of one client send with retries on cluster errors."""
    from lab.errors import ClusterError

    failures = 0
    while True:
        try:
            return store.send(request), failures
        except ClusterError:
            failures += 1
            if failures >= CLIENT_ATTEMPTS:
                raise


def race(stores: list[Any], request: Any, threads: int, before_start: Any = None) -> list[dict[str, Any]]:
    """``threads`` threads (spread over ``stores``) send ``request`` at the same instant."""
    def one(i: int) -> dict[str, Any]:
        ack, failures = send_as_client(stores[i % len(stores)], request)
        return {"message_id": ack.message_id, "conversation_seq": ack.conversation_seq,
                "last_activity_id": ack.last_activity_id, "replayed": ack.replayed, "failures": failures}

    return fan_out(threads, one, before_start)


def process_main(barrier: Any, results: Any, config: Any, state_dir: str, node_id: int, requests: list[Any],
                 threads: int, options: dict[str, Any] | None = None) -> None:
    """Child process: its own MessageStore on the shared keyspace and state_dir; one race per
    request, every process starting each race together (``barrier``)."""
    from lab.store import MessageStore

    rounds = []
    try:
        with MessageStore.open(config, state_dir=Path(state_dir), node_id=node_id, **(options or {})) as store:
            for request in requests:
                rounds.append(race([store], request, threads, before_start=barrier.wait))
            store.drain()
        results.put((node_id, rounds, None))
    except Exception as exc:
        barrier.abort()  # do not leave the other processes waiting for this one
        results.put((node_id, rounds, f"{type(exc).__name__}: {exc}"))
