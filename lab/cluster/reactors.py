"""The driver's I/O reactor (the event loop under every CQL request), chosen by name.

More: docs/cluster-internals.md.
"""
from __future__ import annotations

import atexit
import importlib
import sys
import threading

from lab.errors import ConfigError

# name -> (module, class)
REACTORS: dict[str, tuple[str, str]] = {
    "libev": ("cassandra.io.libevreactor", "LibevConnection"),
    "asyncore": ("cassandra.io.asyncorereactor", "AsyncoreConnection"),
    "asyncio": ("cassandra.io.asyncioreactor", "AsyncioConnection"),
    "gevent": ("cassandra.io.geventreactor", "GeventConnection"),
}
DEFAULT_REACTOR = None  # the driver's own choice (libev when its C extension is built)
# In a gevent-patched Locust process (`lab load --driver gevent`, plain `locust -f`). lab load's
# default leaves its workers unpatched and keeps the driver default: loadgen/README.md.
LOCUST_REACTOR = "asyncore"


def reactor_class(name: str | None) -> type | None:
    """The driver connection class for ``name`` (None: the driver default)."""
    if name in (None, "", "default"):
        return None
    if name not in REACTORS:
        raise ConfigError(f"unknown driver reactor {name!r} (known: {', '.join(REACTORS)})", reactor=name)
    module, cls = REACTORS[name]
    try:
        return getattr(importlib.import_module(module), cls)
    except Exception as exc:  # ImportError, or the driver's DependencyException (no asyncore on 3.12)
        raise ConfigError(f"driver reactor {name!r} is not available here: {exc}", reactor=name) from exc


# ---- exiting promptly -----------------------------------------------------------------------
_EXIT_HOOK = threading.Lock()
_exit_hook_registered = False
LOOP_JOIN_SECONDS = 1.0


def stop_libev_loop_at_exit() -> None:
    """Register (once) an exit hook that ends the driver's libev loop thread itself.

    Without it every process that used the driver waits out a timeout at exit: the driver's own
    atexit cleanup stops the loop's prepare watcher first, then joins the loop thread with a 5 s
    timeout, but only that watcher stops the loop's repeating timer, so the loop never returns and
    the join times out. This hook runs before it (atexit is last-in first-out; the driver
    registers at import): it sets the loop's shutdown flag and wakes it while the watcher still
    runs, the loop stops its timer and returns, and the driver's join finds the thread gone."""
    global _exit_hook_registered
    with _EXIT_HOOK:
        if _exit_hook_registered:
            return
        _exit_hook_registered = True
    atexit.register(_end_libev_loop)


def _end_libev_loop() -> None:
    module = sys.modules.get("cassandra.io.libevreactor")
    loop = getattr(module, "_global_loop", None)
    thread = getattr(loop, "_thread", None)
    if loop is None or thread is None or not thread.is_alive():
        return
    loop._shutdown = True
    loop.notify()
    thread.join(LOOP_JOIN_SECONDS)
