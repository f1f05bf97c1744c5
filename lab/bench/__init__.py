"""Benchmarks: ratios measured on one node in one run, written to ``results/<run-id>/bench/``.

    store_paths/    ``lab bench store``: each store path against its bare CQL floor (one module per
                    comparison, plus parameters, seeding, recording, report, output and the run);
                    ``--outboxes``: store.send with each outbox and the hot window's cost (outboxes);
                    ``--profile``: the store's hot paths under py-spy (profiling)
    load_generator  ``lab bench load``: ``lab load`` against a plain driver client (throughput and CPU
                    per call), the chat profile's loader CPU per operation, then a staircase
    load_generator_report  what it reports (``bench/load.json``), its goals and its closing note
    loader_profile  ``lab bench load --profile``: the chat profile's Locust worker(s) under py-spy, the
                    loader's CPU by layer against the chat goal (``bench/profile-load/``)
    loader_layers   each py-spy sample's layer (driver, lab.cluster, store, Locust, load runtime, other)
    decode_bench    ``lab bench decode``: a page decoded with raw slot writes, PyO3's safe calls, Python
"""
