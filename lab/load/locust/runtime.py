"""One Locust process's shared state: the store, the latency recorder, its key range, its acks.

More: docs/load-internals.md.
"""
from __future__ import annotations

import math
import os
import random
import time
import uuid
from collections.abc import Callable
from typing import Any

import gevent
import gevent.event
import gevent.monkey

from lab.load.audit import Ack, AckLog, read_acks
from lab.cluster.config import load_config
from lab.cluster.services import load_services
from lab.measure import client_gc
from lab.measure.process_cpu import process_cpu_seconds
from lab.measure.timing import now_ns, wall_seconds
from lab.load.live_counts import ProcessSnapshot, TimelinePoint
from lab.measure.hdr import LATE, IntervalLogWriter, LatencyRecorder
from lab.results.jsonio import write_json
from lab.load.plan import SEED_SHAPES, KeyRange, LoadPlan, load_profile
from lab.load.templates import worker_templates
from lab.cluster.reactors import LOCUST_REACTOR
from lab.load.locust.hub_wait import HubWaiter

_NS = 1_000_000_000
_CONTEXT: LoadContext | None = None
SEED_GATE_POLL_SECONDS = 0.05


class Conversation:
    """What this process knows was acked in one conversation: (seq, message_id), in ack order."""

    __slots__ = ("conversation_id", "kind", "messages", "senders")

    def __init__(self, conversation_id: uuid.UUID, kind: str, senders: list[uuid.UUID]) -> None:
        self.conversation_id = conversation_id
        self.kind = kind  # "big_group" | "dm" | "chat"
        self.messages: list[tuple[int, int]] = []
        self.senders = senders


