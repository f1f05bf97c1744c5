"""The store benchmark (lab.bench) end to end with tiny parameters on the real node.

Asserts the shape and the internal consistency of what it writes (every comparison present,
counts adding up, positive throughput, the naive baseline doing one point read per entry),
never a speed: timings on a shared 2-core machine are results, not pass/fail criteria."""
from __future__ import annotations

import csv
import json

import pytest

from lab.bench.store_paths import BenchParams, run_bench

pytestmark = pytest.mark.node

TINY = BenchParams(send_ops=16, send_block=8, send_warmup=4, send_concurrency=2, send_conversations=4,
                   body_bytes=64, history_messages=12, history_limit=10, history_ops=6, history_warmup=2,
                   history_round_calls=1, history_cpu_ops=10, history_cpu_block=2,
                   group_backlog=30, dm_count=3, dm_backlog=2, group_repeats=3, group_warmup=1, dm_repeats=4, dm_warmup=1, flush=False,
                   loop_probe_requests=20, loop_probe_rounds=3)
READS = ("point_read", "range_read", "in_read")


@pytest.fixture(scope="module")
def bench(cluster_config, tmp_path_factory):
    result = run_bench(cluster_config, TINY, results=tmp_path_factory.mktemp("results"))
    return result, json.loads(result.json_path.read_text())


def test_writes_json_csv_and_chart(bench):
    result, report = bench
    assert result.json_path == result.run_dir / "bench" / "store.json"
    assert result.png_path.stat().st_size > 0
    rows = list(csv.DictReader(result.csv_path.open()))
    assert {(r["comparison"], r["method"]) for r in rows} == {
        (key, name) for key, comp in report["comparisons"].items() for name in comp["methods"]}
    assert report["closing_note"] == result.closing_note and "x" in report["closing_note"]


def test_every_comparison_present_with_positive_throughput_and_consistent_counts(bench):
    _, report = bench
    comps = report["comparisons"]
    assert set(comps) == {"send_throughput", "history_latest_page", "history_latest_page_cpu",
                          "grouped_vs_naive_group_1x30", "grouped_vs_naive_dm_3x2"}
    expected = {"send_throughput": (TINY.send_ops, TINY.send_warmup),
                "history_latest_page": (TINY.history_ops, TINY.history_warmup),
                "history_latest_page_cpu": (TINY.history_cpu_ops, TINY.history_cpu_block),
                "grouped_vs_naive_group_1x30": (TINY.group_repeats, TINY.group_warmup),
                "grouped_vs_naive_dm_3x2": (TINY.dm_repeats, TINY.dm_warmup)}
    for key, comp in comps.items():
        # the send against its raw steps with and without the head reads and the outbox append, the latest page
        # against its raw statements, the grouped reads against the naive baseline and their raw fetch
        # and against the driver's floors (the statements chained through the driver's callbacks)
        assert len(comp["methods"]) == {"send_throughput": 11, "history_latest_page_cpu": 5}.get(key, 3)
        for name, m in comp["methods"].items():
            count, warmup = expected[key]
            assert (m["count"], m["ok"], m["errors"], m["warmup_discarded"]) == (count, count, 0, warmup), (key, name)
            assert m["latency_us"]["count"] == count  # the histogram holds exactly the measured calls
            assert 0 < m["latency_us"]["p50"] <= m["latency_us"]["p99"] <= m["latency_us"]["max"]
            assert m["throughput_ops_per_s"] > 0 and m["elapsed_seconds"] > 0
            assert m["requests_total"] >= count and m["requests_per_op"] == pytest.approx(m["requests_total"] / count,
                                                                                          abs=1e-3)
        assert all(v is None or v > 0 for v in comp["ratio"].values()), key
    ratios = [v for comp in comps.values() for v in comp["ratio"].values()]
    assert None not in ratios


