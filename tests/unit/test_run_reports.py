"""Run results are frozen dataclasses whose to_json() is what the result files hold (no node)."""
from __future__ import annotations

import dataclasses

import pytest

from lab.bench.load_generator_report import (CPU_RATIO_GOAL, LoadBenchParams, LoadBenchReport, OperationCosts, Staircase,
                                             ThroughputRun)
from lab.calibration.contract import CalibrationRun, NotebookRun, RoundTrip, RunError
from lab.calibration.recommendations import ConstantAssessment
from lab.load.loadgen_cpu import CpuWindow
from lab.load.operation_cpu import apportion
from lab.load.soak_report import OperationCounts, SoakAudit, SoakTotals
from lab.load.summary import StepSummary
from lab.load.verdict import LOADER_BOUND, Reason, Verdict
from lab.measure import summarize_samples
from lab.measure.hdr import LatencyRecorder, OperationSummary, summarize
from lab.results.jsonio import jsonable

LAT = summarize_samples([100, 200, 300, 4000])
LAT_MANY = summarize_samples(range(100, 2100))  # enough calls for a p99 (lab.measure.min_samples)


def test_results_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        LAT.p99 = 1  # type: ignore[misc]


def test_operation_summary_round_trips_through_json():
    rec = LatencyRecorder(fixed_rate=True)
    for i in range(100):
        rec.record("send", started_ns=0, ended_ns=(i + 1) * 10_000, due_ns=-5_000)
    op = summarize(rec.totals, elapsed_seconds=2.0, fixed_rate=True)["send"]
    assert op.count == 100 and op.rate_per_second == 50.0 and op.corrected_us.p99 >= op.service_us.p99
    assert OperationSummary.from_json(jsonable(op)) == op


def _audit(**kw) -> SoakAudit:
    base = dict(at_seconds=1.0, final=True, seconds=0.1, acked=10, replays=1, lost=0, hidden_by_head=0,
                duplicated=0, replay_mismatches=0, recalls=2, recalls_lost=0)
    return SoakAudit(**{**base, **kw})


def _totals(final: SoakAudit | None, **kw) -> SoakTotals:
    ops = {"send": OperationCounts(ok=10, errors=1, error_types={"Unavailable": 1, "retried Unavailable": 3})}
    base = dict(tenant_id="t", elapsed_seconds=5.0, operations=ops, final_audit=final,
                audits=(final,) if final else (), sends_failed=1, replayed_after_error=0, batch_missing=0,
                unexpected_errors=0, alerts={})
    return SoakTotals(**{**base, **kw})


def test_a_soak_is_ok_only_when_its_last_audit_is_clean():
    assert _totals(_audit()).ok
    assert not _totals(_audit(lost=1)).ok and not _totals(_audit(error="Timeout: x", acked=None)).ok
    assert not _totals(None).ok and not _totals(_audit(), batch_missing=1).ok
    t = _totals(_audit()).to_json()
    assert (t["operations_total"], t["errors_total"], t["acked"], t["audits_run"]) == (11, 1, 10, 1)
    assert _totals(_audit()).retried_errors == 3
    assert "error" not in _audit().to_json() and _audit(error="x").to_json()["error"] == "x"


