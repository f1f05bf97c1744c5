"""Calibration: the notebook suite that measures appendix B, and what it writes.

    run           ``lab calibrate``: environment, round trip, the notebook suite, calibration.json
    contract      calibration.json as frozen dataclasses (CalibrationRun, NotebookRun, RoundTrip, RunError)
    notebooks     run one notebook headless (papermill), typed parameters; ``lab jupyter``
    kernel        the project's Jupyter kernel (spec, install) and its one-line-error extension
    measures      which notebook value measures which constant; recommendation, confidence
    propose       the proposed appendix_b.toml change as a reviewable diff (tomlkit round trip)
    report        report.html (self-contained)
    capacity      the §7 formula and the sizing projection
    experiments/  the measurement behind each notebook, one module per notebook, named after it
"""
