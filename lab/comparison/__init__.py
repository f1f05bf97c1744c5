"""Comparing runs: what a run folder holds (rundata), two runs side by side (compare, compare_page:
``lab compare``, calibration and load runs alike), the runs of a results folder (catalog: ``lab runs``),
and the suite run twice (repeat_check: ``lab calibrate --repeat-check``).

More: docs/comparison-internals.md.
"""
