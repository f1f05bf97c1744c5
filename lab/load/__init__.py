"""Load on the store: Locust users, open-loop pacing, audits, soak.

Running a load: runner (``lab load``), processes, locust_run, distributed and coordinator (several
machines), load_folders, plan (what each Locust process is handed), pacing, templates, worker_seed.
Watching it: progress, live_counts (the one source of counts), run_monitor, metrics_endpoint,
loadgen_cpu, operation_cpu, loader_sizing (``--processes auto``).
Judging it: verdict (valid, loader- or machine-bound), outcomes, summary, staircase_figure, audit.
The knee at a latency target: knee_search (the search's rule), knee_run (``lab load --slo``),
knee_check (the curve predicted at a rate it did not measure, then measured), knee_mix (the
knee of a mix it did not see, predicted from each operation's CPU, then searched), knee_spread
(repeated searches: their median, range and agreement).
Soak: soak (``lab soak``), soak_report, soak_checks; thread_driver (the notebooks' fixed rate).
locust/: the Locust side (entrypoint, users, shapes, runtime, profiles.toml).

More, and every module in one line: docs/load-internals.md.
"""
