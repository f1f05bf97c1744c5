"""Callers that start together: one thread per item, released at once by a barrier, each calling
``submit(item)``; what each got (its result or its exception) by item. Shared by the tests of the
grouped-submit plumbing (GroupSubmit, Lanes)."""
from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any


def call_at_once(submit: Callable[[Any], Any], items: Sequence[Any], *, wait_seconds: float = 30) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    start = threading.Barrier(len(items))

    def call(item: Any) -> None:
        start.wait()
        try:
            out[item] = submit(item)
        except Exception as exc:  # noqa: BLE001 - the test looks at what each caller got
            out[item] = exc
    threads = [threading.Thread(target=call, args=(item,)) for item in items]
    for t in threads:
        t.start()
    for t in threads:
        t.join(wait_seconds)  # a deadlock guard only
    assert not any(t.is_alive() for t in threads), "a caller was still waiting after the guard"
    return out
