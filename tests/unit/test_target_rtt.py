"""`lab calibrate --target-rtt`: the round trip reaches the latency notebooks' parameters, and a
round trip that is not one is refused in one line before anything runs."""
from __future__ import annotations

import dataclasses
import importlib

import click
import pytest
from click.testing import CliRunner

from lab.calibration.experiments.rtt_sweep import DEFAULT_SWEEP_RTTS_US, sweep_rtts
from lab.calibration.registry import SUITE, TARGET_RTT_NOTEBOOKS
from lab.cli import main
from lab.cli.calibration_commands import _target_rtt_overrides


def test_the_target_reaches_every_selected_round_trip_notebook_in_microseconds():
    overrides: dict = {"in_limit": {"min_rounds": 3}}
    _target_rtt_overrides("0.3ms", None, overrides)
    assert overrides == {"in_limit": {"min_rounds": 3, "target_rtt_us": 300}, "empty_buckets": {"target_rtt_us": 300},
                         "grouped_reads": {"target_rtt_us": 300}}
    only: dict = {}
    _target_rtt_overrides("1ms", ("in_limit", "b_row"), only)
    assert only == {"in_limit": {"target_rtt_us": 1000}}


def test_a_round_trip_that_is_not_one_is_a_bad_parameter():
    with pytest.raises(click.BadParameter, match="not a round trip"):
        _target_rtt_overrides("fast", None, {})
    out = CliRunner().invoke(main, ["calibrate", "--target-rtt", "-1ms", "--no-preflight"])
    assert out.exit_code == 2 and "--target-rtt" in out.output and "Traceback" not in out.output


def test_every_round_trip_notebook_takes_a_target_and_a_sweeping_ones_quick_preset_sweeps_only_for_it():
    specs = {s.name: s for s in SUITE}
    for name in TARGET_RTT_NOTEBOOKS:
        fields = {f.name for f in dataclasses.fields(importlib.import_module(specs[name].module).Params)}
        assert "target_rtt_us" in fields, name
        if "rtts_us" in fields:  # measured through the proxy (grouped_reads prices round trips it counts)
            assert "rtt_rounds" in fields and specs[name].quick["rtts_us"] == [], name


def test_the_sweep_never_remeasures_the_main_round_trip_and_a_target_alone_sweeps_the_default():
    assert sweep_rtts(0, (), None) == ()
    assert sweep_rtts(0, (), 1000) == DEFAULT_SWEEP_RTTS_US
    assert sweep_rtts(1000, (2000, 1000, 2000), None) == (2000,)


def test_a_sweep_with_one_size_gives_no_model_and_the_conclusion_says_why():
    from lab.calibration.experiments.rtt_sweep import fit_sweep, no_model_text
    from lab.calibration.rtt_model import RttPoint

    main = [RttPoint(rtt_us=0, x=0, latency_ms=2.0)]
    swept = [{"rtt_us": 1000, "x": 0.0, "latency_ms": 5.0}]
    assert fit_sweep(main, swept, measured_rtt_us=0, target_rtt_us=1000) is None
    assert no_model_text(None, "two sizes") is None
    assert "no model for the target of 1 ms" in no_model_text(1000, "two sizes")


def test_a_model_that_moves_a_size_below_zero_gives_no_choice_at_that_round_trip():
    import pandas as pd

    from lab.calibration.experiments.in_limit import at_rtt
    from lab.calibration.rtt_model import RttModel

    per_size = pd.DataFrame({"in_size": [1, 10, 100], "mean_ms": [1.0, 1.5, 3.0], "p99_ms": [2.0, 3.0, 5.0],
                             "per_row_us": [1000.0, 150.0, 30.0], "ok": [True, True, True]})
    rule = dict(measured_rtt_us=0, p99_budget_ms=50.0, server_limit=None, tolerance=0.1)
    sane = RttModel(round_trips=1.0, round_trips_per_x=0.0, base_ms=0.5, per_x_ms=0.02, rtts_us=(2000, 4000), points=6)
    assert at_rtt(per_size, sane, rtt_us=1000, **rule) == 100
    noise = RttModel(round_trips=-2.0, round_trips_per_x=0.0, base_ms=9.0, per_x_ms=0.0, rtts_us=(2000, 4000), points=6)
    assert at_rtt(per_size, noise, rtt_us=1000, **rule) is None  # 1 ms - 2 ms: a size in no time at all
