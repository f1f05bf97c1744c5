"""Locust users that drive the store's public API (docs/store-api.md) and nothing else.

More: docs/load-internals.md.
"""
from __future__ import annotations

import random
from typing import Any
from collections.abc import Callable

from locust import User, task

from lab.errors import RequestTimeout
from lab.load.operation_cpu import FUTURE, GEVENT, THREAD
from lab.load.outcomes import OUTCOME_REQUEST_TYPE, classify, locust_name
from lab.measure.process_cpu import thread_cpu_ns
from lab.measure.timing import now_ns
from lab.load.plan import S1_DM_ENTRIES, S1_DMS, S1_GROUP_ENTRIES
from lab.load.pacing import UserPacer

from lab.load.locust.hub_wait import HubWaiter
from lab.load.locust.runtime import LoadContext, context

IDLE_SECONDS = 3600.0  # after the schedule: wait (killable) until Locust stops the run
REACTION_KEYS = ("like", "love", "laugh", "wow", "sad", "ok")
_NS = 1_000_000_000
_PICK_ATTEMPTS = 4


class StoreUser(User):
    """Abstract: owns the store of its process and times each call. Subclasses hold no logic
    beyond choosing what to ask the store."""

    abstract = True
    kind = ""

    def on_start(self) -> None:
        self.context: LoadContext = context()
        self.context.wait_ready()
        plan = self.context.plan
        self._pacer = UserPacer(plan.stages, t0_ns=self.context.t0_ns, users=plan.users,
                                rng=random.Random()) if plan.fixed_rate else None
        self._due: int | None = None
        self._done = False
        # Locust's wait, not gevent.sleep: the user sleeps until its first due call in Locust's
        # waiting state, so a stop ends it at once. A user with no call due in the whole stage table
        # (a staircase's low steps split over many users) sleeps IDLE_SECONDS here; asleep in the
        # running state it held every stop for Locust's full --stop-timeout (30 s)
        self.wait()

    def wait_time(self) -> float:
        now = now_ns()
        if self.context.stopped:  # the runner stopped the run early: no call starts after that
            self._done = True
            return IDLE_SECONDS
        if self._pacer is not None:
            self._due = self._pacer.next_due(now)
            if self._due is None:
                self._done = True
                return IDLE_SECONDS
            return max(0, self._due - now) / _NS
        t0, end = self.context.t0_ns, self.context.end_ns
        if end is not None and now >= end:
            self._done = True
            return IDLE_SECONDS
        return max(0, t0 - now) / _NS

    def call(self, op: str, fn: Callable[..., Any], *args: Any,
             on_result: Callable[[Any, str], None] | None = None, **kwargs: Any) -> Any:
        """Run one store call, record it (failures included), return its result or None. Where the
        store has ``<fn>_async`` (and the plan says store_futures) the call is that future, waited
        on through the hub; else ``fn`` in a native thread of the pool (lab.load.operation_cpu: paths).

        ``on_result(result, phase)`` runs before the call is counted anywhere: a user stopped
        while Locust's request event runs (quitting the web UI kills user greenlets) must not
        leave a send counted ok whose ack was never recorded for the audit."""
        if self._done:
            return None
        due = self._due
        ctx = self.context
        cpu = [0]
        start = now_ns()
        error: BaseException | None = None
        result = None
        ctx.in_flight += 1
        ctx.started += 1
        try:
            twin = ctx.async_twin(fn)
            if twin is not None:  # the store's future: its steps on the driver's loop, this greenlet woken by the hub
                ctx.call_paths[op] = FUTURE
                result = _future_result(ctx.hub_waiter, cpu, twin, args, kwargs)
            elif ctx.threadpool is not None:  # a native thread runs it (and times its CPU); this greenlet waits
                ctx.call_paths[op] = THREAD
                result = ctx.threadpool.apply(_timed_cpu, (cpu, fn, args, kwargs))
            else:
                ctx.call_paths[op] = GEVENT
                result = fn(*args, **kwargs)
        except Exception as exc:  # recorded, never dropped: a failed call is a data point
            error = exc
        finally:
            ctx.in_flight -= 1
        end = now_ns()
        outcome = classify(op, result, error)  # an answer the design defines is not a failure
        phase = ctx.phase_at(end)  # where it finished: what the summary and the live counts count
        if on_result is not None and error is None and result is not None:
            on_result(result, phase)
        ctx.finish_call(op, due=due, start=start, end=end, error=error, outcome=outcome,
                        timeout=isinstance(error, RequestTimeout))
        if phase == "measured":
            ctx.caller_cpu_ns[op] = ctx.caller_cpu_ns.get(op, 0) + cpu[0]
        if outcome is not None:
            self.environment.events.request.fire(request_type=OUTCOME_REQUEST_TYPE, name=locust_name(op, outcome),
                                                 response_time=(end - start) / 1e6, response_length=0, exception=None,
                                                 context={"phase": phase})
        else:
            self.environment.events.request.fire(request_type="store", name=op, response_time=(end - start) / 1e6,
                                                 response_length=0, exception=error, context={"phase": phase})
        return result

    # helpers for subclasses: choosing, not storing
    def conversation(self, weights: dict[str, float]) -> Any:
        of_kind = self.context.of_kind
        kinds = [k for k in weights if of_kind(k)]
        kind = random.choices(kinds, [weights[k] for k in kinds])[0]
        pool = of_kind(kind)
        for _ in range(_PICK_ATTEMPTS):  # a conversation with history, without listing them all per call
            conv = random.choice(pool)
            if conv.messages:
                return conv
        return random.choice([c for c in pool if c.messages] or pool)


