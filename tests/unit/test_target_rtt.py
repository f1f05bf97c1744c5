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