def test_load_bench_report_says_its_ratios():
    def run(throughput: float, **kw) -> ThroughputRun:
        return ThroughputRun(calls=int(throughput * 10), errors=0, throughput=throughput, service_us=LAT, **kw)

    step = StepSummary(start_s=0, end_s=6, requested_rate=50.0, warmup=False, achieved_rate=49.5,
                       service_us=LAT_MANY, corrected_us=LAT_MANY,
                       loadgen_cpu=CpuWindow(samples=6, mean_percent_of_one_core=40.0))
    report = LoadBenchReport(run_id="r", params=LoadBenchParams(), keyspace="benchload_x", environment={},
                             plain_send=run(100.0), locust_send=run(80.0, load_dir="l1"),
                             locust_read=run(300.0, load_dir="l2"), plain_read=run(200.0),
                             staircase=Staircase(max_rate=100.0, load_dir="l3", audit_ok=True, steps=(step,)))
    assert (report.ratio_send, report.ratio_read) == (0.8, 1.5)
    data = jsonable(report)
    assert data["ratio_send"] == 0.8 and data["staircase"]["steps"][0]["loadgen_cpu"]["samples"] == 6
    assert "client_cpu_percent_of_one_core" in data["plain_send"] and "load_dir" in data["locust_send"]
    assert "ratio 0.8" in report.closing_note and "40% of one core" in report.closing_note
    assert " ms (service " in report.closing_note and " us" not in report.closing_note
    few = dataclasses.replace(report, staircase=dataclasses.replace(report.staircase, steps=(
        dataclasses.replace(step, service_us=LAT, corrected_us=LAT),)))
    assert "p99 too few (service too few)" in few.closing_note  # 4 calls: no p99
    assert report.cpu_ratios == {"send_max": None, "read_max": None, "send_fixed_rate": None,
                                 "read_fixed_rate": None}  # no CPU measured
    unsteady = dataclasses.replace(report, chat=OperationCosts(profile="chat", load_dir="l4",
                                                               run=run(10.0, load_dir="l4"), operations={}))
    assert "chat profile per operation: not measured" in unsteady.closing_note  # said, not left out


def test_a_loader_bound_staircase_step_says_so_and_why_the_staircase_ended():
    """bench/load's staircase printed a loader-bound step like a result and left the steps it did
    not run unsaid (a run of a6af1e2: two of four steps, the second at 75% loader CPU)."""
    def step(rate: float, verdict: Verdict | None) -> StepSummary:
        return StepSummary(start_s=0, end_s=6, requested_rate=rate, warmup=False, achieved_rate=rate * 0.97,
                           service_us=LAT_MANY, corrected_us=LAT_MANY,
                           loadgen_cpu=CpuWindow(samples=6, mean_percent_of_one_core=60.0), verdict=verdict)
    bound = Verdict(verdict=LOADER_BOUND, reasons=(Reason(check="loader_cpu", measured=75.0, limit=70.0,
                                                          unit="% of one core", text="worker-0 used 75% of its core"),))
    stair = Staircase(max_rate=200.0, load_dir="l", audit_ok=True, stopped_at_step=2,
                      steps=(step(100.0, Verdict(verdict="valid")), step(150.0, bound)))
    first, second, end = stair.lines
    assert first.endswith("valid") and "LOADER-BOUND" not in first
    assert "LOADER-BOUND, not a result: worker-0 used 75% of its core" in second
    assert "stopped at step 2 of 4" in end and "2 step(s) above it" in end
    assert jsonable(stair)["stopped_at_step"] == 2 and jsonable(stair)["planned_steps"] == 4
    whole = Staircase(max_rate=200.0, load_dir="l", audit_ok=True, steps=(step(100.0, None),) * 4)
    assert len(whole.lines) == 4 and whole.lines[0].endswith("not judged")


