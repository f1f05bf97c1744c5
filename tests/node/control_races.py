"""Recall / edit callers that race on one message, for tests/node/test_control_races.py.

A module of its own (not the test file) because ``multiprocessing``'s spawn start method imports
the target function by name in a fresh interpreter.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from fan_out import fan_out

CLIENT_ATTEMPTS = 5


def as_client(call: Any) -> Any:
    """A caller retrying on cluster errors (an LWT that lost a Paxos round may time out)."""
    from lab.errors import ClusterError

    for attempt in range(CLIENT_ATTEMPTS):
        try:
            return call()
        except ClusterError:
            if attempt + 1 == CLIENT_ATTEMPTS:
                raise
    raise AssertionError("unreachable")


def race(stores: list[Any], op: str, target: tuple[Any, Any, int], actor: Any, threads: int,
         before_start: Any = None) -> list[dict[str, Any]]:
    """``threads`` threads (spread over ``stores``) call ``op`` ("recall" or "edit") on ``target``
    at the same instant; each result as a dict (or its error)."""
    tenant, conversation, seq = target

    def one(i: int) -> dict[str, Any]:
        store = stores[i % len(stores)]
        if op == "recall":
            r = as_client(lambda: store.recall(tenant, conversation, seq, actor_id=actor))
            return {"event_seq": r.recall_event_conversation_seq, "replayed": r.replayed}
        body = f"edit {id(store)} {i}".encode()
        r = as_client(lambda: store.edit(tenant, conversation, seq, body=body, actor_id=actor))
        return {"event_seq": r.edit_event_conversation_seq, "activity": r.edited_at_activity_id, "body": body.decode()}

    return fan_out(threads, one, before_start)


def process_main(barrier: Any, results: Any, config: Any, state_dir: str, node_id: int,
                 races: list[tuple[str, tuple[Any, Any, int]]], actor: Any, threads: int,
                 options: dict[str, Any] | None = None) -> None:
    """Child process: its own MessageStore on the shared keyspace and state_dir; one race per
    ``(op, target)`` of ``races``, every process starting each race together (``barrier``)."""
    from lab.store import MessageStore

    rounds = []
    try:
        with MessageStore.open(config, state_dir=Path(state_dir), node_id=node_id, **(options or {})) as store:
            for op, target in races:
                rounds.append(race([store], op, target, actor, threads, before_start=barrier.wait))
        results.put((node_id, rounds, None))
    except Exception as exc:
        barrier.abort()
        results.put((node_id, rounds, f"{type(exc).__name__}: {exc}"))
