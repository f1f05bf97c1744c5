"""The lab's locustfile: ``lab load`` runs it headless; ``locust -f loadgen/locustfile.py`` gives
the web UI with the same users (export LAB_LOAD_PLAN first, see loadgen/README.md).

User weights come from the plan's load profile; only kinds with a positive weight are
exposed to Locust. Each process builds its store on Locust's ``init`` event and closes it
(draining the asynchronous head updates, writing its totals) when Locust quits.
"""
from __future__ import annotations

import os

import gevent
from locust import events
from locust.runners import MasterRunner

from lab.loadplan import LoadPlan, load_profile
from loadgen import runtime
from loadgen import users as _users

_plan = LoadPlan.from_env(os.environ)
_profile = load_profile(_plan.profile)
for _kind, _cls in _users.USER_CLASSES.items():
    _cls.weight = int(_profile.weights.get(_kind, 0))
    if _cls.weight > 0:
        globals()[_cls.__name__] = _cls

if _plan.duration_seconds > 0:  # headless runs end with their stage table; the web UI runs until stopped
    from loadgen.shapes import StageTableShape  # noqa: F401


@events.init.add_listener
def _open_store(environment, **_kw) -> None:
    if isinstance(environment.runner, MasterRunner):
        return
    ctx = runtime.init_context()
    gevent.spawn(ctx.open)


@events.test_stop.add_listener
def _write_totals(environment, **_kw) -> None:
    if runtime._CONTEXT is not None and runtime._CONTEXT.store is not None:
        runtime._CONTEXT.write_totals()


@events.quitting.add_listener
def _close(environment, **_kw) -> None:
    if runtime._CONTEXT is not None:
        runtime._CONTEXT.close()
