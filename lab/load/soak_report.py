"""What a soak reports: each audit, the operations per kind, the totals (``soak/summary.json``).

More: docs/load-internals.md.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lab.load.audit import LogAudit


@dataclass(frozen=True, kw_only=True)
class SoakAudit:
    """One audit of the soak: every acked send (and recall) read back. ``error`` when the
    audit itself could not run (the counts are then None)."""

    at_seconds: float
    final: bool
    seconds: float
    acked: int | None = None
    replays: int | None = None
    lost: int | None = None             # neither history nor a direct partition read returns it
    hidden_by_head: int | None = None   # in its partition, not yet in history (conversation_head lags)
    duplicated: int | None = None
    replay_mismatches: int | None = None
    recalls: int | None = None
    recalls_lost: int | None = None
    edits: int | None = None
    edits_lost: int | None = None
    examples: tuple[str, ...] = ()
    error: str | None = None
    log: LogAudit | None = None          # the final audit: the acks against the outbox

    @property
    def clean(self) -> bool:
        return (self.error is None and (self.lost, self.duplicated, self.replay_mismatches, self.recalls_lost,
                                        self.edits_lost or 0) == (0,) * 5
                and (self.log is None or self.log.ok))

    def to_json(self) -> dict[str, Any]:
        out = {"at_seconds": self.at_seconds, "final": self.final}
        if self.error is not None:
            return {**out, "error": self.error, "seconds": self.seconds}
        return {**out, "acked": self.acked, "replays": self.replays, "lost": self.lost,
                "hidden_by_head": self.hidden_by_head, "duplicated": self.duplicated,
                "replay_mismatches": self.replay_mismatches, "recalls": self.recalls,
                "recalls_lost": self.recalls_lost, "edits": self.edits, "edits_lost": self.edits_lost,
                "examples": list(self.examples), "seconds": self.seconds,
                "log": None if self.log is None else self.log.to_json()}


@dataclass(frozen=True, kw_only=True)
class OperationCounts:
    ok: int
    errors: int                          # failed after the client's retries
    error_types: Mapping[str, int]       # by type; "retried <type>" for errors a retry overcame

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "errors": self.errors, "error_types": dict(self.error_types)}


@dataclass(frozen=True, kw_only=True)
class SoakTotals:
    """The soak's totals: operations per kind and the last audit's counts."""

    tenant_id: str
    elapsed_seconds: float
    operations: Mapping[str, OperationCounts]
    final_audit: SoakAudit | None
    audits: tuple[SoakAudit, ...]
    sends_failed: int
    replayed_after_error: int
    batch_missing: int
    unexpected_errors: int
    alerts: Mapping[str, Any]

    @property
    def operations_total(self) -> int:
        return sum(o.ok + o.errors for o in self.operations.values())

    @property
    def errors_total(self) -> int:
        return sum(o.errors for o in self.operations.values())

    @property
    def retried_errors(self) -> int:
        return sum(n for o in self.operations.values() for kind, n in o.error_types.items()
                   if kind.startswith("retried"))

    @property
    def ok(self) -> bool:
        return (self.final_audit is not None and self.final_audit.clean and self.batch_missing == 0
                and self.unexpected_errors == 0)

    def _final(self, name: str) -> Any:
        return getattr(self.final_audit, name) if self.final_audit is not None else None

    def to_json(self) -> dict[str, Any]:
        return {"tenant_id": self.tenant_id, "elapsed_seconds": self.elapsed_seconds,
                "operations": {op: o.to_json() for op, o in self.operations.items()},
                "operations_total": self.operations_total, "errors_total": self.errors_total,
                **{k: self._final(k) for k in ("acked", "lost", "duplicated", "hidden_by_head", "replay_mismatches",
                                               "recalls", "recalls_lost", "edits", "edits_lost")},
                "sends_failed": self.sends_failed, "replayed_after_error": self.replayed_after_error,
                "batch_missing": self.batch_missing, "unexpected_errors": self.unexpected_errors,
                "audits_run": len(self.audits), "audits_failed": sum(1 for a in self.audits if a.error is not None),
                "audits": [a.to_json() for a in self.audits], "alerts": dict(self.alerts), "ok": self.ok,
                "log": self.final_audit.log.to_json() if self.final_audit is not None and self.final_audit.log else None}
