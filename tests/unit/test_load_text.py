"""What `lab load` prints at the end (lab.cli.load_text): numbers labelled as the verdict judges them."""
from __future__ import annotations

from types import SimpleNamespace

from lab.cli.load_text import steps_lines
from lab.load.loadgen_cpu import CpuWindow
from lab.load.verdict import Verdict
from lab.measure import LatencySummary


def step(rate: float, per_process: dict[str, float], verdict: str) -> SimpleNamespace:
    lat = LatencySummary(count=2, p50=1000.0, p90=2000.0, p99=2000.0, p999=2000.0, max=2000.0, mean=1500.0)
    total = sum(per_process.values())
    return SimpleNamespace(warmup=False, requested_rate=rate, achieved_rate=rate, corrected_us=lat, service_us=lat,
                           loadgen_cpu=CpuWindow(samples=10, mean_percent_of_one_core=total,
                                                 max_percent_of_one_core=total, mean_percent_of_machine=total / 2,
                                                 cores=2),
                           verdict=Verdict(verdict=verdict, loader_cpu_percent_of_core=per_process))


def test_a_step_shows_the_busiest_process_cpu_the_verdict_judged():
    """A staircase on 2 processes: "78% of a core ... valid" beside a 70 % limit would be both
    processes summed; the verdict judges each process, and the line shows the busiest."""
    s = SimpleNamespace(steps=[step(150, {"worker-0": 39.5, "worker-1": 38.5}, "valid"),
                               step(225, {"worker-0": 72.0, "worker-1": 36.0}, "loader-bound")],
                        staircase_stopped_at_step=2)
    text = "\n".join(steps_lines(s))
    assert "78% of a core" not in text and "108% of a core" not in text, text
    rows = [line for line in text.splitlines() if line.strip().startswith(("1 ", "2 "))]
    assert "39.5% (busiest of 2)" in rows[0] and "72% (busiest of 2)" in rows[1], text
