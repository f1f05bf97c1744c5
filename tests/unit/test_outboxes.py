"""The hot window's scaling ratio in `lab bench store --outboxes`: a cost under
concurrency over one caller's only when both differences are measurable; a negative difference
(the two methods within the run's noise) is said as such, never printed as a negative ratio."""
from __future__ import annotations

from lab.bench.store_paths.outboxes import _cost_ratio, _times


def test_both_costs_positive_give_the_ratio():
    assert _cost_ratio(4288, 1768) == 2.425
    assert _times(2.425) == "2.425x"


def test_a_cost_at_or_below_zero_is_not_measurable():
    assert _cost_ratio(-4928, 2296) is None  # the measured 8-caller difference was noise
    assert _cost_ratio(1500, -10) is None
    assert _cost_ratio(1500, 0) is None
    assert _times(None).startswith("not measurable")