def test_request_counts_match_what_each_method_is(bench):
    _, report = bench
    comps = report["comparisons"]
    send = comps["send_throughput"]["methods"]
    # bare: exactly one LWT per call; the write path: one dedup LWT per send plus its plain writes
    assert send["bare_lwt_insert"]["requests"] == {"client_dedup": {"lwt": TINY.send_ops}}
    assert send["send"]["requests"]["client_dedup"]["lwt"] == TINY.send_ops
    assert send["send"]["requests"]["message_record"]["write"] == TINY.send_ops
    assert send["send"]["requests_per_op"] > send["bare_lwt_insert"]["requests_per_op"]
    # the floors: the write path's statements, once each per call (the head write inline); the outbox
    # append is no CQL request, so both floors issue the same statements
    for floor in ("send_floor", "send_floor_without_outbox"):
        assert send[floor]["requests"] == {
            "client_dedup": {"lwt": TINY.send_ops, "write": TINY.send_ops}, "message_record": {"write": TINY.send_ops},
            "message_index": {"write": TINY.send_ops}, "conversation_head": {"write": TINY.send_ops}}
    # the like-for-like floor: the same plus the head read before each head write and the fencing read
    # on each conversation's first call (calls are numbered from the warm-up's, which is not counted)
    like = send["send_floor_with_head_read"]["requests"]
    first_calls = max(0, min(TINY.send_conversations, TINY.send_warmup + TINY.send_ops) - TINY.send_warmup)
    assert like == {**send["send_floor"]["requests"], "conversation_head": {
        "write": TINY.send_ops, "point_read": TINY.send_ops + first_calls}}, like
    # the driver floors: the like-for-like floor's very statements (the outbox append is no request)
    assert send["send_callback_floor"]["requests"] == like
    assert send["send_logged_callback_floor"]["requests"] == like
    assert send["send_asyncio_floor"]["requests"] == like  # the same statements as coroutines on an asyncio loop
    assert send["send_callback_floor_at_send_rate"]["requests"] == like  # the same, at send_async's rate
    assert send["send_callback_floor_at_send_rate_on_loop"]["requests"] == like  # and started on the driver's loop
    # the store sends its floor plus the head reads: at most one head write request per send (fewer
    # when its head writer groups them in unlogged batches), at most one head read request before each
    # (§2.4's compare, fencing; an IN read per group) and one per conversation its writer had not
    # written yet (the fencing check of a first send)
    full = send["send"]["requests"]
    for table in ("client_dedup", "message_record", "message_index"):  # send_async: the same steps' statements
        assert send["send_async"]["requests"][table] == full[table], table
    head_writes = full["conversation_head"].get("write", 0)
    assert 0 < head_writes <= TINY.send_ops
    head_reads = full["conversation_head"].get("point_read", 0) + full["conversation_head"].get("in_read", 0)
    assert head_reads <= head_writes + TINY.send_conversations
    assert {t: full[t] for t in ("client_dedup", "message_record", "message_index")} == {
        t: send["send_floor"]["requests"][t] for t in ("client_dedup", "message_record", "message_index")}

    hist = comps["history_latest_page"]["methods"]
    assert hist["bare_select"]["requests"] == {"message_record": {"range_read": TINY.history_ops}}
    assert hist["history"]["requests_per_op"] == 2  # conversation_head + one bucket
    assert hist["history_floor"]["requests"] == {"conversation_head": {"point_read": TINY.history_ops},
                                                 "message_record": {"range_read": TINY.history_ops}}
    assert hist["history"]["requests"] == hist["history_floor"]["requests"]  # the same statements, one page each
    assert hist["history"]["rows_per_op"] == hist["bare_select"]["rows_per_op"] == TINY.history_limit
    cpu = comps["history_latest_page_cpu"]["methods"]  # the page, its blocking floor and its driver floor
    page_requests = {"conversation_head": {"point_read": TINY.history_cpu_ops},
                     "message_record": {"range_read": TINY.history_cpu_ops}}
    assert {name: m["requests"] for name, m in cpu.items()} == {
        "history": page_requests, "history_floor": page_requests, "history_async": page_requests,
        "history_callback_floor": page_requests, "history_callback_floor_at_page_rate": page_requests}

    for key, entries, groups, calls in (("grouped_vs_naive_group_1x30", 30, 1, TINY.group_repeats),
                                        ("grouped_vs_naive_dm_3x2", 6, 3, TINY.dm_repeats)):
        comp = comps[key]
        assert (comp["entries"], comp["groups"]) == (entries, groups)
        g, n = comp["methods"]["grouped"], comp["methods"]["naive_point_reads"]
        # the baseline: one point read of message_record per message_id, nothing else
        assert n["requests"] == {"message_record": {"point_read": entries * calls}}
        assert n["message_record_requests_per_op"] == entries
        # grouped: one message_record + one summary request per group, never a point or index read
        assert g["message_record_requests_per_op"] == groups and g["groups_per_op"] == groups
        assert g["message_record_point_reads_per_op"] == 0 and g["message_index_requests"] == 0
        assert g["requests_per_op"] == 2 * groups
        assert comp["ratio"]["naive_over_grouped_message_record_requests"] == pytest.approx(entries / groups, rel=1e-3)
        # the raw fetch: the grouped read's very statements, nothing more
        assert comp["methods"]["raw_fetch"]["requests"] == g["requests"]