def test_load_bench_report_puts_the_cpu_per_call_side_by_side():
    """CPU per call = the client's CPU over the measured window / its calls; the ratio is Locust's
    over the plain pool's, for the maxima and the fixed-rate pair."""
    def plain(calls: int, cpu_percent: float, **kw) -> ThroughputRun:
        return ThroughputRun(calls=calls, errors=0, throughput=calls / 10, service_us=LAT, measured_seconds=10.0,
                             client_cpu_percent_of_one_core=cpu_percent, **kw)

    def locust(calls: int, cpu_percent: float, **kw) -> ThroughputRun:
        return ThroughputRun(calls=calls, errors=0, throughput=calls / 10, service_us=LAT, measured_seconds=10.0,
                             loadgen_cpu=CpuWindow(samples=10, mean_percent_of_one_core=cpu_percent), load_dir="l", **kw)
    report = LoadBenchReport(run_id="r", params=LoadBenchParams(), keyspace="k", environment={},
                             plain_send=plain(1000, 40.0), locust_send=locust(1000, 50.0),
                             locust_read=locust(2000, 30.0), plain_read=plain(2000, 30.0),
                             staircase=Staircase(max_rate=100.0, load_dir="l3", audit_ok=True, steps=()),
                             plain_send_fixed=plain(500, 30.0, requested_rate=50.0),
                             locust_send_fixed=locust(500, 33.0, requested_rate=50.0),
                             plain_read_fixed=plain(1000, 10.0, requested_rate=100.0),
                             locust_read_fixed=locust(1000, 10.5, requested_rate=100.0))
    assert report.plain_send.cpu_ms_per_call == 4.0 and report.locust_send.cpu_ms_per_call == 5.0
    assert report.plain_send.calls_per_core_second == 250.0
    assert report.cpu_ratios == {"send_max": 1.25, "read_max": 1.0, "send_fixed_rate": 1.1, "read_fixed_rate": 1.05}
    data = jsonable(report)
    assert data["cpu_per_call_ratios"]["send_fixed_rate"] == 1.1 and data["cpu_ratio_goal"] == CPU_RATIO_GOAL == 1.1
    assert data["locust_send_fixed"]["requested_rate"] == 50.0 and data["plain_read_fixed"]["requested_rate"] == 100.0
    note = report.closing_note
    assert "CPU per call 5 ms vs 4 ms -> 1.25" in note and "send at a fixed 50/s" in note
    assert "read at a fixed 100/s: Locust 100/s vs plain 100/s; CPU per call 1.05 ms vs 1 ms -> 1.05" in note


def test_the_chat_table_says_when_a_future_leaves_the_loader_cpu_per_operation_not_measured():
    """With an operation on the store's futures among several, no operation's loader CPU per call is
    apportioned (lab.load.operation_cpu): the table shows each caller CPU and path, and says why."""
    run = ThroughputRun(calls=100, errors=0, throughput=10.0, service_us=LAT, measured_seconds=10.0,
                        loadgen_cpu=CpuWindow(samples=10, mean_percent_of_one_core=2.0), load_dir="l")
    ops = apportion({"send": 60, "history_latest": 40}, {"send": 0.06, "history_latest": 0.004}, 0.2,
                    {"send": "thread", "history_latest": "future"})
    report = LoadBenchReport(run_id="r", params=LoadBenchParams(), keyspace="k", environment={},
                             plain_send=run, locust_send=run, locust_read=run, plain_read=run,
                             staircase=Staircase(max_rate=1.0, load_dir="l3", audit_ok=True, steps=()),
                             chat=OperationCosts(profile="chat", load_dir="l4", run=run, operations=ops))
    note = report.closing_note
    assert "chat profile under Locust: 2 ms of loader CPU per call over all its calls" in note
    assert "history_latest     not measured  (40 calls, future; caller 0.1 ms)" in note
    assert "not measured per operation: a future's steps run on the driver's loop thread" in note
    assert "--driver futures" in note  # the header names the Locust side's driver


def test_calibration_run_round_trips_and_names_what_it_measured():
    c = dict(unit="B", confidence="low", evidence="e", figure=None, notebook="b_row", ci_low=None, ci_high=None,
             section="§7", doc="d", guarded=False)
    run = CalibrationRun(
        run_id="r", mode="quick", status="failed", started_at="t",
        error=RunError(notebook="in_limit", cell=3, ename="E", evalue="v"),
        round_trip=RoundTrip(n=2, write_p50_us=1, write_p99_us=2, read_p50_us=1, read_p99_us=2, seconds=0.1),
        notebooks={"b_row": NotebookRun(status="ok", parameters={"rows": 1}, seconds=1.0, figures=("b_row/a.png",)),
                   "in_limit": NotebookRun(status="pending", parameters={})},
        constants={"b_row_bytes": ConstantAssessment(current=600, measured=412, recommended=412, changed=True, **c),
                   "lsm_space_amp": ConstantAssessment(current=1.2, measured=None, recommended=1.2, changed=False,
                                                       **c)})
    assert run.measured() == ["b_row_bytes"] and run.changed() == ["b_row_bytes"]
    assert run.error.where() == "in notebook in_limit, cell 3"
    assert RunError(notebook=None, cell=None, ename="ConnectError", evalue="v").where() == \
        "before the first notebook (environment and round trip)"
    data = jsonable(run)
    assert data["notebooks"]["in_limit"] == {"status": "pending", "parameters": {}}
    assert CalibrationRun.from_json(data).to_json() == run.to_json()


