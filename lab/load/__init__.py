"""Load on the store: Locust users, open-loop pacing, audits, soak.

    runner       ``lab load``: check, seed, run Locust (headless or its web UI), collect, audit
    processes    the Locust processes: command lines, environment, start, stop by PID
    locust_run   one Locust run, written once: start, gate, watch (live status, deadline), stop on Ctrl-C/SIGTERM
    distributed  ``lab load --master`` / ``--worker``: one run over several load machines
    coordinator  the master's HTTP side channel: plan out, start gate, results and audits back
    load_folders where a load writes; ``--run-id`` reuse of an earlier load's seed and history
    progress     phases and the live status a run reports while it runs
    live_counts  the one source of a run's counts: every load process's snapshot (status, metrics, summary)
    run_monitor  the runner's look once a second (status, metrics, sizing, a staircase's stop) and the summary
    verdict      valid or loader-bound: loader CPU, achieved rate, schedule lag, with reasons
    outcomes     answers the design defines that are not failures (edit of a recalled message, ...)
    loader_sizing  loader CPU per call -> processes and machines a rate needs; ``--processes auto``
    metrics_endpoint  the live counts in Prometheus' text format (``--metrics-port``)
    staircase_figure  a staircase's latency against its rate (``staircase.png``)
    thread_driver  a fixed rate from a thread pool in the caller's process (the notebooks' load), judged the same way
    worker_seed  a worker's seed conversations, sent through the store before the run
    templates    a worker's message templates, written by its seeder for its Locust process
    summary      ``load/summary.json``: LoadSummary per operation, per step, acks, workers
    loadgen_cpu  the load generator's CPU while it runs
    operation_cpu  loader CPU per call of each operation (the calling thread's measured, the rest shared)
    plan         a load run's plan (LAB_LOAD_PLAN), per-worker key ranges, message templates
    pacing       open-loop schedules: per-user due times through a stage table, staircase
    audit        the acks log and the read-back audit (lost / duplicated must be 0)
    soak         ``lab soak``: sustained mixed load on driver threads with periodic audits
    soak_report  what a soak reports: audits, operations, totals
    soak_checks  the soak's read-back of recalls and edits (recalls lost, edits lost)
    locust/      the Locust side: entrypoint, users, shapes, the per-process runtime, profiles.toml
"""
