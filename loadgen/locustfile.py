"""The locustfile users run: ``locust -f loadgen/locustfile.py`` (see loadgen/README.md).

The users, shapes and per-process runtime live in :mod:`lab.load.locust`; this file only
exposes them to Locust, which collects the User and LoadTestShape classes bound here.
"""
from lab.load.locust.entrypoint import *  # noqa: F401,F403