def _timed_cpu(cpu: list[int], fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """``fn(*args, **kwargs)`` in the thread pool's native thread, its CPU there in ``cpu[0]``
    (lab.load.operation_cpu: the caller's part of a call's loader CPU)."""
    t = thread_cpu_ns()
    try:
        return fn(*args, **kwargs)
    finally:
        cpu[0] = thread_cpu_ns() - t


def _future_result(waiter: HubWaiter, cpu: list[int], twin: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """``twin(*args, **kwargs)``'s future, waited on by this greenlet; the submission's CPU (no
    greenlet switch inside it) in ``cpu[0]``: the future path's caller part (lab.load.operation_cpu)."""
    t = thread_cpu_ns()
    try:
        future = twin(*args, **kwargs)
    finally:
        cpu[0] = thread_cpu_ns() - t
    waiter.wait(future)
    return future.result()


class SenderUser(StoreUser):
    kind = "sender"

    @task
    def send(self) -> None:
        ctx = self.context
        if ctx.sent and random.random() < ctx.profile.retry_share:
            request, _first = random.choice(ctx.sent[-200:])
            self.call("send_retry", ctx.store.send, request,
                      on_result=lambda ack, phase: ctx.record_ack(request, ack, phase))
            return
        conv = self.conversation({"chat": 0.8, "big_group": 0.1, "dm": 0.1})
        request = ctx.keys.request(ctx.template(), conversation_id=conv.conversation_id,
                                   sender_id=random.choice(conv.senders),
                                   client_message_id=ctx.next_client_message_id())
        self.call("send", ctx.store.send, request, on_result=lambda ack, phase: ctx.record_ack(request, ack, phase))


class HistoryReaderUser(StoreUser):
    kind = "history_reader"

    def on_start(self) -> None:
        self._session: tuple[Any, str, int | None, int] | None = None
        super().on_start()

    @task
    def page(self) -> None:
        ctx = self.context
        if self._session is None:
            conv = self.conversation({"chat": 0.8, "big_group": 0.2})
            profile = ctx.profile
            if conv.messages and random.random() < profile.history_jump_share:  # a jump back, then forward
                anchor = random.choice(conv.messages)[0]
                self._session = (conv, "newer", anchor, random.randint(1, 2))
            else:
                self._session = (conv, "older", None, random.choice(profile.history_pages))
        conv, direction, anchor, pages = self._session
        op = "history_latest" if anchor is None else f"history_{direction}"
        # the page size is the store's default, as for an application that does not choose one
        page = self.call(op, ctx.store.history, ctx.keys.tenant_id, conv.conversation_id, direction=direction,
                         anchor=anchor)
        if page is not None and page.has_more and page.next_anchor is not None and pages > 1:
            self._session = (conv, direction, page.next_anchor, pages - 1)
        else:
            self._session = None


class BackfillJoinerUser(StoreUser):
    kind = "backfill_joiner"

    @task
    def backfill(self) -> None:
        from lab.store import BatchEntry

        ctx = self.context
        r = random.random()
        if r < 0.25:
            op, picks = "backfill_s1_group", [(ctx.keys.big_group, ctx.conversations[ctx.keys.big_group].messages[
                -S1_GROUP_ENTRIES:])]
        elif r < 0.5:
            op, picks = "backfill_s1_dms", [(c.conversation_id, c.messages[-S1_DM_ENTRIES:])
                                            for c in ctx.of_kind("dm")[:S1_DMS]]
        else:  # a joiner's realistic mix: a few conversations, a few to a few dozen messages each
            convs = [c for c in ctx.conversations.values() if c.messages]
            op, picks = "backfill_mix", [(c.conversation_id, random.sample(c.messages, min(len(c.messages),
                                                                                         random.randint(1, 40))))
                                         for c in random.sample(convs, min(len(convs), random.randint(2, 12)))]
        entries = [BatchEntry(conversation_id=conv, conversation_seq=seq, message_id=mid)
                   for conv, msgs in picks for seq, mid in msgs]
        if entries:
            self.call(op, ctx.store.batch_read, ctx.keys.tenant_id, entries)


class ReactorUser(StoreUser):
    kind = "reactor"

    @task
    def react(self) -> None:
        ctx = self.context
        conv = self.conversation({"chat": 0.7, "big_group": 0.3})
        if not conv.messages:
            return
        seq = random.choice(conv.messages[-100:])[0]
        user = random.choice(conv.senders)
        r = random.random()
        if r < 0.7:
            self.call("react", ctx.store.react, ctx.keys.tenant_id, conv.conversation_id, seq, user,
                      random.choice(REACTION_KEYS))
        elif r < 0.85:
            self.call("unreact", ctx.store.unreact, ctx.keys.tenant_id, conv.conversation_id, seq, user)
        else:
            self.call("self_reaction", ctx.store.self_reaction, ctx.keys.tenant_id, conv.conversation_id, seq, user)


class RecallEditorUser(StoreUser):
    kind = "recall_editor"
    recalled: set[tuple[Any, int]] = set()  # per process; a recalled message cannot be edited

    @task
    def change(self) -> None:
        ctx = self.context
        conv = self.conversation({"chat": 1.0})
        candidates = [m for m in conv.messages[-50:] if (conv.conversation_id, m[0]) not in self.recalled]
        if not candidates:
            return
        seq = random.choice(candidates)[0]
        actor = random.choice(conv.senders)
        if random.random() < 0.3:
            self.recalled.add((conv.conversation_id, seq))
            self.call("recall", ctx.store.recall, ctx.keys.tenant_id, conv.conversation_id, seq, actor_id=actor)
        else:
            self.call("edit", ctx.store.edit, ctx.keys.tenant_id, conv.conversation_id, seq,
                      body=ctx.template().body or b"edited", actor_id=actor)


USER_CLASSES: dict[str, type[StoreUser]] = {cls.kind: cls for cls in
                                            (SenderUser, HistoryReaderUser, BackfillJoinerUser, ReactorUser,
                                             RecallEditorUser)}
