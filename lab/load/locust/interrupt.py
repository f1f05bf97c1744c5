"""Ctrl-C in a load process, delivered where no user is mid-call.

More: docs/load-internals.md.
"""
from __future__ import annotations

import signal

import gevent


def _interrupt_main() -> None:
    gevent.get_hub().parent.throw(KeyboardInterrupt())


def ctrl_c_between_calls() -> None:
    """Install the SIGINT handler (once per process, before Locust's main waits)."""
    gevent.signal_handler(signal.SIGINT, _interrupt_main)
