"""Open-loop pacing: fixed-rate schedules, per-user pacers through stage tables, the staircase."""
from __future__ import annotations

from lab.load.pacing import (
    FixedRateSchedule,
    Stage,
    UserPacer,
    stages_from_steps,
    staircase,
)

MS = 1_000_000  # ns
S = 1_000_000_000


# ---- pacing (pure) -----------------------------------------------------------------------------
def test_fixed_rate_schedule_is_independent_of_past_calls():
    sched = FixedRateSchedule.for_rate(100, start_ns=0)
    assert [sched.due_ns(k) for k in range(3)] == [0, 10 * MS, 20 * MS]
    assert sched.index_due_by(-1) == 0 and sched.index_due_by(0) == 1 and sched.index_due_by(25 * MS) == 3


def test_user_pacer_late_joiner_is_not_charged_for_time_before_it_existed():
    pacer = UserPacer([Stage(start_s=0, end_s=10, rate=10)], t0_ns=0, users=1)
    first = pacer.next_due(3 * S + 50 * MS)
    assert first == 3 * S + 100 * MS
    # but once running, a stall is not skipped: the next call is due on schedule, in the past
    assert pacer.next_due(5 * S) == 3 * S + 200 * MS


def test_user_pacer_splits_the_rate_and_walks_the_stages():
    stages = stages_from_steps([(1.0, 10.0), (1.0, 20.0)])  # total 10/s then 20/s
    pacer = UserPacer(stages, t0_ns=0, users=2)              # 5/s then 10/s for this user
    dues = []
    while (d := pacer.next_due(0)) is not None:
        dues.append(d)
    assert dues[:5] == [0, 200 * MS, 400 * MS, 600 * MS, 800 * MS]
    assert dues[5:] == [S + k * 100 * MS for k in range(10)]


def test_staircase_steps_at_fractions_of_the_max():
    st = staircase(1000, step_seconds=10)
    assert [(s.start_s, s.end_s, s.rate) for s in st] == [(0, 10, 500), (10, 20, 750), (20, 30, 900),
                                                          (30, 40, 1050)]
    assert staircase(1000, step_seconds=10, warmup_seconds=5)[0] == Stage(start_s=0, end_s=5, rate=500)


def test_a_jittered_pacer_puts_each_call_at_a_random_point_of_its_own_slot():
    """With an rng, call k is due somewhere in [k, k+1) slots: the rate is exact slot by slot,
    the point in the slot is drawn per call (two users do not meet the same way on every call)."""
    import random

    pacer = UserPacer([Stage(start_s=0, end_s=100, rate=10)], t0_ns=0, users=10, rng=random.Random(7))
    dues = []
    while (d := pacer.next_due(0)) is not None:
        dues.append(d)
    assert len(dues) in (99, 100)  # one call per 1 s slot (the last slot's draw may fall after the end)
    offsets = [d - k * S for k, d in enumerate(dues)]
    assert all(0 <= o < S for o in offsets)
    assert dues == sorted(dues)
    assert len({o // (10 * MS) for o in offsets}) > 50  # spread over the slot, not one phase
    # the same seed gives the same schedule; a fixed phase without an rng is what it was
    again = UserPacer([Stage(start_s=0, end_s=100, rate=10)], t0_ns=0, users=10, rng=random.Random(7))
    assert [again.next_due(0) for _ in range(5)] == dues[:5]
    fixed = UserPacer([Stage(start_s=0, end_s=3, rate=1)], t0_ns=0, users=1, phase=0.25)
    assert [fixed.next_due(0) for _ in range(3)] == [S // 4, S + S // 4, 2 * S + S // 4]


def test_a_jittered_late_joiner_starts_after_it_joined():
    import random

    pacer = UserPacer([Stage(start_s=0, end_s=10, rate=10)], t0_ns=0, users=1, rng=random.Random(1))
    first = pacer.next_due(3 * S + 50 * MS)
    assert 3 * S + 100 * MS <= first < 3 * S + 200 * MS


def test_two_jittered_users_meet_on_some_calls_not_on_all_or_none():
    """What a fixed phase per user did to a run: two users' calls met (here: within 50 ms of
    each other) on every call or on none, for the whole run. Jittered, they meet on about 10%
    of calls (2 x 50 ms of a 1 s slot), drawn per call."""
    import random

    def dues(pacer):
        out = []
        while (d := pacer.next_due(0)) is not None:
            out.append(d)
        return out

    def met(a, b):
        return sum(abs(x - y) < 50 * MS for x, y in zip(a, b)) / min(len(a), len(b))

    stage = [Stage(start_s=0, end_s=1000, rate=2)]
    fixed = [dues(UserPacer(stage, t0_ns=0, users=2, phase=p)) for p in (0.30, 0.32)]
    assert met(*fixed) == 1.0  # phases 20 ms apart: every call of the run meets
    jittered = [dues(UserPacer(stage, t0_ns=0, users=2, rng=random.Random(seed))) for seed in (1, 2)]
    assert 0.05 < met(*jittered) < 0.15
