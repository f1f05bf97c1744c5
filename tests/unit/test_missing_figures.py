"""A figure that is missing says why, never ``nan`` (conclusions and pages)."""
from __future__ import annotations

import math

from lab.calibration.experiments import grouped_reads


def test_a_p50_that_could_not_be_measured_says_why():
    assert grouped_reads._p50(math.nan).startswith("not measured (too few timed reads kept")
    assert grouped_reads._p50(None).startswith("not measured")
    assert grouped_reads._p50(4.25) == "4.2 ms"
    assert not grouped_reads._measured(math.nan) and grouped_reads._measured(0.5)
