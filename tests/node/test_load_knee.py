"""`lab load --slo` on the real node: the search finds a target the node meets, reports one it
cannot, and never takes a loader-bound step as the answer.

Deterministic, never timing luck: "meets" is a 5 s p99 at 10-20 calls/s with 40 users (each user
due a call every 2-4 s); "cannot" is a 0.1 ms p99, under any send's round trips; "loader-bound"
is forced by a loader CPU limit no Python process stays under (``--max-loader-cpu 1``). The
machine check is off where it is not what is tested (``--max-machine-cpu 100``): other work on
the machine must not turn a step machine-bound."""
from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import pandas as pd

from lab.calibration.notebooks import run_notebook
from lab.load.knee_search import BOUND, MEETS, MISSES, NOT_MET, NOT_REACHED
from lab.results.jsonio import read_json
from lab.results.scratch import scratch_keyspace

ROOT = Path(__file__).resolve().parents[2]
# a 1 s warmup: the loader's CPU and the schedule's lag are at their steady level from the first interval
# 15 calls a step: at 10 calls/s and 40 users (one slot each per 4 s) 30 are due in a 3 s window, each user's
# slot in it or not, so fewer than 15 is a chance far under 1e-4 (40 as the minimum failed ~0.7% of runs)
COMMON = ["load", "--profile", "send_only", "--slo-start", "10", "--users", "40", "--slo-min-calls", "15",
          "--step", "3s", "--warmup", "1s", "--processes", "1", "--seed-size", "tiny"]


@pytest.fixture(scope="module")
def keyspace(connection):
    with scratch_keyspace(connection, "loadknee", create=False) as ks:
        yield ks


# The CLI's three searches, run side by side, each in a keyspace of its own (as test_load_honest's loads):
# each outcome is forced by its target or limit, not by the machine: 40 users at 10-20 calls/s use a few %
# of a core, far under the 70 % loader limit, beside the other two; the machine check is off where it is
# not what is tested. Side by side, the three take about the longest one's time, not their sum.
SEARCHES = {
    "meets": ["--slo", "p99<=5s", "--slo-steps", "2", "--max-machine-cpu", "100"],
    "not_met": ["--slo", "p99<=100us", "--max-machine-cpu", "100", "--slo-start", "40"],
    "bound": ["--slo", "p99<=5s", "--max-loader-cpu", "1", "--no-audit", "--slo-start", "40"],
}


class _Load:
    """One `lab load` started in the background, its output in files in ``folder`` (no pipe fills)."""

    def __init__(self, args: list[str], *, keyspace: str, folder: Path) -> None:
        self.results, self.out, self.err = folder / "results", folder / "stdout.txt", folder / "stderr.txt"
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "lab.cli", *args, "--results", str(self.results)],
                                         cwd=ROOT, stdout=out, stderr=err, text=True,
                                         env={**os.environ, "LAB_KEYSPACE": keyspace, "PYTHONUNBUFFERED": "1"})

    def wait(self, timeout: float = 300) -> None:
        try:
            self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()

    def done(self, lab_home: Path) -> tuple[subprocess.CompletedProcess, Path]:
        """The finished process and its run folder, whose load state (the workers' DEKs) is deleted."""
        proc = subprocess.CompletedProcess(self.proc.args, self.proc.returncode, self.out.read_text(),
                                           self.err.read_text())
        (run,) = [p for p in self.results.iterdir() if p.is_dir()]
        shutil.rmtree(lab_home / "load-state" / run.name, ignore_errors=True)
        return proc, run


# The knee notebook's parameters (test_the_knee_notebook_...): every step 3 s after a 1 s warmup (the
# loader's CPU is ~4 % of a core from the first interval). 15 calls a step keeps step 1 at 3 s (40 made it
# 5 s): at 10.5 calls/s, 31.5 are due in its window, and with 35 users, each with a slot at either edge of
# the window in or out at random, fewer than 15 come with chance <= 1e-5 wherever the edges fall (the 70
# draws' exact sum). html=False: nothing here reads the HTML export (test_notebooks and test_calibrate do).
KNEE_NOTEBOOK = {"slo_limit_ms": 5000.0, "start_sends_per_second": 3.0, "max_steps": 2, "min_calls": 15,
                 "step_seconds": 3.0, "warmup_seconds": 1.0, "seed_size": "tiny", "processes": 1,
                 "max_machine_cpu_percent": 100.0, "show_progress": False, "searches": 2, "idle_wait_seconds": 2.0}


