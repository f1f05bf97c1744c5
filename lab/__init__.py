"""The message-store capacity lab.

Packages by audience; each package's docstring lists its modules:

    lab.store        the MessageStore of the design: the façade and its write / read path modules
    lab.cluster      the cluster it runs on: config, connection, tracing, admin/ per server, embedded/ node
    lab.workload     deterministic workload datasets from profiles
    lab.load         Locust load, open-loop pacing, audits, soak
    lab.measure      the one measurement layer: timer, latency recorder, percentiles, statistics
    lab.results      run folders, environment facts, comparison of two runs
    lab.calibration  the notebook suite that measures appendix B, its report and proposal
    lab.bench        benchmarks of the store and of the load generator
    lab.cli          the ``lab`` command (a thin layer over the above)

Shared by all: ``lab.errors`` (the one error tree), ``lab.constants`` (appendix B, read from
``appendix_b.toml``) and ``lab.project`` (where notebooks/, results/ and datasets/out/ are).
"""
