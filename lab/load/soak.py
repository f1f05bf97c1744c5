"""``lab soak``: a sustained mixed load on one store, audited while it runs.

More: docs/load-internals.md.
"""
from __future__ import annotations

import concurrent.futures
import itertools
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lab.cluster.config import ClusterConfig
from lab.cluster.connection import connect
from lab.cluster.services import ServicesConfig
from lab.errors import ClusterError, InvalidState, LabError, ValidationError
from lab.load.audit import Ack, audit_worker
from lab.load.soak_checks import edits_lost, recalls_lost
from lab.load.soak_report import OperationCounts, SoakAudit, SoakTotals
from lab.measure import Stopwatch, client_gc, utc_now_iso
from lab.project import RESULTS_DIR
from lab.results.environment import environment
from lab.results.jsonio import jsonable, write_json
from lab.results.run_folders import new_run_dir
from lab.store import BatchEntry, MessageStore, SendAck, SendRequest

__all__ = ["DEFAULT_MIX", "SOAK_OPERATIONS", "Soak", "SoakAudit", "SoakOptions", "SoakResult", "SoakSummary",
           "SoakTotals", "run_soak"]

SOAK_OPERATIONS = ("send", "retry", "history", "batch_read", "react", "unreact", "recall", "edit")
DEFAULT_MIX: Mapping[str, int] = {"send": 50, "retry": 5, "history": 20, "batch_read": 10, "react": 8,
                                  "unreact": 3, "recall": 4, "edit": 4}
DEFAULT_DURATION_SECONDS = 60.0
DEFAULT_THREADS = 8
DEFAULT_CONVERSATIONS = 16
DEFAULT_SENDERS_PER_CONVERSATION = 4
DEFAULT_AUDIT_INTERVAL_SECONDS = 30.0
DEFAULT_SEND_ATTEMPTS = 4
DEFAULT_RETRY_BACKOFF_SECONDS = 0.25
DEFAULT_NODE_ID = 300
DRAIN_TIMEOUT_SECONDS = 120.0
BATCH_ENTRIES = 20
BODY_MAX_BYTES = 400
REACTION_KEYS = ("like", "love", "laugh", "wow", "sad", "ok")
SOAK_SUBDIR = "soak"
SUMMARY_FILE = "summary.json"
AUDIT_EXAMPLES = 3
_PICK_ATTEMPTS = 5


@dataclass(frozen=True, kw_only=True)
class SoakOptions:
    duration_seconds: float = DEFAULT_DURATION_SECONDS
    threads: int = DEFAULT_THREADS
    conversations: int = DEFAULT_CONVERSATIONS
    senders_per_conversation: int = DEFAULT_SENDERS_PER_CONVERSATION
    audit_interval_seconds: float = DEFAULT_AUDIT_INTERVAL_SECONDS
    max_operations: int | None = None    # a bound besides the duration (tests)
    mix: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_MIX))
    send_attempts: int = DEFAULT_SEND_ATTEMPTS
    retry_backoff_seconds: float = DEFAULT_RETRY_BACKOFF_SECONDS
    seed: int | None = None
    node_id: int = DEFAULT_NODE_ID
    results: Path = RESULTS_DIR
    run_dir: Path | None = None          # write into this run's folder instead of a new one

    def __post_init__(self) -> None:
        unknown = sorted(set(self.mix) - set(SOAK_OPERATIONS))
        if unknown:
            raise ValidationError(f"unknown soak operations {unknown} (known: {', '.join(SOAK_OPERATIONS)})",
                                  field="mix")
        if self.mix.get("send", 0) <= 0 or any(w < 0 for w in self.mix.values()):
            raise ValidationError("the mix needs a positive send weight and no negative weight", field="mix")
        for name in ("threads", "conversations", "senders_per_conversation", "send_attempts"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValidationError(f"{name} must be an int >= 1, got {getattr(self, name)!r}", field=name)
        for name in ("duration_seconds", "audit_interval_seconds"):
            if not getattr(self, name) > 0:
                raise ValidationError(f"{name} must be > 0, got {getattr(self, name)!r}", field=name)
        if self.max_operations is not None and self.max_operations < 1:
            raise ValidationError("max_operations must be >= 1", field="max_operations")


@dataclass(frozen=True, kw_only=True)
class SoakSummary:
    """``soak/summary.json``: the run, its options and environment, and the totals."""

    run_id: str
    started_at: str
    options: SoakOptions
    environment: Mapping[str, Any]
    state_dir: Path
    totals: SoakTotals
    services: Mapping[str, Any] = field(default_factory=dict)  # the store's outbox and hot window

    @property
    def ok(self) -> bool:
        return self.totals.ok

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "started_at": self.started_at, "options": jsonable(asdict(self.options)),
                "environment": dict(self.environment), "state_dir": str(self.state_dir), "services": dict(self.services),
                **self.totals.to_json()}