def test_a_run_that_failed_before_its_notebooks_says_so_in_the_report(tmp_path):
    from lab.calibration.report import render

    html = render({"run_id": "r", "status": "failed", "error": {"notebook": None, "cell": None,
                                                                 "ename": "RequestTimeout", "evalue": "slow"}}, tmp_path)
    assert "Run failed</b> before the first notebook (environment and round trip): <b>RequestTimeout</b>: slow" in html
    assert "notebook <b></b>" not in html and "cell :" not in html
    html = render({"run_id": "r", "status": "failed", "error": {"notebook": "b_row", "cell": 4, "ename": "E",
                                                                 "evalue": "v"}}, tmp_path)
    assert "Run failed</b> in notebook <b>b_row</b>, cell 4: <b>E</b>: v" in html


def test_cpu_per_call_at_unequal_rates_is_shown_but_not_judged_against_the_goal():
    """A client's CPU per call falls as its rate rises (the run of 55ff8db: the plain client's own
    4.5 ms per send at 155/s, 8.54 ms at 56.5/s), so Locust at 113/s vs plain at 155/s (1.318) is not
    the load generator's overhead; the goal is judged on the pairs that ran at the same rate."""
    def side(rate: float, cpu_ms: float, locust: bool, **kw) -> ThroughputRun:
        pct = cpu_ms * rate / 10  # % of one core
        extra = (dict(loadgen_cpu=CpuWindow(samples=10, mean_percent_of_one_core=pct), load_dir="l") if locust
                 else dict(client_cpu_percent_of_one_core=pct))
        return ThroughputRun(calls=int(rate * 10), errors=0, throughput=rate, service_us=LAT, measured_seconds=10.0,
                             **extra, **kw)
    report = LoadBenchReport(run_id="r", params=LoadBenchParams(), keyspace="k", environment={},
                             plain_send=side(155.0, 4.5, False), locust_send=side(113.0, 5.93, True),
                             locust_read=side(216.0, 3.8, True), plain_read=side(201.0, 3.93, False),
                             staircase=Staircase(max_rate=155.0, load_dir="l3", audit_ok=True, steps=()),
                             plain_send_fixed=side(56.5, 8.54, False, requested_rate=56.5),
                             locust_send_fixed=side(56.9, 7.75, True, requested_rate=56.5))
    assert report.same_rate == {"send_max": False, "read_max": True, "send_fixed_rate": True, "read_fixed_rate": None}
    goal = report.cpu_goal
    assert set(goal["judged_on"]) == {"read_max", "send_fixed_rate"} and goal["met"] is True
    note = report.closing_note
    assert "-> 1.318 (not like for like: Locust ran at 0.73x the plain client's rate" in note
    assert "the plain client's own 4.5 ms at 155/s vs 8.54 ms at 56.5/s" in note
    assert "judged on the pairs run at the same rate (within 10%): read_max 0.967, send_fixed_rate 0.907 -> met" in note
    data = jsonable(report)
    assert data["cpu_per_call_same_rate"]["send_max"] is False and data["cpu_goal"]["met"] is True
    worse = dataclasses.replace(report, locust_send_fixed=side(56.9, 11.0, True, requested_rate=56.5))
    assert worse.cpu_goal["met"] is False and "-> NOT met" in worse.closing_note  # a like-for-like miss is a miss
    apart = dataclasses.replace(report, locust_read=side(100.0, 3.8, True), locust_send_fixed=None,
                                plain_send_fixed=None)
    assert apart.cpu_goal["met"] is None and "not judged: no pair ran at the same rate" in apart.closing_note
