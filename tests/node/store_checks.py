"""Read-back helpers for write-side tests: what the six tables and the outbox hold.

Plain SELECTs through the store's connection, so assertions look at the database itself,
not at what the store believes it wrote.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from concurrent.futures import Future, wait

from lab.errors import ClusterError
from lab.store import SendRequest, TABLE_NAMES, seq_bucket


def new_request(*, client_message_id: str | None = None, body: bytes = b"hello", **kw) -> SendRequest:
    """A valid request for a fresh tenant/conversation/sender unless ids are given."""
    ids = {name: kw.pop(name, uuid.uuid4()) for name in ("tenant_id", "conversation_id", "sender_id",
                                                         "sender_device_id")}
    return SendRequest(**ids, client_message_id=client_message_id or f"c-{uuid.uuid4().hex[:12]}", body=body, **kw)


def _hashable(value):
    """Driver values as set members: maps (reaction counts) and collections become tuples."""
    if hasattr(value, "items"):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, (list, set, frozenset)):
        return tuple(_hashable(v) for v in value)
    return value


def snapshot_tables(store) -> dict[str, frozenset]:
    """Every row of the six tables (test keyspaces are small), plus the outbox's end offset."""
    snap = {}
    for table in TABLE_NAMES:
        rows = store.connection.execute(f"SELECT * FROM {store.keyspace}.{table}")
        snap[table] = frozenset(tuple(_hashable(v) for v in r) for r in rows)
    snap["outbox_end"] = frozenset([tuple(store.log.end_offset(partition=p) for p in range(store.log.partitions))])
    return snap


def record_rows(store, tenant_id, conversation_id, seqs) -> list:
    """message_record rows of the buckets holding ``seqs``, newest first."""
    width = store.constants.message_seq_bucket_width
    rows = []
    for bucket in sorted({seq_bucket(s, width) for s in seqs}, reverse=True):
        rows.extend(store.connection.execute(
            f"SELECT * FROM {store.keyspace}.message_record WHERE tenant_id = %s AND conversation_id = %s "
            "AND seq_bucket = %s", (tenant_id, conversation_id, bucket)))
    return rows


def record_row(store, tenant_id, conversation_id, seq, columns: str = "*"):
    return store.connection.execute(
        f"SELECT {columns} FROM {store.keyspace}.message_record WHERE tenant_id = %s AND conversation_id = %s "
        "AND seq_bucket = %s AND conversation_seq = %s",
        (tenant_id, conversation_id, seq_bucket(seq, store.constants.message_seq_bucket_width), seq)).one()


def dedup_row(store, request: SendRequest):
    return store.connection.execute(
        f"SELECT * FROM {store.keyspace}.client_dedup WHERE tenant_id = %s AND sender_id = %s "
        "AND client_message_id = %s", (request.tenant_id, request.sender_id, request.client_message_id)).one()


def index_rows(store, tenant_id, message_id_blob: bytes) -> list:
    return list(store.connection.execute(
        f"SELECT * FROM {store.keyspace}.message_index WHERE tenant_id = %s AND message_id = %s",
        (tenant_id, message_id_blob)))


def outbox_messages(store, tenant_id, conversation_id) -> list:
    return [e for e in store.log.scan()
            if e.record.tenant_id == tenant_id and e.record.conversation_id == conversation_id
            and e.record.kind == "message"]


class Replicas:
    """The store keyspace's replication, turned unavailable and back: :meth:`fail` asks for 3
    replicas of this 1-node cluster, so every request at LOCAL_QUORUM fails on the server
    (Unavailable: a real cluster failure, no fake); :meth:`restore` (and leaving the ``with``)
    puts the keyspace's own replication back."""

    def __init__(self, store) -> None:
        self.store = store
        original = store.connection.execute("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s",
                                            (store.keyspace,)).one().replication
        self._original = "{" + ", ".join(f"'{k}': '{v}'" for k, v in original.items()) + "}"

    def _alter(self, replication: str) -> None:
        self.store.connection.execute(f"ALTER KEYSPACE {self.store.keyspace} WITH replication = {replication}")
        self.store.connection.wait_schema_agreement()

    def fail(self) -> None:
        self._alter("{'class': 'SimpleStrategy', 'replication_factor': 3}")

    def restore(self) -> None:
        self._alter(self._original)

    def __enter__(self) -> Replicas:
        return self

    def __exit__(self, *exc: object) -> None:
        self.restore()


def settle(calls: list[Callable[[], Future]], *, started: list[Future] | None = None, attempts: int = 5,
           timeout: float = 180) -> tuple[list, int]:
    """Each zero-argument call's future's result, calling again (as a client retries) what the
    cluster failed (a ClusterError: a timeout under load, a contended LWT); the results and the
    retries. ``started``: the first round's futures, made by the caller (else every call is made
    here before any is waited on). Any other error is raised."""
    results: list = [None] * len(calls)
    pending = dict(enumerate(started if started is not None else [call() for call in calls]))
    retries = 0
    for _attempt in range(attempts):
        _done, not_done = wait(pending.values(), timeout=timeout)
        assert not not_done, f"{len(not_done)} calls never completed"
        again = []
        for i, future in pending.items():
            error = future.exception()
            if error is None:
                results[i] = future.result()
            elif isinstance(error, ClusterError):
                again.append(i)
            else:
                raise error
        if not again:
            return results, retries
        retries += len(again)
        pending = {i: calls[i]() for i in again}
    raise AssertionError(f"{len(pending)} calls failed {attempts} times")


def stale_writer(open_store, state_dir, tenant_id, conversation_id):
    """A conversation taken over by a writer of fencing epoch 1 after one of epoch 0 wrote it, and a
    third writer of epoch 0 that never checked it: (the stale writer, the first message's seq)."""
    old = open_store(state_dir=state_dir, node_id=1)
    seq = old.send(new_request(tenant_id=tenant_id, conversation_id=conversation_id)).conversation_seq
    old.drain(60)
    new = open_store(state_dir=state_dir, node_id=2, fencing_epoch=1, head_failover=True)
    new.send(new_request(tenant_id=tenant_id, conversation_id=conversation_id))
    new.drain(60)
    return open_store(state_dir=state_dir, node_id=3), seq  # epoch 0, never checked this conversation