@pytest.fixture(scope="module")
def side_by_side(cluster_config, connection, keyspace, tmp_path_factory) -> dict:
    """Every load of this module, each in a keyspace of its own (concurrent CREATE TABLEs of one
    keyspace race): SEARCHES at once, then the README walkthrough's loads one after the other, all
    in the background while the knee notebook and then the capacity notebook run here. Each
    search's outcome and each notebook step's is forced by its target or limit with the machine
    check off, never by the machine (40 users at 10-20 calls/s use a few % of a core, far under the
    70 % loader limit), and the walkthrough's runs may end met or not: beside each other they take
    about the notebooks' time, not the sum. Each result is kept, a failure as its exception, for
    its own test to read."""
    from concurrent.futures import ThreadPoolExecutor

    lab_home = Path(cluster_config.lab_home)

    def searches() -> dict[str, tuple[subprocess.CompletedProcess, dict]]:
        started: dict[str, _Load] = {}
        with contextlib.ExitStack() as keyspaces:
            try:
                for name, args in SEARCHES.items():
                    ks = keyspaces.enter_context(scratch_keyspace(connection, "loadknee", create=False))
                    started[name] = _Load([*COMMON, *args], keyspace=ks, folder=tmp_path_factory.mktemp(name))
            finally:
                for load in started.values():
                    load.wait()
        out = {}
        for name, load in started.items():
            proc, run = load.done(lab_home)
            out[name] = proc, read_json(run / "knee.json")
        return out

    def background() -> dict:
        out = {"searches": _kept(searches)}
        out["walkthrough"] = _kept(lambda: _walkthrough(keyspace, tmp_path_factory.mktemp("walkthrough"), lab_home))
        return out

    folder = tmp_path_factory.mktemp("knee_notebook")
    with ThreadPoolExecutor(1) as pool:
        loads = pool.submit(background)
        notebooks = _kept(lambda: _knee_notebooks(cluster_config, folder))
        out = loads.result()
    return {**out, "notebooks": notebooks, "notebook_folder": folder}


def _kept(work):
    """``work()``, or the exception it raised (its own test raises it)."""
    try:
        return work()
    except Exception as exc:  # noqa: BLE001 (each test reads its own part of the side-by-side runs)
        return exc


def _result(side_by_side: dict, name: str):
    value = side_by_side[name]
    if isinstance(value, Exception):
        raise value
    return value


@pytest.fixture(scope="module")
def searches(side_by_side) -> dict[str, tuple[subprocess.CompletedProcess, dict]]:
    """SEARCHES, each in a keyspace of its own: name -> the finished process and its knee.json."""
    return _result(side_by_side, "searches")


def test_the_search_finds_a_target_the_node_meets(searches):
    proc, knee = searches["meets"]
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert [s["requested_rate"] for s in knee["steps"]] == [10.0, 20.0]          # the ramp doubles
    assert [s["outcome"] for s in knee["steps"]] == [MEETS, MEETS] and knee["status"] == NOT_REACHED
    assert all(s["calls"] >= 15 and s["verdict"] == "valid" for s in knee["steps"])
    best = knee["knee"]
    assert best["step"] == 2 and best["sends_per_second"] > 0 and best["latency_ms"] <= 5000
    assert best["node_cores"] is not None and best["node_cores"] > 0             # the node's own CPU, measured
    assert knee["audit"]["ok"] and knee["audit"]["acked"] > 0 and knee["audit"]["lost"] == 0
    assert "capacity: " in proc.stdout and "sends/s" in proc.stdout and "lower bound" in proc.stdout
    assert knee["rtt_us"] == 0 and "round trip: direct" in proc.stdout
    assert (Path(knee["steps"][0]["load_dir"]).parent / "knee.png").stat().st_size > 1000


def test_a_target_the_node_cannot_meet_is_reported_not_met(searches):
    proc, knee = searches["not_met"]
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert [s["outcome"] for s in knee["steps"]] == [MISSES] and knee["status"] == NOT_MET
    assert knee["knee"] is None and "no rate met p99 <= 0.1 ms" in proc.stdout


def test_a_loader_bound_step_is_never_the_answer(searches):
    proc, knee = searches["bound"]
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert [s["outcome"] for s in knee["steps"]] == ["loader-bound"]     # the search ends at the bound step
    assert knee["status"] == BOUND and knee["knee"] is None


def _knee_notebooks(cluster_config, folder: Path) -> tuple[dict, dict]:
    """The knee notebook's two searches (KNEE_NOTEBOOK), then the capacity notebook on its knee."""
    values = run_notebook("knee", KNEE_NOTEBOOK, folder, config=cluster_config, html=False)
    capacity = run_notebook("capacity", {"b_row_bytes": 1200.0, "knee_values": str(folder / "knee" / "values.json"),
                                         "cpu_values": None, "cpu_curve_values": None}, folder,
                            config=cluster_config, html=False)
    return values, capacity