def test_the_closing_note_states_both_send_floors_and_the_goals(bench):
    """(store.seeding.log_append, the floor's outbox step, is tested in tests/node/test_seeding.py.)"""
    result, report = bench
    note = report["closing_note"]
    assert "durable outbox append" in note and "send_floor_without_outbox" in note
    assert "send_floor_with_head_read" in note and "like for like" in note
    assert "goal >= 0.9" in note and "goal <= 1.15" in note and "goal <= 1.5" in note
    assert "goal <= 1.3" in note and "goal <= 1.2" in note  # the driver floors' goals


def test_the_driver_floors_are_paired_round_by_round_on_client_cpu(bench):
    """The send and the latest page against their driver floors: each round's client CPU per call
    of every side, the CPU ratio per round with its interval (five rounds: an interval), the goal
    judged only when the run vouches for it, and the note's line for each."""
    _, report = bench
    send_pr = report["comparisons"]["send_throughput"]["paired_rounds"]
    page_pr = report["comparisons"]["history_latest_page_cpu"]["paired_rounds"]
    for pr, side, floor, key, limit, rounds in (
            (send_pr, "send_async", "send_callback_floor", "send_async_over_callback_floor_cpu_per_call", 1.3,
             TINY.send_ops // TINY.send_block),
            (page_pr, "history_async", "history_callback_floor", "history_async_over_callback_floor_cpu_per_call", 1.2,
             TINY.history_cpu_ops // TINY.history_cpu_block)):
        cpu = pr["cpu_ms_per_call_by_round"]
        assert len(cpu[floor]) == rounds and all(x > 0 for x in cpu[floor])
        r = pr["cpu_ratios"][key]
        assert r["ratios"] == pytest.approx([a / b for a, b in zip(cpu[side], cpu[floor])], rel=2e-2)
        assert r["rounds"] == rounds and r["low"] <= r["median"] <= r["high"]
        goal = pr["callback_goal"]
        assert (goal["ratio"], goal["at_most"], goal["vouched"]) == (key, limit, r["vouched"])
        assert goal["verdict"] in (("met", "not met", "undecided") if r["vouched"] else ("not judged",))
    assert page_pr["cpu_ratios"]["history_async_over_callback_floor_cpu_per_call"]["ci_low"] is not None
    assert page_pr["cpu_ratios"]["history_over_history_async_cpu_per_call"]["rounds"] == rounds
    assert send_pr["cpu_ratios"]["send_over_send_async_cpu_per_call"]["rounds"] == TINY.send_ops // TINY.send_block
    note = report["closing_note"]
    assert "Send client CPU / driver floor (send_callback_floor" in note
    assert "Latest page client CPU / driver floor (history_callback_floor" in note
    assert "(blocking threads)" in note and "blocking floor / driver floor" in note
    assert "Send driver floor, asyncio / callbacks" in note
    loops = report["driver_loops"]  # every reactor this driver build has, each style, per request
    assert set(loops["variants"]) == {"libev callbacks", "libev coroutines", "asyncio callbacks",
                                      "asyncio coroutines on the driver's loop"} and not loops["missing_reactors"]
    for v in loops["variants"].values():
        assert len(v["us_per_request_by_round"]) == 3 and v["us_per_request_median"] > 0
    assert loops["variants"]["libev coroutines"]["over_baseline"]["rounds"] == 3
    assert "Driver loops, client CPU per request" in note and "timings_seconds" in report
    assert "driver_loops_seconds" in report["timings_seconds"]


def test_the_send_is_judged_against_the_driver_floor_with_the_outbox_append(bench):
    """send_logged_callback_floor: measured in the same rounds as every side, send_async's client CPU
    per call over it per round with its interval, a second goal line (the first one kept), and the
    append's own cost in the driver floor."""
    _, report = bench
    comp = report["comparisons"]["send_throughput"]
    pr, rounds = comp["paired_rounds"], TINY.send_ops // TINY.send_block
    cpu = pr["cpu_ms_per_call_by_round"]
    assert len(cpu["send_logged_callback_floor"]) == rounds and all(x > 0 for x in cpu["send_logged_callback_floor"])
    assert len(pr["throughput_by_round"]["send_logged_callback_floor"]) == rounds
    r = pr["cpu_ratios"]["send_async_over_logged_callback_floor_cpu_per_call"]
    assert r["ratios"] == pytest.approx([a / b for a, b in zip(cpu["send_async"], cpu["send_logged_callback_floor"])],
                                        rel=2e-2)
    assert r["rounds"] == rounds and r["low"] <= r["median"] <= r["high"]
    # two rounds give no interval (tests/unit/test_driver_floor_rounds.py: eight do), so nothing is judged
    assert (r["ci_low"], r["ci_high"], r["vouched"]) == (None, None, False)
    cost = pr["cpu_ratios"]["logged_floor_over_callback_floor_cpu_per_call"]
    assert cost["rounds"] == rounds and cost["low"] <= cost["median"] <= cost["high"]
    goal = pr["logged_callback_goal"]
    assert (goal["ratio"], goal["at_most"], goal["vouched"]) == (
        "send_async_over_logged_callback_floor_cpu_per_call", 1.3, r["vouched"])
    assert goal["verdict"] in (("met", "not met", "undecided") if r["vouched"] else ("not judged",))
    assert pr["callback_goal"]["ratio"] == "send_async_over_callback_floor_cpu_per_call"
    for key in ("send_async_over_logged_callback_floor_throughput", "logged_floor_over_callback_floor_throughput"):
        assert comp["ratio"][key] > 0
    note = report["closing_note"]
    assert "Send client CPU / driver floor (send_callback_floor" in note
    assert "Send client CPU / driver floor with the outbox append (send_logged_callback_floor" in note
    assert note.count("goal <= 1.3") == 4 and goal["verdict"] == "not judged"
    logged = next(line for line in note.splitlines() if "(send_logged_callback_floor" in line)
    assert "too few rounds for an interval" in logged and "send_logged_callback_floor " in logged
    assert "Send driver floor, with the outbox append / without" in note


def test_send_and_its_floors_are_paired_round_by_round(bench):
    """Each measured round's block of every send method, and per pair the ratio of the two blocks of
    each round (lab.measure.paired_ratio); two rounds give no interval, so the note says the figure
    is not vouched for."""
    _, report = bench
    pr = report["comparisons"]["send_throughput"]["paired_rounds"]
    rounds = TINY.send_ops // TINY.send_block
    assert pr["rounds"] == rounds and pr["block_calls"] == TINY.send_block
    by_round = pr["throughput_by_round"]
    assert set(by_round) == set(report["comparisons"]["send_throughput"]["methods"])
    assert all(len(xs) == rounds and all(x > 0 for x in xs) for xs in by_round.values())
    like = pr["ratios"]["send_over_floor_with_head_read_throughput"]
    assert like["ratios"] == pytest.approx([s / f for s, f in zip(by_round["send"], by_round["send_floor_with_head_read"])],
                                           abs=2e-3)
    assert like["rounds"] == rounds and like["low"] <= like["median"] <= like["high"]
    assert (like["ci_low"], like["ci_high"], like["vouched"]) == (None, None, False)
    assert pr["goal"]["verdict"] == "not judged" and not pr["goal"]["vouched"]
    cpu = pr["cpu_ms_per_call_by_round"]  # the client's CPU per call of each block, paired the same way
    assert set(cpu) == set(by_round) and all(len(xs) == rounds and all(x > 0 for x in xs) for xs in cpu.values())
    assert pr["cpu_ratios"]["send_over_floor_with_head_read_cpu_per_call"]["rounds"] == rounds
    assert "CPU per call, send / like-for-like floor" in report["closing_note"]
    assert f"{rounds} paired rounds" in report["closing_note"] and "NOT VOUCHED FOR" in report["closing_note"]


def test_the_latest_page_and_its_floor_are_paired_round_by_round(bench):
    """Each side's measured calls cut into rounds of history_round_calls (here 1: each round one page
    and the floor call beside it), each round's p50 over the floor's (lab.measure.paired_ratio), the
    goal judged only from a figure the run vouches for; the run's p50 / p99 lines stay."""
    _, report = bench
    comp = report["comparisons"]["history_latest_page"]
    pr = comp["paired_rounds"]
    rounds = TINY.history_ops // TINY.history_round_calls
    assert pr["rounds"] == rounds and pr["round_calls"] == TINY.history_round_calls
    by_round = pr["p50_us_by_round"]
    assert set(by_round) == set(comp["methods"])
    assert all(len(xs) == rounds and all(x > 0 for x in xs) for xs in by_round.values())
    goal = pr["ratios"]["history_over_floor_p50"]
    assert goal["ratios"] == pytest.approx([h / f for h, f in zip(by_round["history"], by_round["history_floor"])],
                                           abs=2e-3)
    assert goal["rounds"] == rounds and goal["low"] <= goal["median"] <= goal["high"]
    assert goal["ci_low"] is not None and goal["ci_low"] <= goal["median"] <= goal["ci_high"]  # 6 rounds: an interval
    assert pr["goal"]["ratio"] == "history_over_floor_p50" and pr["goal"]["at_most"] == 1.15
    assert pr["goal"]["vouched"] == goal["vouched"]
    assert pr["goal"]["verdict"] in (("met", "not met", "undecided") if goal["vouched"] else ("not judged",))
    assert pr["ratios"]["history_over_bare_p50"]["rounds"] == rounds
    note = report["closing_note"]
    assert f"Latest page p50 / history_floor p50 over {rounds} paired rounds" in note
    assert "history_over_floor_p50" in comp["ratio"] and "history_over_floor_p99" in comp["ratio"]


def test_environment_parameters_and_keyspace_dropped(bench, connection):
    _, report = bench
    env = report["environment"]
    assert env["server"] in ("cassandra", "scylla") and env["server_version"]
    assert env["nodes"] >= 1 and env["machine"]["cpus"] >= 1 and "git_commit" in env
    assert env["client_gc"] == "freeze" and "client GC freeze" in report["closing_note"]  # the default, named
    assert report["parameters"]["send_ops"] == TINY.send_ops and report["parameters"]["mode"] == "custom"
    assert report["keyspace"].startswith("bench_") and report["keyspace_dropped"]
    names = {r.keyspace_name for r in connection.session.execute("SELECT keyspace_name FROM system_schema.keyspaces")}
    assert report["keyspace"] not in names




def test_profile_writes_flame_graphs_and_tables_and_drops_its_keyspaces(cluster_config, connection, tmp_path):
    """``lab bench store --profile`` (what the store is profiled with): one workload, both
    views, on the real node; py-spy's files exist and hold samples of the store's own code."""
    from lab.bench.store_paths.profiling import ProfileParams, run_profile

    before = {r.keyspace_name for r in connection.session.execute("SELECT keyspace_name FROM system_schema.keyspaces")}
    result = run_profile(cluster_config, ProfileParams(modes=("grouped_20x5",), seconds=2.0), run_dir=tmp_path)
    names = {p.name for p in result.files}
    assert {"grouped_20x5.svg", "grouped_20x5.txt", "grouped_20x5.top.md", "grouped_20x5.gil.svg",
            "grouped_20x5.gil.txt", "grouped_20x5.gil.top.md", "grouped_split.txt"} <= names
    assert all(p.stat().st_size > 0 for p in result.files)
    stacks = (result.out_dir / "grouped_20x5.txt").read_text()  # every thread: thousands of samples
    assert "batch_read (" in stacks and "lab/store/" in stacks  # the store's own frames were sampled
    graph = (result.out_dir / "grouped_20x5.svg").read_text()  # drawn from those very stacks
    assert graph.startswith("<svg") and "batch_read (" in graph
    assert (result.out_dir / "grouped_20x5.gil.top.md").read_text().startswith("# grouped_20x5.gil.txt: ")
    split = (result.out_dir / "grouped_split.txt").read_text()
    assert "batch_read: p50" in split and "raw_naive_point_reads: p50" in split
    assert result.workloads["grouped_20x5"].startswith("grouped_20x5: ")
    assert "client GC freeze" in result.closing_note  # the workload process's collector, named
    after = {r.keyspace_name for r in connection.session.execute("SELECT keyspace_name FROM system_schema.keyspaces")}
    assert len(result.keyspaces) == 2 and not set(result.keyspaces) & (before | after)  # one per py-spy run, dropped


def test_the_page_is_judged_against_the_driver_floor_at_its_own_rate(bench):
    """history_callback_floor_at_page_rate: the page's driver floor started at the rate of
    history_async's last block, in the same rounds; a second goal line for the page, and the
    rate's own effect on the floor."""
    _, report = bench
    pr = report["comparisons"]["history_latest_page_cpu"]["paired_rounds"]
    rounds = TINY.history_cpu_ops // TINY.history_cpu_block
    cpu = pr["cpu_ms_per_call_by_round"]
    assert len(cpu["history_callback_floor_at_page_rate"]) == rounds
    assert all(x > 0 for x in cpu["history_callback_floor_at_page_rate"])
    r = pr["cpu_ratios"]["history_async_over_paced_callback_floor_cpu_per_call"]
    assert r["ratios"] == pytest.approx(
        [a / b for a, b in zip(cpu["history_async"], cpu["history_callback_floor_at_page_rate"])], rel=2e-2)
    goal = pr["paced_callback_goal"]
    assert (goal["ratio"], goal["at_most"], goal["vouched"]) == (
        "history_async_over_paced_callback_floor_cpu_per_call", 1.2, r["vouched"])
    assert goal["verdict"] in (("met", "not met", "undecided") if r["vouched"] else ("not judged",))
    assert pr["cpu_ratios"]["paced_floor_over_callback_floor_cpu_per_call"]["rounds"] == rounds
    note = report["closing_note"]
    assert "Latest page client CPU / driver floor at the page's rate (history_callback_floor_at_page_rate" in note
    assert "Latest page driver floor at history_async's rate / as fast as it ends" in note


def test_the_send_is_judged_against_the_driver_floor_at_its_own_rate(bench):
    """send_callback_floor_at_send_rate: the statements-only driver floor started at the rate of
    send_async's last block, in the same rounds; a third goal line, and the rate's own effect on
    the floor (at the send's rate over as fast as it ends) and the append's at equal rates."""
    _, report = bench
    comp = report["comparisons"]["send_throughput"]
    pr, rounds = comp["paired_rounds"], TINY.send_ops // TINY.send_block
    cpu = pr["cpu_ms_per_call_by_round"]
    assert len(cpu["send_callback_floor_at_send_rate"]) == rounds
    assert all(x > 0 for x in cpu["send_callback_floor_at_send_rate"])
    r = pr["cpu_ratios"]["send_async_over_paced_callback_floor_cpu_per_call"]
    assert r["ratios"] == pytest.approx(
        [a / b for a, b in zip(cpu["send_async"], cpu["send_callback_floor_at_send_rate"])], rel=2e-2)
    goal = pr["paced_callback_goal"]
    assert (goal["ratio"], goal["at_most"], goal["verdict"]) == (
        "send_async_over_paced_callback_floor_cpu_per_call", 1.3, "not judged")
    for key in ("paced_floor_over_callback_floor_cpu_per_call", "logged_floor_over_paced_callback_floor_cpu_per_call"):
        assert pr["cpu_ratios"][key]["rounds"] == rounds, key
    note = report["closing_note"]
    assert "Send client CPU / driver floor at the send's rate (send_callback_floor_at_send_rate" in note
    assert "Send driver floor at send_async's rate / as fast as it ends" in note
    assert "Send driver floor with the outbox append / without it at send_async's rate" in note


def test_the_rate_and_where_a_paced_chain_starts_are_priced_apart(bench):
    """send_callback_floor_at_send_rate_on_loop: the paced floor's chains at the same rate, each started
    by the driver's event loop on its timer, in the same rounds; two figures, no goal: thread-paced
    over loop-paced (where a chain starts) and loop-paced over free-running (the rate alone)."""
    _, report = bench
    comp = report["comparisons"]["send_throughput"]
    pr, rounds = comp["paired_rounds"], TINY.send_ops // TINY.send_block
    loop_paced, thread_paced = "send_callback_floor_at_send_rate_on_loop", "send_callback_floor_at_send_rate"
    m = comp["methods"][loop_paced]
    assert (m["count"], m["ok"], m["errors"]) == (TINY.send_ops, TINY.send_ops, 0)
    cpu = pr["cpu_ms_per_call_by_round"]
    assert len(cpu[loop_paced]) == rounds and all(x > 0 for x in cpu[loop_paced])
    for key, (a, b) in {"paced_floor_over_loop_paced_floor_cpu_per_call": (thread_paced, loop_paced),
                        "loop_paced_floor_over_callback_floor_cpu_per_call": (loop_paced, "send_callback_floor")}.items():
        r = pr["cpu_ratios"][key]
        assert r["rounds"] == rounds and r["low"] <= r["median"] <= r["high"], key
        assert r["ratios"] == pytest.approx([x / y for x, y in zip(cpu[a], cpu[b])], rel=2e-2), key
    # the two parts are figures, not goals; send_async is judged against the loop-paced floor itself
    assert [v["ratio"] for v in pr.values() if isinstance(v, dict) and "loop_paced" in str(v.get("ratio", ""))] == [
        "send_async_over_loop_paced_callback_floor_cpu_per_call"]
    r = pr["cpu_ratios"]["send_async_over_loop_paced_callback_floor_cpu_per_call"]
    assert r["ratios"] == pytest.approx([x / y for x, y in zip(cpu["send_async"], cpu[loop_paced])], rel=2e-2)
    goal = pr["loop_paced_callback_goal"]
    assert (goal["ratio"], goal["at_most"], goal["vouched"]) == (
        "send_async_over_loop_paced_callback_floor_cpu_per_call", 1.3, r["vouched"])
    note = report["closing_note"]
    assert "Send driver floor at send_async's rate, started from the calling thread / on the driver's loop" in note
    assert "Send driver floor at send_async's rate started on the driver's loop / as fast as it ends" in note
    assert ("Send client CPU / driver floor at the send's rate, started on the loop "
            "(send_callback_floor_at_send_rate_on_loop") in note
    assert note.count("goal <= 1.3") == 4
