"""Ctrl-C reaches a load process's main greenlet between two users' steps, never inside one
(lab.load.locust.interrupt). The fresh-clone CI of 5fe42aa counted 45 measured acks against 44
sends ok: SIGINT raised KeyboardInterrupt in a user's greenlet between the ack and the count.

Each case is a real process: a "user" greenlet runs a step with no switch in it (as a store call's
bookkeeping is) for about a second; SIGINT is sent by PID while it runs."""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent("""
    import signal, sys, time
    import gevent
    from lab.load.locust.interrupt import ctrl_c_between_calls

    if sys.argv[1] == "installed":
        ctrl_c_between_calls()
    else:  # Python's own handler (Python leaves SIGINT ignored when it starts ignored, as under CI)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    state = {"steps": 0, "whole": 0}

    def user():
        while True:
            state["steps"] += 1
            end = time.monotonic() + 1.0
            print("step", flush=True)
            while time.monotonic() < end:  # one step: no switch inside, as a call's bookkeeping
                pass
            state["whole"] += 1
            gevent.sleep(0.01)

    g = gevent.spawn(user)
    try:
        g.join()
    except KeyboardInterrupt:
        print(f"main interrupted; steps {state['steps']} whole {state['whole']} user dead {g.dead}", flush=True)
""")


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run(mode: str) -> str:
    # the child starts with SIGINT ignored, as a background job's children and CI's do (the fresh-clone
    # CI of c159d32 ran this so): the handler must take SIGINT anyway
    proc = subprocess.Popen([sys.executable, "-c", CHILD, mode], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_ignore_sigint)
    try:
        assert proc.stdout.readline().strip() == "step", proc.stderr.read()
        time.sleep(0.3)  # inside the step
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    return out + err


@pytest.mark.spawns
def test_ctrl_c_waits_for_the_users_step_then_interrupts_the_main_greenlet():
    out = _run("installed")
    assert "main interrupted; steps 1 whole 1 user dead False" in out, out


@pytest.mark.spawns
def test_without_it_python_interrupts_the_user_mid_step():
    """Why the handler exists: Python's default raises in whichever greenlet runs."""
    out = _run("default")
    assert "main interrupted; steps 1 whole 1" not in out and "KeyboardInterrupt" in out, out
