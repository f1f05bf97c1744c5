"""A load worker's seed: the conversations its readers find history in from the first second.

Per worker (its own key range, :class:`lab.load.plan.KeyRange`): a big group, direct chats and
some group chats, sent through the store's write path from the process that starts the run,
each ack in the worker's ack log (phase ``seed``) so the audit holds the store to them too.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from lab.cluster.config import ClusterConfig
from lab.cluster.services import ServicesConfig
from lab.load.audit import Ack, AckLog
from lab.load.plan import SEED_SHAPES, KeyRange, LoadPlan
from lab.load.templates import build_templates
from lab.store import MessageStore

SEED_THREADS = 16


def seed_worker(config: ClusterConfig, plan: LoadPlan, *, services: Any = None) -> int:
    """Send the worker's seed conversations through the store (with the run's services,
    ServicesConfig.store_options); acks go to its ack log."""

    keys = KeyRange(plan.run_id, plan.worker_index, SEED_SHAPES[plan.seed_size])
    shape = keys.shape
    templates = build_templates(plan)  # also written for the worker's Locust process (lab.load.templates)
    plan_items: list[tuple[Any, Any]] = [(keys.big_group, keys.senders(keys.big_group, 50))] * shape.big_group
    for c in keys.dms():
        plan_items += [(c, keys.senders(c, 2))] * shape.dm_messages
    for c in keys.chats():
        plan_items += [(c, keys.senders(c, 8))] * shape.chat_messages
    requests = [keys.request(templates[i % len(templates)], conversation_id=conv,
                             sender_id=senders[i % len(senders)], client_message_id=keys.client_message_id(i, "seed"))
                for i, (conv, senders) in enumerate(plan_items)]
    log = AckLog(plan.load_dir / "acks" / f"{plan.worker_name()}.csv")
    lock = threading.Lock()
    with MessageStore.open(config, state_dir=plan.state_dir(), node_id=plan.node_id,
                           **(services if services is not None else ServicesConfig()).store_options()) as store:
        def send(request: Any) -> None:
            ack = store.send(request)
            with lock:
                log.append(Ack(phase="seed", tenant_id=request.tenant_id, conversation_id=request.conversation_id,
                               conversation_seq=ack.conversation_seq, message_id=ack.message_id,
                               client_message_id=request.client_message_id, sender_id=request.sender_id,
                               replayed=ack.replayed))
        with ThreadPoolExecutor(SEED_THREADS) as pool:
            list(pool.map(send, requests))
        store.drain()
    log.close()
    return len(requests)
