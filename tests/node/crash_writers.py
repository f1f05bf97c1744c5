"""Writer processes that tests kill with SIGKILL (a real crash, not an in-process fault).

Run as a script: ``python crash_writers.py <command> <json args>``. The cluster comes from the
``LAB_*`` environment (as the node fixtures read it) with the keyspace given in the args.

- ``send``: opens a MessageStore on ``state_dir`` and sends round-robin over the given
  conversations, printing one JSON line per ack (flushed) after ``send`` returned, so a line
  means "acknowledged". The test kills the process whenever it likes (mid-send, mid-head-update),
  or ``die_after`` N acks the process SIGKILLs itself right after printing the Nth, while its
  head thread is still applying that ack's update (the window a crash hits most often).
- ``change``: opens a MessageStore (another app node) and recalls or edits the given messages,
  printing one JSON line per acknowledged change with its ``time.monotonic()`` (system-wide on
  Linux, so the test compares it with its own clock).
- ``recover``: opens a MessageStore on the same ``state_dir`` (a restarted writer), runs
  ``recover()`` unless told not to, drains and prints what it did.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import uuid
from pathlib import Path


def _store(args: dict):
    from lab.cluster.config import load_config
    from lab.store import MessageStore

    env = {k: v for k, v in os.environ.items() if k.startswith("LAB_")}
    config = load_config(env=env, flags={"lab_home": os.environ.get("LAB_HOME", ".lab")})
    return MessageStore.open(config.replace(keyspace=args["keyspace"]), state_dir=Path(args["state_dir"]),
                             node_id=args.get("node_id", 1), **args.get("options", {}))


def send_forever(args: dict) -> None:
    from lab.store import SendRequest

    tenant = uuid.UUID(args["tenant_id"])
    conversations = [uuid.UUID(c) for c in args["conversations"]]
    sender = uuid.uuid4()
    store = _store(args)
    n = 0
    while True:
        conversation = conversations[n % len(conversations)]
        ack = store.send(SendRequest(tenant_id=tenant, conversation_id=conversation, sender_id=sender,
                                     sender_device_id=sender, client_message_id=f"k-{os.getpid()}-{n}",
                                     body=b"m%d" % n))
        print(json.dumps({"conversation_id": str(conversation), "conversation_seq": ack.conversation_seq,
                          "message_id": ack.message_id}), flush=True)
        n += 1
        if n == args.get("die_after"):
            os.kill(os.getpid(), signal.SIGKILL)


def recover(args: dict) -> None:
    store = _store(args)
    recovered = store.recover() if args.get("call_recover", True) else None
    store.drain()
    print(json.dumps({"recovered": recovered, "alerts": store.alerts.snapshot()}), flush=True)
    store.close()


def change(args: dict) -> None:
    import time

    store = _store(args)
    tenant, actor = uuid.UUID(args["tenant_id"]), uuid.UUID(args["actor_id"])
    for c in args["changes"]:
        conversation = uuid.UUID(c["conversation_id"])
        if c["kind"] == "recall":
            store.recall(tenant, conversation, c["conversation_seq"], actor_id=actor)
        else:
            store.edit(tenant, conversation, c["conversation_seq"], body=c["body"].encode(), actor_id=actor)
        print(json.dumps({**c, "acked_at": time.monotonic()}), flush=True)
    store.close()


if __name__ == "__main__":
    {"send": send_forever, "recover": recover, "change": change}[sys.argv[1]](json.loads(sys.argv[2]))
