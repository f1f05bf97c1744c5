"""The lab's locustfile: ``lab load`` runs it headless, ``lab load --web`` with Locust's web UI
(``locust -f loadgen/locustfile.py`` works too, given a plan in LAB_LOAD_PLAN).

More: docs/load-internals.md.
"""
from __future__ import annotations

import os

import gevent
from locust import events
from locust.runners import STATE_RUNNING, STATE_SPAWNING, MasterRunner

from lab.load.plan import LoadPlan, load_profile
from lab.load.locust import runtime
from lab.load.locust.interrupt import ctrl_c_between_calls
from lab.load.locust import users as _users

_plan = LoadPlan.from_env(os.environ)
_profile = load_profile(_plan.profile)
for _kind, _cls in _users.USER_CLASSES.items():
    _cls.weight = int(_profile.weights.get(_kind, 0))
    if _cls.weight > 0:
        globals()[_cls.__name__] = _cls
del _kind, _cls  # Locust collects every User class bound in this module: only the weighted ones

if _plan.duration_seconds > 0:  # headless runs end with their stage table; the web UI runs until stopped
    from lab.load.locust.shapes import StageTableShape  # noqa: F401


if os.environ.get("LAB_LOAD_ROLE") != "master":  # the master of a distributed run holds no store
    ctrl_c_between_calls()  # lab load stops its processes with SIGINT: never inside a user's call
    runtime.init_context().open()


@events.init.add_listener
def _start(environment, **_kw) -> None:
    if not isinstance(environment.runner, MasterRunner) and runtime._CONTEXT is not None:
        gevent.spawn(runtime._CONTEXT.start)


@events.test_start.add_listener
def _test_start(environment, **_kw) -> None:
    if runtime._CONTEXT is not None and not isinstance(environment.runner, MasterRunner):
        runtime._CONTEXT.test_started()


@events.test_stop.add_listener
def _write_totals(environment, **_kw) -> None:
    if runtime._CONTEXT is not None and runtime._CONTEXT.store is not None:
        runtime._CONTEXT.test_stopped()
        runtime._CONTEXT.write_totals()


@events.quitting.add_listener
def _close(environment, **_kw) -> None:
    # SIGTERM (how `lab load --web` ends) fires quitting while users still run: stop them first
    # (in-flight calls finish under --stop-timeout), so no call meets a closed store
    runner = environment.runner
    if runner is not None and not isinstance(runner, MasterRunner) and runner.state in (STATE_SPAWNING,
                                                                                          STATE_RUNNING):
        runner.stop()
    if runtime._CONTEXT is not None:
        runtime._CONTEXT.close()
