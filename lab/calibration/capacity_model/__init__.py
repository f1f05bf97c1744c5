"""The capacity model: bytes per row for any mix (row_model), disk and CPU sizing (disk_sizing, cpu_sizing),
space amplification's definitions (amplification), TWCS's window arithmetic (twcs_model), the CPU curve and
the nodes priced on it (curve_pricing), the nodes a latency target allows (knee_pricing),
compliance_hold in a table of its own as a what-if (hold_apart), the factor as the table ages (aging), what the capacity notebook reads (capacity_inputs), predictions for
a run it did not see and how they are judged (predictions, prediction_check). The experiments import it; it never imports an experiment.

More: docs/calibration-internals.md.
"""
