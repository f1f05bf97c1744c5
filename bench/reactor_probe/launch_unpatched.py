"""Start Locust with the gevent patching narrowed so the CQL driver keeps real threads.

``python bench/reactor_probe/launch_unpatched.py <locust arguments>`` is ``locust <arguments>`` except that Locust's
own ``monkey.patch_all()`` is skipped (``LOCUST_SKIP_MONKEY_PATCH``) and nothing of the
standard library is patched: Locust itself runs on gevent's own primitives (greenlets,
``gevent.sleep``, ``zmq.green``, ``gevent.pywsgi``) and does not need the patch, while the
driver, left unpatched, runs its default libev reactor in a real OS thread as it does in a
plain process. Users hand each store call to a native thread pool (the probe's libev-threadpool variant) and
wait for it cooperatively. Measured, not adopted: see loadgen/README.md.
"""
from __future__ import annotations

import os
import sys


def main() -> int:
    os.environ["LOCUST_SKIP_MONKEY_PATCH"] = "1"
    from locust.main import main as locust_main

    sys.argv[0] = "locust"
    return locust_main()


if __name__ == "__main__":
    sys.exit(main())
