"""Reactor probe: a plain CQL key/value workload under Locust (gevent), one driver reactor per run.

Not part of the lab's load users: it exists to choose the driver reactor the load users run on
(see loadgen/README.md). Parameters come from PROBE_* variables set by ``run.py``.
"""
from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import gevent
import gevent.event
from locust import User, constant, events, task

from lab.measure.hdr import LatencyRecorder
from lab.load.pacing import FixedRateSchedule

REACTOR = os.environ.get("PROBE_REACTOR", "libev")
RATE_PER_USER = float(os.environ.get("PROBE_RATE_PER_USER", "0"))  # 0: closed loop
OUT = Path(os.environ.get("PROBE_OUT", "/tmp/probe"))
HOST = os.environ.get("PROBE_HOST", "127.0.0.1")
PORT = int(os.environ.get("PROBE_PORT", "9042"))
KEYS = 100_000

_state: dict = {}
_ready = gevent.event.Event()  # users wait for the session: spawning can overtake a slow connect


THREADPOOL = REACTOR == "libev-threadpool"  # run via loadgen.launch: nothing patched, calls in native threads


def _connection_class():
    if REACTOR == "asyncio":
        from cassandra.io.asyncioreactor import AsyncioConnection
        return AsyncioConnection
    if REACTOR == "asyncore":
        from cassandra.io.asyncorereactor import AsyncoreConnection
        return AsyncoreConnection
    if REACTOR == "gevent":
        from cassandra.io.geventreactor import GeventConnection  # scylla-driver <= 3.29.11 only
        return GeventConnection
    from cassandra.io.libevreactor import LibevConnection
    return LibevConnection


@events.init.add_listener
def _connect(environment, **_kw):
    from cassandra.cluster import Cluster

    if getattr(environment.runner, "__class__", None).__name__ == "MasterRunner":
        return
    cluster = Cluster([HOST], port=PORT, connection_class=_connection_class(), protocol_version=4,
                      connect_timeout=10, control_connection_timeout=10)
    if THREADPOOL:
        gevent.get_hub().threadpool.maxsize = 256
    session = cluster.connect("loadprobe")
    session.default_timeout = 5
    _state.update(cluster=cluster, session=session,
                  write=session.prepare("INSERT INTO kv (k, v) VALUES (?, ?)"),
                  read=session.prepare("SELECT v FROM kv WHERE k = ?"),
                  recorder=LatencyRecorder(fixed_rate=RATE_PER_USER > 0),
                  t0=time.time())
    _ready.set()


@events.quitting.add_listener
def _dump(environment, **_kw):
    rec = _state.get("recorder")
    if rec is None or not rec.totals:
        return
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"probe-{os.getpid()}.json").write_text(json.dumps(
        {"pid": os.getpid(), "reactor": REACTOR, "started": _state["t0"], "ended": time.time(),
         "totals": rec.totals_json()}))


class CqlProbeUser(User):
    wait_time = constant(0)

    def on_start(self) -> None:
        _ready.wait()
        self._k = 0
        self._schedule = None
        if RATE_PER_USER > 0:
            self._schedule = FixedRateSchedule.for_rate(RATE_PER_USER, start_ns=time.perf_counter_ns(),
                                                        phase=random.random())

    @task
    def call(self) -> None:
        due = None
        if self._schedule is not None:
            due = self._schedule.due_ns(self._k)
            self._k += 1
            delay = (due - time.perf_counter_ns()) / 1e9
            if delay > 0:
                gevent.sleep(delay)
        pool = gevent.get_hub().threadpool if THREADPOOL else None
        op = "write" if random.random() < 0.5 else "read"
        s = _state["session"]
        key = random.randrange(KEYS)
        err = None
        start = time.perf_counter_ns()
        try:
            stmt, params = (_state["write"], (key, b"x" * 100)) if op == "write" else (_state["read"], (key,))
            if pool is not None:
                pool.apply(s.execute, (stmt, params))
            else:
                s.execute(stmt, params)
        except Exception as exc:  # recorded, not dropped
            err = exc
        end = time.perf_counter_ns()
        name = type(err).__name__ if err else None
        _state["recorder"].record(op, started_ns=start, ended_ns=end, due_ns=due, error=name,
                                  timeout="Timeout" in (name or ""))
        self.environment.events.request.fire(request_type="CQL", name=op, response_time=(end - start) / 1e6,
                                             response_length=0, exception=err, context={})