def test_the_knee_notebook_and_the_nodes_a_target_allows(side_by_side):
    """The notebook's search on the capacity mix, its held-out step, then the capacity notebook sizing
    each tier from its knee beside the other counts; every step met a generous target, so the knee is
    a lower bound and the report says so (KNEE_NOTEBOOK: 3 s steps of at least 15 calls)."""
    values, capacity = _result(side_by_side, "notebooks")
    folder = side_by_side["notebook_folder"]
    knee = values["knee"]
    # two searches of the same plan: each one's knee, their median; two give a range, never an interval
    spread = values["knee_spread"]
    assert values["searches"] == spread["searches"] == 2 and len(spread["knees"]) == 2
    assert [k["steps"] for k in spread["knees"]] == [2, 2] and spread["ci_low"] is None
    assert spread["range"][0] <= values["knee_sends_per_second_per_node"] <= spread["range"][1]
    assert "median of 2 searches" in values["statement"] and "too few rounds for an interval" in values["conclusion"]
    assert set(pd.read_csv(folder / "knee" / "steps.csv")["search"]) == {1, 2}
    assert values["profile"] == "capacity" and values["calls_per_send"] == 3.5
    assert [s["requested_rate"] for s in knee["steps"]] == [10.5, 21.0]
    assert [s["outcome"] for s in knee["steps"]] == [MEETS, MEETS] and values["knee_status"] == NOT_REACHED
    assert values["knee_sends_per_second_per_node"] > 0 and values["audit_ok"] is True
    assert values["shared_machine"] is True and 0 < values["knee_node_available_cores"] <= values["machine_cores"]
    assert (folder / "knee" / "knee.png").is_file() and (folder / "knee" / "steps.csv").is_file()
    # the curve checked at a rate it did not measure: 80% of the knee's 21 calls/s, from steps 1 and 2
    held = values["held_out_rate"]
    assert held["asked_rate"] == pytest.approx(16.8) and held["from_steps"] == [1, 2] and held["step"] == 3
    assert held["calls"] > 0 and "at a rate it did not measure" in values["conclusion"]
    assert len(knee["steps"]) == 2  # the held-out step is not one of the search's
    # the unseen mix (the notebook's send_only): no cpu_cost values here, and a lower bound to scale
    # from besides: one clear reason, no second search
    assert values["unseen_mix"] is None and "cpu_cost" in values["unseen_mix_note"]
    assert "did not see** (`send_only`): not predicted" in values["conclusion"]
    assert capacity["knee_from"] == "this run" and capacity["knee_status"] == NOT_REACHED
    for tier in (20_000_000, 100_000_000, 500_000_000):
        assert capacity[f"nodes_knee_{tier}"] >= 3  # at least RF
    conclusion = capacity["conclusion"]
    assert "CPU side from the knee" in conclusion and "A lower bound" in conclusion and "smoke figure" in conclusion
    assert capacity["knee_searches"] == 2 and "median of 2 searches" in conclusion


def _walkthrough_loads() -> list[list[str]]:
    """The README walkthrough's `lab load` commands, as written."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## A capacity engineer's first hour"):text.index("## Commands")]
    return [shlex.split(line.strip())[1:] for line in section.splitlines()
            if line.strip().startswith(".venv/bin/lab load ")]


def _walkthrough(keyspace: str, folder: Path, lab_home: Path) -> list[tuple[list[str], subprocess.CompletedProcess]]:
    """Each `lab load` of the README's walkthrough, its lengths shortened (a quick form), one after
    the other: each command as run and its finished process."""
    shorter = {"--duration": "3s", "--warmup": "1s"}
    out = []
    for i, cmd in enumerate(_walkthrough_loads()):
        cmd = [shorter.get(prev, arg) if prev in shorter else arg for prev, arg in zip(["", *cmd], cmd)]
        quick = ["--seed-size", "tiny", "--allow-loader-bound", "--processes", "1", "--results", str(folder / f"r{i}")]
        if "--slo" in cmd:
            quick += ["--slo-steps", "1", "--slo-min-calls", "40", "--step", "2s", "--warmup", "1s"]
        out.append((cmd, subprocess.run([sys.executable, "-m", "lab.cli", *cmd, *quick], cwd=ROOT, capture_output=True,
                                        text=True, timeout=300,
                                        env={**os.environ, "LAB_KEYSPACE": keyspace, "PYTHONUNBUFFERED": "1"})))
        for run in (folder / f"r{i}").iterdir():
            shutil.rmtree(lab_home / "load-state" / run.name, ignore_errors=True)
            shutil.rmtree(lab_home / "load-state" / f"{run.name}-load", ignore_errors=True)
    return out


def test_the_walkthroughs_load_steps_run_as_written_in_quick_form(side_by_side):
    """Each `lab load` of the README's walkthrough, its lengths shortened (a quick form), runs:
    the capacity mix at a sends/s target, then the knee at a latency target (met or not: both
    are answers; never an error)."""
    loads = _walkthrough_loads()
    assert [cmd[cmd.index("--profile") + 1] for cmd in loads] == ["capacity", "capacity"]
    ran = _result(side_by_side, "walkthrough")
    assert len(ran) == len(loads)
    for cmd, proc in ran:
        assert proc.returncode in ((0, 4) if "--slo" in cmd else (0,)), proc.stdout[-2000:] + proc.stderr[-3000:]
        if "--sends-per-second" in cmd:
            assert "calls/s of the capacity mix" in proc.stderr and "audit ok" in proc.stdout
        else:
            assert "capacity: " in proc.stdout
