"""The model check's CPU diagnosis runs cpu_cost on the operations, rates and dataset the check's
mixed load ran, not at cpu_cost's defaults (no node: the parameters it builds)."""
from __future__ import annotations

from lab.calibration.experiments import cpu_cost, model_check
from lab.calibration.experiments.model_check import diagnosis_params

DATASET = {"group_backlog": 60, "dm_count": 3, "dm_backlog": 5, "history_conversations": 2, "history_rows": 120}


def test_diagnosis_runs_each_operation_at_its_rate_in_the_mix():
    rates = {"send": 4.0, "history_latest": 2.5, "react": 0.0, "batch_s1_group": 0.5}
    p = model_check.Params(cpu_rates=rates, cpu_dataset=DATASET, cpu_window_seconds=3.0, cpu_idle_seconds=1.5,
                           diagnose_rounds=3, seed=11)
    d = diagnosis_params(p, workers=24)
    assert d.operations == ("send", "history_latest", "batch_s1_group")   # an operation at 0/s did not run
    assert {op: d.rate(op) for op in d.operations} == {"send": 4.0, "history_latest": 2.5, "batch_s1_group": 0.5}
    assert all(d.rate(op) != cpu_cost.DEFAULT_RATES[op] for op in d.operations)
    assert {k: getattr(d, k) for k in DATASET} == DATASET          # the dataset the mix read, not cpu_cost's
    assert (d.window_seconds, d.idle_seconds, d.workers) == (3.0, 1.5, 24)
    assert (d.min_rounds, d.max_rounds) == (3, 3) and d.seed == 12


def test_diagnosis_at_the_default_mix():
    """Without cpu_rates, the check's own DEFAULT_CPU_RATES (4-12x below cpu_cost's) and cpu_cost's
    default dataset, which is also what the mixed load seeds then."""
    d = diagnosis_params(model_check.Params(), workers=8)
    assert {op: d.rate(op) for op in d.operations} == model_check.DEFAULT_CPU_RATES
    assert d.group_backlog == cpu_cost.Params().group_backlog
    for op, rate in model_check.DEFAULT_CPU_RATES.items():
        assert cpu_cost.DEFAULT_RATES[op] >= 4 * rate   # why cpu_cost's defaults diagnose other operations
