"""The Locust side of ``lab load``: what runs inside the Locust processes.

    entrypoint  what ``locust -f`` loads: the user classes, the shape, the process's runtime hooks
    users       StoreUser (abstract: owns the store, times each call) and one user per kind
    shapes      LoadTestShape stage tables (fixed rate, staircase) from the plan
    runtime     the per-process context: store, recorder, acks log, interval logs, totals
    hub_wait    a greenlet waits on a store future another thread completes (one hub wakeup)
    interrupt   Ctrl-C (SIGINT) taken between two users' steps, never inside a call
"""
