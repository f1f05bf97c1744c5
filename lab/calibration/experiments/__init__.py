"""Measurement logic behind the notebooks: one module per notebook; the notebooks under
``notebooks/`` only set parameters, call one ``run`` here, plot and print the conclusion.

    notebook                 module          measures
    b_row.ipynb              b_row           bytes per row on disk per table, with/without compression
    in_limit.ipynb           in_limit        IN-list latency 1..several hundred, server limit, recommendation
    empty_buckets.ipynb      empty_buckets   history pages over runs of empty buckets vs the scan limit
    twcs_sstables.ipynb      twcs_sstables   SSTable counts over simulated weeks for two windows per table
    space_amp.ipynb          space_amp       bytes on disk against live bytes over a simulated period: lsm_space_amp
    grouped_reads.ipynb      grouped_reads   grouped vs naive batch reads (S-1 shapes and mixes)
    cpu_cost.ipynb           cpu_cost        server and load-generator CPU per operation at fixed rates
    capacity.ipynb           capacity        §7 capacity with the measured b_row, production sizing, CPU vs disk
    model_check.ipynb        model_check     the capacity model's predictions against a run it did not see

Beside them: ``mixed_load`` (model_check's fixed-rate mixed load), ``model_check_text`` (its
conclusion in words), ``common`` (output folder, session, scratch keyspaces, bulk loading).

More: docs/calibration-internals.md.
"""

NOTEBOOK_MODULES = {
    "b_row": "lab.calibration.experiments.b_row",
    "in_limit": "lab.calibration.experiments.in_limit",
    "empty_buckets": "lab.calibration.experiments.empty_buckets",
    "twcs_sstables": "lab.calibration.experiments.twcs_sstables",
    "space_amp": "lab.calibration.experiments.space_amp",
    "grouped_reads": "lab.calibration.experiments.grouped_reads",
    "cpu_cost": "lab.calibration.experiments.cpu_cost",
    "capacity": "lab.calibration.experiments.capacity",
    "model_check": "lab.calibration.experiments.model_check",
}
