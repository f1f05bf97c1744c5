"""Ctrl-C in a load process, delivered where no user is mid-call.

``lab load`` stops its Locust processes with SIGINT (:meth:`lab.load.processes.Processes.stop`).
Python's own SIGINT handler raises KeyboardInterrupt in whatever code runs at that moment: in a
load process that is often a user's greenlet between recording a send's ack and counting the call,
which then dies half-recorded (a fresh-clone run counted 45 measured acks against 44 sends ok;
an earlier one 116 sends ok against 115 acks). Here SIGINT is taken by gevent's loop instead: the
handler runs in a greenlet of its own, between two users' steps, and raises KeyboardInterrupt in
the main greenlet, where Locust's main expects it (it then fires ``quitting``, which stops the
users and closes the store).
"""
from __future__ import annotations

import signal

import gevent


def _interrupt_main() -> None:
    gevent.get_hub().parent.throw(KeyboardInterrupt())


def ctrl_c_between_calls() -> None:
    """Install the SIGINT handler (once per process, before Locust's main waits)."""
    gevent.signal_handler(signal.SIGINT, _interrupt_main)