class LoadContext:
    def __init__(self, plan: LoadPlan, env: dict[str, str]) -> None:
        self.plan = plan
        self.config = load_config(env=env)
        self.services = load_services(env=env)  # the run's outbox and hot window (LAB_*, from the runner)
        self.profile = load_profile(plan.profile)
        self.keys = KeyRange(plan.run_id, plan.worker_index, SEED_SHAPES[plan.seed_size])
        self.recorder = LatencyRecorder(fixed_rate=plan.fixed_rate)
        self.ready = gevent.event.Event()
        self.store: Any = None
        self.connection: Any = None
        self.error: BaseException | None = None
        self.threadpool: Any = None
        self.hub_waiter: HubWaiter | None = None  # set: calls with a store future wait on it (lab.load.locust.hub_wait)
        self._twins: dict[str, Callable[..., Any] | None] = {}
        self.call_paths: dict[str, str] = {}   # operation -> thread | future | gevent (lab.load.operation_cpu)
        self.templates: tuple = ()
        self.conversations: dict[uuid.UUID, Conversation] = {}
        self.sent: list[tuple[Any, Any]] = []  # recent (request, ack) pairs senders may retry
        self._counter = 0
        self._t0_wall = plan.t0
        self._t0_ns: int | None = None  # t0 on lab.measure's clock, converted once t0 is known
        self._t0_ns_of = 0.0
        self.caller_cpu_ns: dict[str, int] = {}  # measured calls' caller CPU per operation (lab.load.operation_cpu)
        self._closed = False
        self._test_since: float | None = None  # wall clock of the running test's start (web UI: several)
        self._measured_seconds = 0.0
        self._stopped_at: float | None = None  # a headless run's test stopped (early, when interrupted)
        self._stop_wall: float | None = None   # the runner's early stop, once published
        self.in_flight = 0                     # calls started and not finished
        self.started = 0                       # calls started, any phase (lab.load.live_counts: the timeline)
        self._timeline: list[TimelinePoint] = []
        load_dir = plan.load_dir
        self.acks_path = load_dir / "acks" / f"{plan.worker_name()}.csv"
        self.hdr_path = load_dir / "hdr" / f"{plan.worker_name()}.hlog"
        self.totals_path = load_dir / "totals" / f"{plan.worker_name()}.json"
        self._by_kind: dict[str, list[Conversation]] | None = None
        self._register_conversations()
        if not plan.seed_gate:
            self._read_seed_acks()

    # ---- clock -------------------------------------------------------------------------
    def _ns_of_wall(self, wall: float) -> int:
        # the users time calls on lab.measure's clock: due times must be on that clock too
        return now_ns() + int((wall - wall_seconds()) * _NS)

    @property
    def t0_wall(self) -> float:
        while not self._t0_wall:
            if not self.plan.start_gate:  # web UI: the run starts with its first test
                self._t0_wall = time.time()
            else:
                self._t0_wall = self.plan.published_t0() or 0.0
                if not self._t0_wall:
                    gevent.sleep(0.05)
        return self._t0_wall

    @property
    def t0_ns(self) -> int:
        # every call asks (its phase, the users' pacing): converted once, not per call
        if self._t0_ns is None or self._t0_ns_of != self._t0_wall:
            self._t0_ns, self._t0_ns_of = self._ns_of_wall(self.t0_wall), self._t0_wall
        return self._t0_ns

    @property
    def end_ns(self) -> int | None:
        """When the measured window ends: the plan's end, or the runner's early stop."""
        if self.plan.duration_seconds <= 0:
            return None
        end = self.t0_ns + int(self.plan.end_seconds * _NS)
        if self._stop_wall is not None:
            end = min(end, self._ns_of_wall(self._stop_wall))
        return end

    @property
    def stopped(self) -> bool:
        return self._stop_wall is not None

    def _check_stop(self) -> None:
        """The runner's early stop (``<load_dir>/stop``), read once an interval: no call starts
        after it, and the window ends there."""
        if self._stop_wall is None and self.plan.start_gate:
            self._stop_wall = self.plan.published_stop()
            if self._stop_wall is not None and self._stopped_at is None:
                self._stopped_at = self._stop_wall

    def phase_at(self, ns: int) -> str:
        """warmup | measured | after: where the moment ``ns`` falls."""
        t0 = self.t0_ns
        if ns < t0 + int(self.plan.warmup_seconds * _NS):
            return "warmup"
        end = self.end_ns
        return "after" if end is not None and ns >= end else "measured"

    def finish_call(self, op: str, *, due: int | None, start: int, end: int, error: BaseException | None,
                    outcome: str | None, timeout: bool) -> str:
        """Count one finished call by *when it finished* (``lab.load.live_counts``): inside the
        measured window it is measured; after the window's end, having been due (or started)
        before it, it was in flight at the end and is counted apart (late); in the warmup it
        is only counted. Returns the phase it finished in (its ack's phase)."""
        finished = self.phase_at(end)
        kw = dict(started_ns=start, ended_ns=end, due_ns=due, error=type(error).__name__ if error else None,
                  timeout=timeout, outcome=outcome)
        if finished == "measured":
            self.recorder.record(op, **kw)
        elif finished == "after":
            if self.phase_at(due if due is not None else start) != "after":
                self.recorder.record(op, book=LATE, **kw)
        else:
            self.recorder.count_warmup()
        return finished

    def measured_seconds(self, now: float | None = None) -> float:
        """The part of the measured window this process has run, as of ``now`` (wall clock)."""
        now = time.time() if now is None else now
        if self.plan.start_gate:  # headless: [t0 + warmup, t0 + end], up to now or an early stop
            if not self._t0_wall:
                return 0.0
            upto = min(now, self._t0_wall + self.plan.end_seconds, self._stopped_at or math.inf)
            return max(0.0, upto - (self._t0_wall + self.plan.warmup_seconds))
        running = 0.0  # the web UI: every test's measured stretch, the running one included
        if self._test_since is not None and self._t0_wall:
            running = max(0.0, now - max(self._test_since, self._t0_wall + self.plan.warmup_seconds))
        return self._measured_seconds + running

    # ---- set-up --------------------------------------------------------------------------
    def _register_conversations(self) -> None:
        k = self.keys
        self.conversations[k.big_group] = Conversation(k.big_group, "big_group", k.senders(k.big_group, 50))
        for c in k.dms():
            self.conversations[c] = Conversation(c, "dm", k.senders(c, 2))
        for c in k.chats():
            self.conversations[c] = Conversation(c, "chat", k.senders(c, 8))

    def _wait_for_seed(self) -> None:
        """``seed_gate``: the runner seeds while this process starts; the seed's acks and
        templates are read once it says they are all on disk (an orphan gives up)."""
        parent = os.getppid()
        while self.plan.seed_gate and not self.plan.seeded_path().exists():
            if os.getppid() != parent:
                raise RuntimeError("the runner that started this load process is gone")
            time.sleep(SEED_GATE_POLL_SECONDS)

    def _read_seed_acks(self) -> None:
        if self.acks_path.exists():  # the runner's seed sends
            for ack in read_acks(self.acks_path):
                if not ack.replayed and ack.conversation_id in self.conversations:
                    self.conversations[ack.conversation_id].messages.append((ack.conversation_seq, ack.message_id))
                    self._counter += 1

    def open(self) -> None:
        """Load the message templates, connect and open the store. Runs when the locustfile is
        imported, before Locust starts its runner: this is seconds of CPU (numpy, the driver's
        metadata) that would otherwise starve the worker's heartbeats to the master."""
        from lab.cluster.connection import connect
        from lab.store import MessageStore

        self._wait_for_seed()
        if self.plan.seed_gate:
            self._read_seed_acks()
        self.templates = tuple(worker_templates(self.plan))  # the seeder's file: no pandas import here
        if not gevent.monkey.is_module_patched("threading"):
            # Locust started with LOCUST_SKIP_MONKEY_PATCH (lab load's default): the driver keeps its
            # default reactor in a real thread. A store call with an asynchronous twin is the store's
            # future, chained on that thread, the user's greenlet woken through the hub (store_futures);
            # any other runs in one of gevent's native threads, so the store's blocking work (SQLite
            # fsync, crypto) overlaps as in a plain client. Patched (plain `locust -f`): calls run on
            # the gevent loop, driver on asyncore.
            self.threadpool = gevent.get_hub().threadpool
            self.threadpool.maxsize = max(4, -(-self.plan.users // self.plan.workers) + 4)
            if self.plan.store_futures:
                self.hub_waiter = HubWaiter()
            self.connection = connect(self.config, reactor=self.plan.reactor)
        else:
            self.connection = connect(self.config, reactor=self.plan.reactor or LOCUST_REACTOR)
        self.store = MessageStore.open(self.config, state_dir=self.plan.state_dir(), node_id=self.plan.node_id,
                                       connection=self.connection, **self.services.store_options())
        self.acks = AckLog(self.acks_path)
        client_gc.settle(self.services.client_gc)  # set-up done (lab.measure.client_gc)

    def start(self) -> None:
        """Report ready, wait for t0 (start gate), start the interval log (in a greenlet: users
        wait on :attr:`ready`)."""
        try:
            self.plan.ready_path().parent.mkdir(parents=True, exist_ok=True)
            self.plan.ready_path().write_text(str(os.getpid()))
            self.hdr_path.parent.mkdir(parents=True, exist_ok=True)
            self._hdr_file = open(self.hdr_path, "w", encoding="utf-8")
            # web UI: the log starts now; t0 (the phases' origin) waits for the first test
            self._log_t0 = self.t0_wall if self.plan.start_gate else time.time()
            self._hdr = IntervalLogWriter(self._hdr_file, start_time_s=self._log_t0,
                                          comment=f"[lab load {self.plan.run_id} {self.plan.worker_name()}]")
            gevent.spawn(self._flush_loop)
        except BaseException as exc:
            self.error = exc
            raise
        finally:
            self.ready.set()

    # ---- tests (one in a headless run; the web UI may start and stop several) -----------
    def test_started(self) -> None:
        if self._test_since is None:
            self._test_since = time.time()
            if not self.plan.start_gate and not self._t0_wall:  # web UI: the first test's start is t0
                self._t0_wall = self._test_since

    def test_stopped(self) -> None:
        """Add the test's measured stretch (after the warmup) to :attr:`measured_seconds`."""
        if self._test_since is None or not self._t0_wall:
            return
        now = time.time()
        start = max(self._test_since, self._t0_wall + self.plan.warmup_seconds)
        self._measured_seconds += max(0.0, now - start)
        self._test_since = None
        if self._stopped_at is None:
            self._stopped_at = now

    def wait_ready(self) -> None:
        self.ready.wait()
        if self.error is not None:
            raise RuntimeError(f"load process could not open the store: {self.error}")

    # ---- what users share ----------------------------------------------------------------
    def next_client_message_id(self) -> str:
        self._counter += 1
        return self.keys.client_message_id(self._counter, prefix=f"w{os.getpid()}")

    def template(self) -> Any:
        return random.choice(self.templates)

    def async_twin(self, fn: Callable[..., Any]) -> Callable[..., Any] | None:
        """The store's ``<name>_async`` for the store method ``fn`` (the same call, its result a
        ``concurrent.futures.Future``) when this process waits on store futures, else None."""
        if self.hub_waiter is None:
            return None
        name = fn.__name__
        if name not in self._twins:
            self._twins[name] = store_twin(self.store, fn)
        return self._twins[name]

    def of_kind(self, kind: str) -> list[Conversation]:
        """This process's conversations of one kind (kept per kind: users ask on every call)."""
        by_kind = self._by_kind
        if by_kind is None:
            by_kind = self._by_kind = {}
            for c in self.conversations.values():
                by_kind.setdefault(c.kind, []).append(c)
        return by_kind.get(kind, [])

    def record_ack(self, request: Any, ack: Any, phase: str) -> None:
        conv = self.conversations.get(request.conversation_id)
        if conv is not None and not ack.replayed:
            conv.messages.append((ack.conversation_seq, ack.message_id))
        self.acks.append(Ack(phase=phase, tenant_id=request.tenant_id, conversation_id=request.conversation_id,
                             conversation_seq=ack.conversation_seq, message_id=ack.message_id,
                             client_message_id=request.client_message_id, sender_id=request.sender_id,
                             replayed=ack.replayed))
        if not ack.replayed:
            self.sent.append((request, ack))
            if len(self.sent) > 1000:
                del self.sent[:500]

    # ---- files -----------------------------------------------------------------------------
    def _flush_loop(self) -> None:
        step = self.plan.interval_seconds
        begin = time.time()
        while not self._closed:
            now = time.time()
            # interval edges on t0 + k * step, so the workers' logs line up
            k = int((now - self._log_t0) // step) + 1
            gevent.sleep(max(0.0, self._log_t0 + k * step - now))
            end = time.time()
            self._write_interval(begin, end)
            begin = end

    def _write_interval(self, begin: float, end: float) -> None:
        self._check_stop()
        interval = self.recorder.take_interval()
        if interval and not self._hdr_file.closed:
            self._hdr.write_interval(interval, begin_s=begin, end_s=end)
        if hasattr(self, "acks"):
            self.acks.flush()
        self._tick(end)
        self.write_totals()

    def _tick(self, now: float) -> None:
        """A timeline point: this process's CPU (all threads) and measured calls at ``now``."""
        r = self.recorder
        self._timeline.append(TimelinePoint(t=now - getattr(self, "_log_t0", now), cpu_seconds=process_cpu_seconds(),
                                            calls=r.calls, service_us=r.service_sum_us,
                                            corrected_us=r.corrected_sum_us, started=self.started))

    def snapshot(self, *, final: bool = False) -> ProcessSnapshot:
        """What this process has counted as of now (``lab.load.live_counts``: the one source)."""
        now = time.time()
        extra = {"fixed_rate": self.plan.fixed_rate, "acks": getattr(getattr(self, "acks", None), "count", 0),
                 "driver": "native-threads" if self.threadpool is not None else "gevent",
                 "reactor": self.connection.cluster.connection_class.__name__ if self.connection is not None else None,
                 "call_paths": dict(sorted(self.call_paths.items())),
                 # lab.load.operation_cpu: the callers' CPU of the measured calls (not measured on gevent)
                 "caller_cpu_seconds": {op: ns / _NS for op, ns in sorted(self.caller_cpu_ns.items())}
                 if self.threadpool is not None else None}
        if self.store is not None:
            extra["alerts"] = self.store.alerts.snapshot()
            extra["requests"] = self.connection.counter.snapshot()
        return ProcessSnapshot(worker=self.plan.worker_name(), pid=os.getpid(), written_at=now,
                               t0=getattr(self, "_log_t0", self._t0_wall or 0.0), final=final,
                               measured_seconds=self.measured_seconds(now), operations=dict(self.recorder.totals),
                               late=dict(self.recorder.late), warmup_calls=self.recorder.warmup_calls,
                               in_flight=self.in_flight, timeline=tuple(self._timeline), extra=extra)

    def write_totals(self, *, final: bool = False) -> None:
        self.totals_path.parent.mkdir(parents=True, exist_ok=True)
        # atomic: the runner (and a distributed worker's forwarder) read it while it is rewritten
        write_json(self.totals_path, self.snapshot(final=final).to_json(), indent=None)

    def close(self) -> None:
        if self._closed:
            return
        self.test_stopped()
        self._closed = True
        if hasattr(self, "_hdr_file"):
            self._write_interval(time.time(), time.time())
            self._hdr_file.close()
        self.write_totals(final=True)
        if self.store is not None:
            self.store.close()  # drains the asynchronous conversation_head updates
            self.connection.close()
        if self.hub_waiter is not None:
            self.hub_waiter.close()
        if hasattr(self, "acks"):
            self.acks.close()


def init_context(env: dict[str, str] | None = None) -> LoadContext:
    global _CONTEXT
    env = dict(os.environ if env is None else env)
    plan = LoadPlan.from_env(env)
    index = env.get("LAB_LOAD_WORKER_INDEX")
    if index is not None:
        plan = plan.for_worker(int(index))
    _CONTEXT = LoadContext(plan, env)
    return _CONTEXT


def context() -> LoadContext:
    if _CONTEXT is None:
        raise RuntimeError("the load context is built on Locust's init event (loadgen/locustfile.py)")
    return _CONTEXT


def store_twin(store: Any, fn: Callable[..., Any]) -> Callable[..., Any] | None:
    """``store.<name>_async`` for ``fn``, the bound method ``store.<name>``, by name alone; None
    when ``fn`` is no method of ``store`` or the store has no such twin."""
    if getattr(fn, "__self__", None) is not store:
        return None
    return getattr(store, f"{fn.__name__}_async", None)
