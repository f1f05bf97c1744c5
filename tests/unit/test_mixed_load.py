"""The mixed load's windows (model check, CPU part): CPU net of the idle rate around each mixed
window, and a loader-bound window marked, named in the verdict and left out of the check."""
from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from lab.calibration.experiments.mixed_load import IDLE, MixedLoad
from lab.errors import ValidationError
from lab.load.thread_driver import loader_bound
from lab.load.verdict import Limits


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


def test_the_worker_pool_is_sized_from_rate_times_latency():
    from lab.calibration.experiments.mixed_load import MAX_WORKERS, MIN_WORKERS, workers_for

    # model_check's default mix (53.5 ops/s) on a slow 3-node cluster (p99 300 ms): 33 threads, not 8
    assert workers_for(53.5, 0.300) == 33
    assert workers_for(53.5, 0.020) == MIN_WORKERS == 8      # a fast node: the former fixed pool
    assert workers_for(1000.0, 1.0) == MAX_WORKERS == 64
    assert workers_for(53.5, None) == MIN_WORKERS            # the warmup measured nothing
    with pytest.raises(ValidationError):
        workers_for(-1.0, 0.1)


def test_the_pool_is_a_parameter_of_the_model_check_sized_by_default():
    import inspect

    from lab.calibration.experiments import model_check
    from lab.calibration.experiments.mixed_load import run_mixed_load

    assert inspect.signature(run_mixed_load).parameters["workers"].default is None
    assert model_check.Params().cpu_workers is None and model_check.Params(cpu_workers=32).cpu_workers == 32
    with pytest.raises(ValidationError):  # refused before anything is seeded (no testbed touched)
        run_mixed_load(None, constants=None, rates={"send": 1.0}, rounds=1, window_seconds=1.0, idle_seconds=1.0,
                       workers=0)
    load = MixedLoad(windows=_load(None).windows, counts=[{"send": 20}] * 2, copies=1, requested_rate=10.0,
                     workers=33, workers_rule="sized")
    assert load.load()["workers"] == 33 and load.load()["workers_rule"] == "sized"


def test_the_conclusion_says_the_pool_and_the_loader_bound_windows_left_out():
    from lab.calibration.capacity_model.prediction_check import Check
    from lab.calibration.capacity_model.predictions import Inputs
    from lab.calibration.experiments import model_check

    inputs = Inputs(source="run-x", rows_per_repeat=None, row_model=None, fitted_mixes=(), per_row_bytes={},
                    head_bytes_per_conversation=None, head_sstable_bytes=None, cpu_costs=None)
    checks = tuple(Check(quantity="cpu", scope=s, table=None, predicted=p, measured=m, unit="CPU s")
                   for s, p, m in (("127.0.0.51", 3.0, 3.1), ("127.0.0.52", 3.0, 2.0), ("cluster", 6.0, 5.1)))
    load = {"requested_rate": 53.5, "achieved_rate": 50.0, "verdict": "loader-bound", "loader_bound_rounds": [3],
            "workers": 33, "workers_rule": "sized: ceil(2 x 53.5/s x the warmup's p99 300.0 ms over 40 calls), within 8-64"}
    result = model_check.Result(params=model_check.Params(parts=("cpu",), cpu_rounds=5), inputs=inputs, checks=checks,
                                nodes=2, replication_factor=2, server="cassandra", load=load)
    text = model_check.conclusion(result)
    assert "33 worker threads (sized: ceil(2 x 53.5/s x the warmup's p99 300.0 ms over 40 calls), within 8-64)" in text
    assert "4 of 5 windows (1 loader-bound" in text and "left out" in text
    # the cluster met (+17.6%, target ±20%); one node missed, named under it
    assert text.split("\n\n")[-1] == "Targets: CPU: met (+17.6%, target ±20%); per node: 127.0.0.52 missed (+50.0%)."