@dataclass(frozen=True, kw_only=True)
class SoakResult:
    run_dir: Path
    soak_dir: Path
    summary: SoakSummary

    @property
    def summary_path(self) -> Path:
        return self.soak_dir / SUMMARY_FILE

    @property
    def ok(self) -> bool:
        return self.summary.ok


@dataclass(frozen=True)
class _Sent:
    request: SendRequest
    ack: SendAck


class Soak:
    """The mixed load and its auditor over one open store (which the caller closes)."""

    def __init__(self, store: Any, options: SoakOptions, *, tenant_id: uuid.UUID | None = None,
                 progress: Callable[[SoakAudit], None] | None = None) -> None:
        self.store = store
        self.options = options
        self.tenant_id = tenant_id or uuid.uuid4()
        self.tag = uuid.uuid4().hex[:8]  # client_message_ids of this run never meet another run's
        rng = random.Random(options.seed)
        self.conversations = [(uuid.UUID(int=rng.getrandbits(128)),
                               [uuid.UUID(int=rng.getrandbits(128)) for _ in range(options.senders_per_conversation)])
                              for _ in range(options.conversations)]
        self._senders = {conv: senders for conv, senders in self.conversations}
        self._progress = progress or (lambda audit: None)
        self._lock = threading.Lock()
        self._sent: list[_Sent] = []
        self._acks: list[Ack] = []
        self._recalled: dict[tuple[uuid.UUID, int], int] = {}  # (conversation, seq) -> event seq
        # (conversation, seq) -> the acked edit written last: (edited_at_activity_id, written_at_us)
        self._edited: dict[tuple[uuid.UUID, int], tuple[int, int]] = {}
        self.edits_acked = 0
        self._client_ids = itertools.count()
        self._started = 0
        self._stop = threading.Event()
        self._watch = Stopwatch()
        self.ok_ops: Counter[str] = Counter()
        self.failed_ops: Counter[str] = Counter()
        self.error_types: dict[str, Counter[str]] = {op: Counter() for op in SOAK_OPERATIONS}
        self.replayed_after_error = 0
        self.unexpected_errors = 0
        self.batch_missing = 0
        self.audits: list[SoakAudit] = []

    # ---- driving -----------------------------------------------------------------------------
    def stop(self) -> None:
        """Ask the workers to finish their current operation and stop."""
        self._stop.set()

    def run(self) -> SoakTotals:
        """Run for the duration (or ``max_operations``), audit periodically and at the end."""
        o = self.options
        self._watch = Stopwatch()
        deadline = o.duration_seconds
        workers = [threading.Thread(target=self._worker, args=(i, deadline), name=f"soak-{i}", daemon=True)
                   for i in range(o.threads)]
        done = threading.Event()

        def auditor() -> None:
            while not done.wait(o.audit_interval_seconds):
                self._progress(self.audit())

        audit_thread = threading.Thread(target=auditor, name="soak-audit", daemon=True)
        for w in workers:
            w.start()
        audit_thread.start()
        for w in workers:
            w.join()
        done.set()
        audit_thread.join()
        final = self.audit(final=True)
        self._progress(final)
        return self.totals()

    def _ticket(self, deadline: float) -> bool:
        if self._stop.is_set() or self._watch.seconds() >= deadline:
            return False
        with self._lock:
            if self.options.max_operations is not None and self._started >= self.options.max_operations:
                return False
            self._started += 1
            return True

    def _worker(self, index: int, deadline: float) -> None:
        seed = None if self.options.seed is None else self.options.seed * 1000 + index
        rng = random.Random(seed)
        ops = list(self.options.mix)
        weights = [self.options.mix[op] for op in ops]
        while self._ticket(deadline):
            op = rng.choices(ops, weights)[0]
            with self._lock:
                if not self._sent:  # nothing to act on yet: everything starts with a send
                    op = "send"
            try:
                getattr(self, f"_{op}")(rng)
            except LabError as exc:
                self._count_error(op, type(exc).__name__, failed=True)
            except Exception as exc:  # a bug, not a cluster condition: counted and fails the run
                self._count_error(op, f"unexpected {type(exc).__name__}: {exc}"[:200], failed=True)
                with self._lock:
                    self.unexpected_errors += 1
            else:
                with self._lock:
                    self.ok_ops[op] += 1

    def _count_error(self, op: str, name: str, *, failed: bool) -> None:
        with self._lock:
            self.error_types[op][name] += 1
            if failed:
                self.failed_ops[op] += 1

    def _as_client(self, op: str, call: Callable[[], Any]) -> Any:
        """``call`` with the client's retries on cluster errors: (result, attempts that failed first)."""
        for attempt in range(self.options.send_attempts):
            try:
                return call(), attempt
            except ClusterError as exc:
                if attempt + 1 == self.options.send_attempts:
                    raise
                self._count_error(op, f"retried {type(exc).__name__}", failed=False)
                time.sleep(self.options.retry_backoff_seconds * (attempt + 1))
        raise AssertionError("unreachable")

    # ---- operations --------------------------------------------------------------------------
    def _pick_sent(self, rng: random.Random) -> _Sent:
        with self._lock:
            return rng.choice(self._sent)

    def _send(self, rng: random.Random) -> None:
        conversation, senders = rng.choice(self.conversations)
        sender = rng.choice(senders)
        n = next(self._client_ids)
        body = f"soak {self.tag} {n} ".encode() + rng.randbytes(rng.randint(0, BODY_MAX_BYTES))
        request = SendRequest(tenant_id=self.tenant_id, conversation_id=conversation, sender_id=sender,
                              sender_device_id=sender, client_message_id=f"soak-{self.tag}-{n}", body=body)
        ack, failures = self._as_client("send", lambda: self.store.send(request))
        with self._lock:
            if failures and ack.replayed:
                self.replayed_after_error += 1
            self._sent.append(_Sent(request, ack))
            # the first ack this client saw: a replay after a lost response is still its first
            self._acks.append(_ack(request, ack, replayed=False))

    def _retry(self, rng: random.Random) -> None:
        sent = self._pick_sent(rng)
        ack, _ = self._as_client("retry", lambda: self.store.send(sent.request))
        with self._lock:  # lab.load.audit checks the replay names the first ack's message
            self._acks.append(_ack(sent.request, ack, replayed=ack.replayed))

    def _history(self, rng: random.Random) -> None:
        conversation, _ = rng.choice(self.conversations)
        page = self.store.history(self.tenant_id, conversation)  # the store's default page size
        if page.has_more and rng.random() < 0.3:
            self.store.history(self.tenant_id, conversation, anchor=page.next_anchor)

    def _batch_read(self, rng: random.Random) -> None:
        with self._lock:
            picks = rng.sample(self._sent, min(len(self._sent), BATCH_ENTRIES))
        entries = [BatchEntry(conversation_id=s.request.conversation_id, conversation_seq=s.ack.conversation_seq,
                              message_id=s.ack.message_id) for s in picks]
        result = self.store.batch_read(self.tenant_id, entries)
        with self._lock:
            self.batch_missing += len(result.missing)

    def _react(self, rng: random.Random) -> None:
        sent = self._pick_sent(rng)
        conv = sent.request.conversation_id
        self.store.react(self.tenant_id, conv, sent.ack.conversation_seq, rng.choice(self._senders[conv]),
                         rng.choice(REACTION_KEYS))

    def _unreact(self, rng: random.Random) -> None:
        sent = self._pick_sent(rng)
        conv = sent.request.conversation_id
        self.store.unreact(self.tenant_id, conv, sent.ack.conversation_seq, rng.choice(self._senders[conv]))

    def _recall(self, rng: random.Random) -> None:
        for _ in range(_PICK_ATTEMPTS):
            sent = self._pick_sent(rng)
            key = (sent.request.conversation_id, sent.ack.conversation_seq)
            with self._lock:
                if key not in self._recalled:
                    break
        request = sent.request
        result, _ = self._as_client("recall", lambda: self.store.recall(
            self.tenant_id, request.conversation_id, sent.ack.conversation_seq, actor_id=request.sender_id))
        with self._lock:
            self._recalled[key] = result.recall_event_conversation_seq

    def _edit(self, rng: random.Random) -> None:
        sent = self._pick_sent(rng)
        request, key = sent.request, (sent.request.conversation_id, sent.ack.conversation_seq)
        body = f"soak {self.tag} edit ".encode() + rng.randbytes(rng.randint(0, BODY_MAX_BYTES))
        try:
            result, _ = self._as_client("edit", lambda: self.store.edit(
                self.tenant_id, request.conversation_id, sent.ack.conversation_seq, body=body,
                actor_id=request.sender_id))
        except InvalidState:  # recalled (before or during the edit): it stays recalled, as it must
            self._count_error("edit", "InvalidState (recalled)", failed=False)
            return
        with self._lock:
            self.edits_acked += 1
            held = self._edited.get(key)
            if held is None or result.written_at_us > held[1]:
                self._edited[key] = (result.edited_at_activity_id, result.written_at_us)

    # ---- after the load ----------------------------------------------------------------------
    def acked(self) -> list[tuple[SendRequest, SendAck]]:
        """Every acknowledged send so far: (request, the first ack the client saw)."""
        with self._lock:
            return [(s.request, s.ack) for s in self._sent]

    def replay_acked(self, *, threads: int = DEFAULT_THREADS) -> dict[str, int]:
        """Re-send every acknowledged request, as clients retrying after a lost response do:
        each must be answered from client_dedup with its first ack's ids (a replay also
        re-submits that message's head update). Replays join the audit's log."""
        sent = self.acked()
        counts = Counter(probed=0, mismatches=0, errors=0)

        def one(item: tuple[SendRequest, SendAck]) -> None:
            request, first = item
            try:
                ack, _ = self._as_client("retry", lambda: self.store.send(request))
            except LabError:
                with self._lock:
                    counts["errors"] += 1
                return
            with self._lock:
                counts["probed"] += 1
                counts["mismatches"] += not (ack.replayed and (ack.message_id, ack.conversation_seq)
                                             == (first.message_id, first.conversation_seq))
                self._acks.append(_ack(request, ack, replayed=ack.replayed))

        with concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="soak-replay") as pool:
            list(pool.map(one, sent))
        return dict(counts)

    # ---- audits ------------------------------------------------------------------------------
    def audit(self, *, final: bool = False) -> SoakAudit:
        """Read every acked send (and recall) back; one entry of ``audits``."""
        with self._lock:
            acks, recalled, edited = list(self._acks), dict(self._recalled), dict(self._edited)
        at_seconds = self._watch.seconds(1)
        watch = Stopwatch()
        try:
            # every ack in the snapshot submitted its head update before it returned
            self.store.drain(DRAIN_TIMEOUT_SECONDS)
            res = audit_worker(self.store, acks, log=final)  # the final audit checks the outbox too
            audit = SoakAudit(at_seconds=at_seconds, final=final, acked=res.acked, replays=res.replays,
                              lost=res.lost - res.stored_not_in_history, hidden_by_head=res.stored_not_in_history,
                              duplicated=res.duplicates, replay_mismatches=res.replay_mismatches,
                              recalls=len(recalled), recalls_lost=recalls_lost(self.store, self.tenant_id, recalled),
                              edits=self.edits_acked, edits_lost=edits_lost(self.store, self.tenant_id, edited),
                              examples=tuple(res.examples[:AUDIT_EXAMPLES]), seconds=watch.seconds(2), log=res.log)
        except (LabError, concurrent.futures.TimeoutError) as exc:
            audit = SoakAudit(at_seconds=at_seconds, final=final, error=f"{type(exc).__name__}: {exc}"[:500],
                              seconds=watch.seconds(2))
        with self._lock:
            self.audits.append(audit)
        return audit

    def totals(self) -> SoakTotals:
        operations = {op: OperationCounts(ok=self.ok_ops[op], errors=self.failed_ops[op],
                                          error_types=dict(self.error_types[op]))
                      for op in SOAK_OPERATIONS if op in self.options.mix}
        return SoakTotals(tenant_id=str(self.tenant_id), elapsed_seconds=self._watch.seconds(1), operations=operations,
                          final_audit=self.audits[-1] if self.audits else None, audits=tuple(self.audits),
                          sends_failed=self.failed_ops["send"], replayed_after_error=self.replayed_after_error,
                          batch_missing=self.batch_missing, unexpected_errors=self.unexpected_errors,
                          alerts=self.store.alerts.snapshot())


