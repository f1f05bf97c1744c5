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
