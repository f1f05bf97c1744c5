"""The stage-table shape (lab.load.locust.shapes) stops a headless run at its end plus the stop
grace, not at Locust's next once-a-second tick after it (up to a second later: every load run
paid it). In a child process: importing Locust here would monkey-patch the test process."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from lab.load.locust import shapes
    from lab.load.plan import LoadPlan

    end = 4.0  # warmup 1 s + measured 3 s
    stop = end + shapes.STOP_GRACE_SECONDS
    out = {}
    for name, before_stop in (("early", 2.5), ("within_a_tick", 0.6)):
        t0 = time.time() - (stop - before_stop)
        plan = LoadPlan(run_id="r", load_dir=Path("."), state_root=Path("."), profile="send_only", users=4,
                        workers=1, t0=t0, warmup_seconds=1, duration_seconds=3, start_gate=True)
        import os
        os.environ.update(plan.to_env())
        tick = shapes.StageTableShape().tick()
        out[name] = {"tick": tick, "after_stop_s": time.time() - (t0 + stop)}
    print(json.dumps(out))
""")


@pytest.mark.spawns
def test_a_tick_within_a_second_of_the_stop_waits_for_it_and_stops():
    env = {**os.environ, "LOCUST_SKIP_MONKEY_PATCH": "1"}
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["early"]["tick"] == [4, 4]  # users, spawn rate: the run goes on
    assert out["within_a_tick"]["tick"] is None  # stops now, not at the next tick
    assert out["within_a_tick"]["after_stop_s"] >= 0  # never before the grace is over
