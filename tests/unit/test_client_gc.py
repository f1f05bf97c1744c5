"""The lab processes' ``client_gc`` setting (lab.measure.client_gc): read like every services
setting, carried to the Locust workers, applied, and named where runs record their environment.
No timing asserted: what it saves is measured by the benchmarks."""
from __future__ import annotations

import gc

import pytest

from lab.bench.load_generator_report import LoadBenchParams, LoadBenchReport, Staircase, ThroughputRun
from lab.cli.load_text import services_line
from lab.cluster.config import ClusterConfig
from lab.cluster.services import ServicesConfig, load_services
from lab.errors import ConfigError
from lab.load.plan import LoadPlan
from lab.load.processes import child_env
from lab.measure import client_gc, summarize_samples


def test_read_like_the_other_services_settings(tmp_path):
    toml = tmp_path / "lab.toml"
    toml.write_text('[services]\nclient_gc = "default"\n')
    assert load_services().client_gc == client_gc.DEFAULT_CLIENT_GC == "freeze"
    assert load_services(toml_path=toml).client_gc == "default"
    assert load_services(toml_path=toml, env={"LAB_CLIENT_GC": "FREEZE"}).client_gc == "freeze"
    assert load_services(env={"LAB_CLIENT_GC": "freeze"}, flags={"client_gc": "default"}).client_gc == "default"
    with pytest.raises(ConfigError, match="LAB_CLIENT_GC"):
        load_services(env={"LAB_CLIENT_GC": "off"})
    with pytest.raises(ConfigError):
        client_gc.settle("off")


def test_recorded_in_the_environment_and_carried_to_the_load_workers(tmp_path):
    services = ServicesConfig(client_gc="default")
    assert services.describe_run()["client_gc"] == "default" and "client_gc" not in services.describe_store()
    plan = LoadPlan(run_id="r", load_dir=tmp_path, state_root=tmp_path, profile="chat", users=2, workers=2)
    assert child_env(ClusterConfig(), plan, 0, role="worker", services=services)["LAB_CLIENT_GC"] == "default"

    class Summary:
        services = ServicesConfig().describe_run()
    assert "client GC freeze" in services_line(Summary())
    run = ThroughputRun(calls=10, errors=0, throughput=1.0, service_us=summarize_samples([100, 200]))
    report = LoadBenchReport(run_id="r", params=LoadBenchParams(), keyspace="k",
                             environment={"services": ServicesConfig().describe_run()}, plain_send=run,
                             locust_send=run, locust_read=run, plain_read=run,
                             staircase=Staircase(max_rate=1.0, load_dir="l", audit_ok=True, steps=()))
    assert "client GC freeze" in report.closing_note


PYTHON_THRESHOLDS = (700, 10, 10)  # CPython's defaults


def test_freeze_moves_set_up_into_the_permanent_generation_and_default_leaves_it():
    thresholds = gc.get_threshold()
    # the whole suite is one process: start from Python's own collector whatever ran before
    gc.unfreeze()
    gc.set_threshold(*PYTHON_THRESHOLDS)
    try:
        client_gc.settle("default")
        assert gc.get_freeze_count() == 0 and gc.get_threshold() == PYTHON_THRESHOLDS
        keep = [[i] for i in range(100)]  # set-up's objects
        client_gc.settle("freeze")
        assert gc.get_freeze_count() >= len(keep) and gc.get_threshold() == client_gc.FREEZE_THRESHOLDS
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


def test_a_run_leaves_the_callers_collector_as_it_was():
    """run_bench & co. settle the process they run in; called from a notebook's kernel or a test
    session they left it frozen with the bench's thresholds for good (the suite's test_client_gc
    failed after tests/node/test_bench.py). Inside ``restored`` the caller gets its collector back,
    on return and on an error."""
    thresholds = gc.get_threshold()
    gc.unfreeze()
    gc.set_threshold(*PYTHON_THRESHOLDS)
    try:
        keep = [[i] for i in range(100)]
        with client_gc.restored():
            client_gc.settle("freeze")
            assert gc.get_freeze_count() >= len(keep)
        assert gc.get_freeze_count() == 0 and gc.get_threshold() == PYTHON_THRESHOLDS
        with pytest.raises(RuntimeError), client_gc.restored():
            client_gc.settle("freeze")
            raise RuntimeError("a run that fails")
        assert gc.get_freeze_count() == 0 and gc.get_threshold() == PYTHON_THRESHOLDS
        gc.freeze()  # what a caller froze itself stays frozen (Python cannot unfreeze part of it)
        frozen = gc.get_freeze_count()
        with client_gc.restored():
            client_gc.settle("freeze")
        assert gc.get_freeze_count() >= frozen and gc.get_threshold() == PYTHON_THRESHOLDS
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
