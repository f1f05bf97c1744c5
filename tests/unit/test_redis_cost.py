"""The hot window's cost per put in `lab bench store --outboxes`: two snapshots of
Redis's INFO commandstats / cpu and this process's CPU -> cost per put and per round, the callers'
over one caller's, and the goal's verdicts on latency and on cost. Pure arithmetic, no server."""
from __future__ import annotations

from lab.bench.store_paths.redis_cost import (MET, NOT_JUDGED, NOT_MEETABLE, NOT_MET, PING_COMMANDS, PUT_COMMANDS,
                                              HotWindowCost, PhaseCost, ServerSnapshot, phase_cost)


def _stat(calls: int, usec: int, failed: int = 0) -> dict:
    return {"calls": calls, "usec": usec, "usec_per_call": usec / calls if calls else 0.0, "rejected_calls": 0,
            "failed_calls": failed}


def _info(cpu_user: float, cpu_sys: float, **stats: dict) -> dict:
    # the shape redis-py parses `INFO commandstats cpu` into (a Redis 7.0 server's, as read in a run)
    return {"used_cpu_sys": cpu_sys, "used_cpu_user": cpu_user, "used_cpu_sys_children": 0.0,
            "used_cpu_user_children": 0.0, **{f"cmdstat_{k.replace('__', '|')}": v for k, v in stats.items()}}


BEFORE = ServerSnapshot.from_info(_info(10.0, 2.0, evalsha=_stat(1000, 30_000, failed=1), zadd=_stat(1000, 4_000),
                                        info=_stat(7, 200), ping=_stat(50, 20)))


def test_snapshot_reads_commandstats_and_cpu():
    assert BEFORE.calls["evalsha"] == 1000 and BEFORE.failed_calls["evalsha"] == 1 and BEFORE.usec["evalsha"] == 30_000
    assert BEFORE.cpu_seconds == 12.0
    sub = ServerSnapshot.from_info(_info(0.0, 0.0, script__load=_stat(1, 51)))
    assert sub.calls == {"script|load": 1}


def _after(**extra: dict) -> ServerSnapshot:
    # 200 puts: 201 EVALSHA calls of which 1 NOSCRIPT (failed, replayed), 7,000 µs in Redis, 0.012 s of server CPU
    stats = {"evalsha": _stat(1201, 37_000, failed=2), "zadd": _stat(1200, 4_800), "info": _stat(8, 228),
             "ping": _stat(50, 20), "hello": _stat(1, 4), "script__load": _stat(1, 51)}
    return ServerSnapshot.from_info(_info(10.01, 2.002, **{**stats, **extra}))


def test_phase_cost_is_the_difference_per_put_and_per_round():
    c = phase_cost(BEFORE, _after(), commands=PUT_COMMANDS, ops=200, rounds=80, client_cpu_seconds=0.05,
                   wall_seconds=0.1)
    assert (c.calls, c.failed_calls, c.command_usec) == (201, 1, 7000)
    # the replayed NOSCRIPT call, the snapshot's INFO, a new connection's HELLO and the inner ZADDs are the phase's own
    assert c.other_calls == 0 and c.quiet
    assert c.command_us_per_call == round(7000 / 201, 2)
    assert c.server_cpu_us_per_op == 60.0 and c.server_cpu_us_per_round == 150.0  # 0.012 s over 200 puts / 80 rounds
    assert c.client_cpu_us_per_op == 250.0 and c.ops_per_round == 2.5
    j = c.to_json()
    assert j["command_us_per_call"] == c.command_us_per_call and j["quiet"] is True and j["other_calls"] == 0


def test_other_clients_calls_are_counted():
    # 5 EVALSHA beyond the phase's own puts, and 3 GETs the phase never issues
    c = phase_cost(BEFORE, _after(evalsha=_stat(1206, 37_200, failed=2), get=_stat(3, 3)), commands=PUT_COMMANDS,
                   ops=200, rounds=200, client_cpu_seconds=0.05, wall_seconds=0.1)
    assert c.other_calls == 8 and not c.quiet
    # a PING phase: the puts' EVALSHA and ZADD are someone else's
    p = phase_cost(BEFORE, _after(ping=_stat(150, 60)), commands=PING_COMMANDS, ops=100, rounds=100,
                   client_cpu_seconds=0.01, wall_seconds=0.05)
    assert p.calls == 100 and p.command_usec == 40 and p.other_calls == 201 + 200 + 1


