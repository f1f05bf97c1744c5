"""Calibration: the notebook suite that measures appendix B, and what it writes.

Running the suite: calibrate (``lab calibrate``, Ctrl-C, ``--resume``), round_trip, registry (every
notebook's one entry), presets, contract (calibration.json), notebooks (papermill, ``lab jupyter``),
kernel, experiments/ (one module per notebook). From values to constants: recommendations, precision,
stability, rtt_model (a latency constant against the round trip), agreement, decisions, propose, report,
capacity_section, figures. The capacity model: capacity_model/.

More, and every module in one line: docs/calibration-internals.md. Comparing runs: lab.comparison.
"""
