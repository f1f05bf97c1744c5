"""Locust users on the store's futures (lab.load.locust.hub_wait) on the real node: every operation
whose store method has an ``_async`` twin ran on the future path, the others in native threads,
the counts and the audit hold as on the thread path, and the loader CPU per operation is measured
or reported as not measured, never apportioned where the apportioning is wrong. `--driver threads`
keeps every call on the thread path. Structure only; no speed is asserted."""
from __future__ import annotations

import shutil

import pytest

from lab.load.operation_cpu import FUTURE, THREAD
from lab.load.runner import LoadOptions, run_load
from lab.results.scratch import scratch_keyspace
from lab.store import MessageStore

pytestmark = pytest.mark.node

# each Locust operation -> the store method its user calls (lab.load.locust.users)
METHOD = {"send": "send", "send_retry": "send", "history_latest": "history", "history_older": "history",
          "history_newer": "history", "backfill_s1_group": "batch_read", "backfill_s1_dms": "batch_read",
          "backfill_mix": "batch_read", "react": "react", "unreact": "unreact", "self_reaction": "self_reaction",
          "recall": "recall", "edit": "edit"}


def _expected_path(op: str) -> str:
    return FUTURE if callable(getattr(MessageStore, f"{METHOD[op]}_async", None)) else THREAD


def _run(cluster_config, connection, results, **options):
    with scratch_keyspace(connection, "loadfut", create=False) as keyspace:
        result = run_load(cluster_config.replace(keyspace=keyspace), LoadOptions(
            seed_size="tiny", processes=1, results=results, **options))
    shutil.rmtree(result.state_root, ignore_errors=True)
    return result


@pytest.fixture(scope="module")
def chat_run(cluster_config, connection, tmp_path_factory):
    return _run(cluster_config, connection, tmp_path_factory.mktemp("results"), profile="chat", rate=40,
                duration_seconds=4, warmup_seconds=1)


def test_each_operation_ran_on_the_future_path_exactly_when_the_store_has_a_twin(chat_run):
    (worker,) = chat_run.summary.workers
    paths = dict(worker.call_paths)
    assert {"send", "history_latest"} <= set(paths)  # the mix ran both kinds
    assert paths == {op: _expected_path(op) for op in paths}
    assert paths["history_latest"] == FUTURE  # history_async: the store's future, no native thread per call
    assert worker.driver == "native-threads"


def test_counts_and_the_audit_hold_on_the_future_path(chat_run):
    s = chat_run.summary.to_json()
    audit = s["audit"]
    assert audit["ok"] and audit["lost"] == 0 and audit["duplicates"] == 0 and audit["replay_mismatches"] == 0
    assert audit["acked"] == s["acks"]["total_new"] == audit["found"]
    assert s["operations"]["send"]["ok"] == s["acks"]["measured"] > 0
    history = [op for op in s["operations"] if op.startswith("history_")]
    assert history and all(s["operations"][op]["errors"] == 0 for op in history)
    assert sum(s["operations"][op]["count"] for op in history) > 0


def test_loader_cpu_per_operation_is_measured_or_says_it_is_not(chat_run):
    ops = chat_run.summary.operation_cpu
    if not ops:  # too few calls finished in the window for a CPU per call: nothing reported, nothing wrong
        pytest.skip("the run's window was not steady enough for a CPU per call")
    assert ops["history_latest"].path == FUTURE and ops["history_latest"].caller_cpu_ms_per_call > 0
    # a future among several operations: no operation's share of the loop thread is known
    assert all(c.loader_cpu_ms_per_call is None for c in ops.values())
    assert chat_run.summary.loader_cpu_ms_per_call > 0  # the whole run's figure stays measured


def test_the_thread_driver_keeps_every_call_in_a_native_thread(cluster_config, connection, tmp_path):
    result = _run(cluster_config, connection, tmp_path, profile="read_only", users=4, duration_seconds=2,
                  store_futures=False)
    (worker,) = result.summary.workers
    assert worker.call_paths and set(worker.call_paths.values()) == {THREAD}
    assert result.summary.all_operations.count > 0 and result.summary.all_operations.errors == 0
    assert all(c.path == THREAD and c.loader_cpu_ms_per_call is not None
               for c in result.summary.operation_cpu.values())
