"""The range-density threshold at other round trips, on a synthetic density sweep: IN lists that fit
in one concurrent wave leave it where it is; more waves than a range's one move it down."""
from __future__ import annotations

import pandas as pd
import pytest

from lab.calibration.experiments.grouped_reads import recommend_range_density
from lab.calibration.experiments.range_density_rtt import range_density_by_rtt, rtt_values, waits
from lab.store import DEFAULT_BATCH_CONCURRENCY


def _sweep(in_requests: int) -> pd.DataFrame:
    densities = [1.0, 0.75, 0.5, 0.3, 0.2, 0.1]
    # a range costs 1 ms plus 2 ms per unit of span (1 / density); the IN lists 6 ms whatever the density
    return pd.DataFrame({"density": densities, "range_server_us": [1000 + 2000 / d for d in densities],
                         "in_server_us": [6000.0] * len(densities), "in_requests": [in_requests] * len(densities),
                         "range_requests": [1] * len(densities)})


def test_waits_count_concurrent_waves():
    assert waits(1) == 1 and waits(DEFAULT_BATCH_CONCURRENCY) == 1 and waits(DEFAULT_BATCH_CONCURRENCY + 1) == 2
    assert waits(0) == 1


def test_one_wave_of_in_lists_leaves_the_threshold_where_it_is():
    r = range_density_by_rtt(_sweep(4), recommend_range_density, measured_rtt_us=0, target_rtt_us=1000)
    assert r.extra_round_trips == 0 and r.by_rtt == {0: 0.4, 1000: 0.4, 2000: 0.4} and r.at_target == 0.4
    assert "does not move" in r.describe() and "**0.4**" in r.describe()


def test_more_waves_than_a_range_move_the_threshold_down_as_the_round_trip_grows():
    r = range_density_by_rtt(_sweep(3 * DEFAULT_BATCH_CONCURRENCY), recommend_range_density, measured_rtt_us=0,
                             target_rtt_us=2000)
    assert r.in_round_trips == 3 and r.extra_round_trips == 2
    assert r.by_rtt[0] == pytest.approx(0.4)
    assert r.by_rtt[1000] == pytest.approx(round(2000 / (6000 + 2000 - 1000), 2))  # 2 extra ms for the IN lists
    assert r.by_rtt[2000] < r.by_rtt[1000] < r.by_rtt[0]
    values = rtt_values(r, 0.4)
    assert values["recommended_range_min_density"] == r.by_rtt[2000]
    assert values["recommended_range_min_density_at_measured_rtt"] == 0.4


def test_without_a_target_nothing_is_overridden_and_an_empty_sweep_gives_nothing():
    r = range_density_by_rtt(_sweep(4), recommend_range_density, measured_rtt_us=0, target_rtt_us=None)
    assert r.at_target is None and "recommended_range_min_density" not in rtt_values(r, 0.4)
    assert range_density_by_rtt(pd.DataFrame(), recommend_range_density, measured_rtt_us=0, target_rtt_us=None) is None