def _ack(request: SendRequest, ack: SendAck, *, replayed: bool) -> Ack:
    return Ack(phase="soak", tenant_id=request.tenant_id, conversation_id=request.conversation_id,
               conversation_seq=ack.conversation_seq, message_id=ack.message_id,
               client_message_id=request.client_message_id, sender_id=request.sender_id, replayed=replayed)


def run_soak(config: ClusterConfig, options: SoakOptions, *,
             progress: Callable[[SoakAudit], None] | None = None, services: ServicesConfig | None = None) -> SoakResult:
    """Open a store on ``config`` (schema created if missing) with ``services`` (its outbox; the
    Redis hot window in archiver mode: ServicesConfig.store_options), soak it, write summary.json."""
    services = services if services is not None else ServicesConfig()

    # an unreachable cluster fails at connect, before a run folder exists; the caller's GC as it was, after
    with client_gc.restored(), connect(config) as conn:
        run_dir = Path(options.run_dir) if options.run_dir else new_run_dir(Path(options.results))
        soak_dir = run_dir / SOAK_SUBDIR
        soak_dir.mkdir(parents=True, exist_ok=False)
        # DEKs and the outbox stay out of results/ (which may be shared); keyed by the run
        state_dir = (Path(config.lab_home) / "soak-state" / run_dir.name).resolve()
        started_at = utc_now_iso()
        env = environment(config, conn, services=services.describe_run()).to_json()
        with MessageStore.open(config, state_dir=state_dir, node_id=options.node_id, connection=conn,
                               **services.store_options()) as store:
            store.create_schema()
            client_gc.settle(services.client_gc)
            totals = Soak(store, options, progress=progress).run()
    summary = SoakSummary(run_id=run_dir.name, started_at=started_at, options=options, environment=env,
                          state_dir=state_dir, totals=totals, services=services.describe_run())
    write_json(soak_dir / SUMMARY_FILE, summary)
    return SoakResult(run_dir=run_dir, soak_dir=soak_dir, summary=summary)
