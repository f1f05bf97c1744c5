"""The mixed load's windows (model check, CPU part): CPU net of the idle rate around each mixed
window, and a loader-bound window marked, named in the verdict and left out of the check."""
from __future__ import annotations

import pandas as pd
import pytest

from lab.calibration.experiments.mixed_load import IDLE, MixedLoad
from lab.load.thread_driver import loader_bound
from lab.load.verdict import Limits
from types import SimpleNamespace


def _window(seq: int, rnd: int, kind: str, cpu: float, *, wall: float = 2.0, ops: int = 0, pct: float | None = None,
            bound: bool = False) -> dict:
    return {"seq": seq, "round": rnd, "kind": kind, "wall_seconds": wall, "node": "n1", "cpu_seconds": cpu,
            "loadgen_cpu_seconds": 0.1, "ops": ops, "errors": 0, "rate_requested": 0.0 if kind == IDLE else 10.0,
            "rate_driven": ops / wall, "loadgen_cpu_percent_of_core": pct, "lag_ms": 0.0 if kind != IDLE else None,
            "loader_bound": bound}


def _load(bound_round: int | None) -> MixedLoad:
    rows = [_window(0, -1, IDLE, 0.2),                                     # idle 0.1 cores
            _window(1, 0, "mixed", 1.2, ops=20, pct=20.0, bound=bound_round == 0),
            _window(2, 0, IDLE, 0.6),                                      # idle 0.3 cores
            _window(3, 1, "mixed", 2.0, ops=20, pct=95.0 if bound_round == 1 else 20.0, bound=bound_round == 1),
            _window(4, 1, IDLE, 0.6)]
    return MixedLoad(windows=pd.DataFrame(rows), counts=[{"send": 20}, {"send": 20}], copies=1, requested_rate=10.0)


def test_net_cpu_is_the_window_minus_the_idle_rate_of_its_neighbours():
    r = _load(None).rounds().set_index("round")
    assert r.loc[0, "net_cpu_seconds"] == pytest.approx(1.2 - 0.2 * 2.0)   # idle mean (0.1 + 0.3) / 2
    assert r.loc[1, "net_cpu_seconds"] == pytest.approx(2.0 - 0.3 * 2.0)
    assert not r.loader_bound.any()
    assert _load(None).load()["verdict"] == "carried"


def test_a_loader_bound_window_is_named_and_the_verdict_says_so():
    load = _load(1)
    assert load.loader_bound_rounds() == [1]
    out = load.load()
    assert out["verdict"] == "loader-bound" and out["loader_bound_rounds"] == [1]
    assert out["loadgen_cpu_percent_of_core_max"] == 95.0
    assert out["limits"]["max_loader_cpu_percent_of_core"] == Limits().max_loader_cpu_percent_of_core
    assert load.rounds().set_index("round").loader_bound.to_dict() == {0: False, 1: True}


def test_the_window_judge_is_the_verdict_of_lab_load():
    # what run_mixed_load records per mixed window, judged by lab.load.verdict's rules
    busy = SimpleNamespace(rate_requested=10.0, rate_driven=10.0, loadgen_cpu_percent_of_core=95.0, lag_ms=0.0)
    calm = SimpleNamespace(rate_requested=10.0, rate_driven=10.0, loadgen_cpu_percent_of_core=20.0, lag_ms=0.0)
    assert loader_bound(busy) and not loader_bound(calm)
