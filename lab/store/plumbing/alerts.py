"""The store's alert counters (``store.alerts``): events the design says must be counted.

More: docs/store-internals.md.
"""
from __future__ import annotations

import threading
from collections import Counter

ALERT_NAMES: tuple[str, ...] = (
    "empty_bucket_stops",          # §4.1 / S-3: history_max_empty_bucket_scan empty buckets in a row
    "head_regressions_dropped",    # §2.4: a head write that would regress latest_conversation_seq
    "head_update_failures",        # §5.1 step 7: the async head update gave up after retries
    "head_update_retries",         # §5.1 step 7: a head update failed on the cluster and was tried again
    "head_group_shrinks",          # the server refused a grouped head read's IN list: the writer's groups got smaller
    "fenced_refusals",             # §2.4: a send / recall / edit refused, a higher epoch owns the conversation
    "heads_restored",              # recover(): a head moved up to the log's newest message of its conversation
    "head_cas_retries",            # failover form: compare-and-set lost a race and re-read
    "archiver_expired_skipped",    # archiver: remaining TTL <= 0, the row is not written
    "recall_reemitted",            # recover(): a logged recall/edit its row did not carry, re-emitted (S-7)
    "recalled_state_restored",     # an edit's state cell won over a recall; RECALLED written back over it
    "partial_rows_skipped",        # a read met a message_record row without message_id (never written whole)
)


class Alerts:
    """Thread-safe counters, read as attributes: ``store.alerts.head_regressions_dropped``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def incr(self, name: str, n: int = 1) -> None:
        if name not in ALERT_NAMES:
            raise KeyError(f"unknown alert {name!r}; known: {', '.join(ALERT_NAMES)}")
        with self._lock:
            self._counts[name] += n

    def __getattr__(self, name: str) -> int:
        if name in ALERT_NAMES:
            with self._lock:
                return self._counts[name]
        raise AttributeError(name)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return {name: self._counts[name] for name in ALERT_NAMES}

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v}" for k, v in self.snapshot().items() if v)
        return f"Alerts({shown})"
