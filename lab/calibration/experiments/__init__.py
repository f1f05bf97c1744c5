"""Measurement logic behind the notebooks: one module per notebook, named after it (b_row, in_limit,
empty_buckets, twcs_sstables, space_amp, grouped_reads, cpu_cost, cpu_curve, knee, capacity, model_check; what each
measures: lab.calibration.registry), beside mixed_load (model_check's fixed-rate mixed load),
capacity_text (the capacity conclusion in words), rtt_sweep (a latency notebook's calls at other
round trips), range_density_rtt (grouped_reads' threshold at other round trips) and common (output folder, session, scratch
keyspaces). The notebooks only set parameters, call one ``run`` here, plot and print the conclusion.

More: docs/calibration-internals.md.
"""