def _phase(*, command: str = "evalsha", usec_per_call: float, server_us: float, client_us: float, ops: int = 200,
           rounds: int = 200, other: int = 0) -> PhaseCost:
    return PhaseCost(command=command, ops=ops, rounds=rounds, calls=ops, failed_calls=0,
                     command_usec=round(usec_per_call * ops), other_calls=other, server_cpu_seconds=server_us * ops / 1e6,
                     client_cpu_seconds=client_us * ops / 1e6, wall_seconds=0.1)


def _cost(put_one: PhaseCost, put_many: PhaseCost, *, put_p50: float | None = 18.1, ping_p50: float | None = 18.7,
          ) -> HotWindowCost:
    return HotWindowCost(concurrency=8, limit=2.0, put_one=put_one, put_callers=put_many,
                         ping_one=_phase(command="ping", usec_per_call=0.3, server_us=24, client_us=92),
                         ping_callers=_phase(command="ping", usec_per_call=0.26, server_us=19, client_us=162),
                         put_p50_ratio=put_p50, ping_p50_ratio=ping_p50, loadavg=[7.5, 8.0, 6.1])


ONE = _phase(usec_per_call=32.4, server_us=60, client_us=146.5)
MANY = _phase(usec_per_call=20.9, server_us=38.1, client_us=143.6, rounds=138)


def test_ratios_are_the_callers_cost_over_one_callers():
    r = _cost(ONE, MANY).ratios
    assert r["put"]["command_us_per_call"] == round(20.9 / 32.4, 3)
    assert r["put"]["server_cpu_us_per_op"] == round(38.1 / 60, 3)
    assert r["put"]["server_cpu_us_per_round"] == round((38.1 * 200 / 138) / 60, 3)
    assert r["put"]["client_cpu_us_per_op"] == round(143.6 / 146.5, 3)
    assert r["ping"]["client_cpu_us_per_op"] == round(162 / 92, 3)


def test_latency_not_meetable_when_the_control_inflates_too_and_cost_met():
    goal = _cost(ONE, MANY).goal
    assert goal["latency"] == {"put_p50": 18.1, "ping_p50": 18.7, "verdict": NOT_MEETABLE}
    assert goal["cost"]["verdict"] == MET and goal["cost"]["server_cpu_judged"] is True
    assert set(goal["cost"]["judged"]) == {"command_us_per_call", "server_cpu_us_per_op", "client_cpu_us_per_op"}


def test_latency_met_or_not_met_against_the_control():
    assert _cost(ONE, MANY, put_p50=1.9).goal["latency"]["verdict"] == MET
    # the control's round trip stays within the limit, the put's does not: the put's own doing
    assert _cost(ONE, MANY, put_p50=3.0, ping_p50=1.5).goal["latency"]["verdict"] == NOT_MET
    assert _cost(ONE, MANY, put_p50=None).goal["latency"]["verdict"] == NOT_JUDGED


def test_cost_not_met_when_any_judged_ratio_exceeds_the_limit():
    worse = _phase(usec_per_call=32.4, server_us=60, client_us=146.5 * 2.5)
    goal = _cost(ONE, worse).goal
    assert goal["cost"]["judged"]["client_cpu_us_per_op"] == 2.5 and goal["cost"]["verdict"] == NOT_MET


def test_server_cpu_not_judged_while_other_clients_ran():
    busy = _phase(usec_per_call=20.9, server_us=500, client_us=143.6, other=40)  # another client's work in Redis's CPU
    goal = _cost(ONE, busy).goal
    assert goal["cost"]["server_cpu_judged"] is False and "server_cpu_us_per_op" not in goal["cost"]["judged"]
    assert goal["cost"]["verdict"] == MET
    assert "not the puts' alone" in "\n".join(_cost(ONE, busy).lines())


def test_a_missing_cost_is_not_judged():
    idle = _phase(usec_per_call=20.9, server_us=38.1, client_us=0)  # no CPU read: no ratio
    assert _cost(ONE, idle).goal["cost"]["verdict"] == NOT_JUDGED


def test_lines_state_both_goals_and_the_control():
    cost = _cost(ONE, MANY)
    text = "\n".join(cost.lines())
    assert "hot window cost per put, one caller -> 8 callers" in text and "Redis EVALSHA time per put" in text
    assert "control PING" in text and "load average 7.5 / 8.0 / 6.1" in text
    assert f"latency p50 put 18.1x, PING control 18.7x -> {NOT_MEETABLE}" in text
    assert text.rstrip().endswith(f"-> {MET}")
    assert cost.to_json()["goal"] == cost.goal and set(cost.to_json()["phases"]) == {
        "put_one_caller", "put_callers", "ping_one_caller", "ping_callers"}
