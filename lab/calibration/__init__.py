"""Calibration: the notebook suite that measures appendix B, and what it writes.

Running the suite: calibrate (``lab calibrate``, Ctrl-C), resume (``--resume``), round_trip,
repeat_check, presets (quick / full, what each costs), contract (calibration.json), notebooks
(papermill, ``lab jupyter``), kernel, nbimports, experiments/ (one module per notebook).
From values to constants: recommendations, precision, agreement, decisions, propose, report, figures.
The capacity model: row_model, disk_sizing, cpu_sizing, capacity_inputs, capacity_section,
amplification, predictions.
Comparing runs: rundata, compare, compare_page, catalog (``lab runs``).

More, and every module in one line: docs/calibration-internals.md.
"""
