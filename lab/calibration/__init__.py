"""Calibration: the notebook suite that measures appendix B, and what it writes.

    calibrate     ``lab calibrate``: environment, round trip, the notebook suite, calibration.json; Ctrl-C, --resume
    round_trip    the lab's own write/read round trip, recorded once per run
    repeat_check  ``lab calibrate --repeat-check``: the suite twice and the two runs compared
    presets       the notebooks' quick / full parameters and what each costs in time
    contract      calibration.json as frozen dataclasses (CalibrationRun, NotebookRun, RoundTrip, RunError)
    notebooks     run one notebook headless (papermill), typed parameters; ``lab jupyter``
    kernel        the project's Jupyter kernel (spec, install) and its one-line-error extension
    nbimports     importing papermill / nbformat / nbconvert without jsonschema's optional IRI grammar (6-10 s)
    recommendations  which notebook value measures which constant; recommendation, confidence (and its legend)
    precision     precision targets stated in advance, sampling until reached or out of budget, halves
    row_model     b_row for any mix: overhead + a x payload + b x media_metadata + c x thumbnail bytes
    figures       every notebook figure, a tested function of result tables (the notebooks call them); log axes labelled as such
    agreement     do two runs agree on a constant (the rule of `lab compare`, the report, --repeat-check)
    propose       the proposed appendix_b.toml change as a reviewable diff (tomlkit round trip)
    decisions     one decision per constant: keep/change, precision, agreement, TB and nodes, caveats
    report        report.html (self-contained): decisions first, then the evidence
    capacity_section  the report's capacity section: nodes per tier, their inputs' sources, the model check
    disk_sizing   the §7 formula (disk): resident bytes, partitions, disk-bound nodes, the sizing projection
    cpu_sizing    the CPU side: cores and nodes from CPU per operation, beside the disk-bound count
    capacity_inputs  what the capacity notebook reads: the b_row run (found), your mix (priced), each input's confidence
    amplification lsm_space_amp's definitions: bytes on disk, live bytes, compressed time, steady state, peak
    predictions   the capacity model's predictions for a run it did not see, and how each is judged (model check)
    rundata       what a run folder holds (calibration, load, notebooks from JupyterLab) for ``lab compare``
    compare       ``lab compare``: two runs side by side (if comparable), constants' agreement, per-interval tests
    compare_page  what ``lab compare`` prints and writes (text, index.html, comparison.json)
    catalog       ``lab runs``: the runs of a results folder, and one constant across them
    experiments/  the measurement behind each notebook, one module per notebook, named after it
"""
