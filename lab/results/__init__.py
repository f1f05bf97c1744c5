"""Run outputs under ``results/<run-id>/``: folders, environment facts, comparison of two runs.

    runs      run folders (never overwritten), machine and git facts
    compare   ``lab compare``: two runs side by side, Mann-Whitney U on latency samples
"""
