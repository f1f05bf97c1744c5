"""What ``lab bench load`` reports (``bench/load.json``) and its closing note.

More: docs/bench-internals.md.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lab.load import pacing
from lab.load.loadgen_cpu import CpuWindow
from lab.load.operation_cpu import APPORTIONED_NOTE, OperationCpu
from lab.load.summary import StepSummary
from lab.measure import LatencySummary, a_over_b
from lab.measure.timing import MS_PER_SECOND
from lab.results import units

__all__ = ["CHAT_GOAL_BASELINE_CALLS_PER_CORE_SECOND", "CHAT_GOAL_FACTOR", "CPU_RATIO_GOAL", "LoadBenchParams",
           "LoadBenchReport", "LoadBenchResult", "OperationCosts", "Staircase", "ThroughputRun",
           "chat_goal_ms_per_call"]

RATIO_DIGITS = 3
STAIRCASE_FRACTIONS = "/".join(f"{round(f * 100)}" for f in pacing.STAIRCASE_FRACTIONS) + "%"  # 50/75/90/105%
CPU_RATIO_GOAL = 1.1  # Locust's CPU per call over the plain pool's, at most
# two sides' CPU per call compare only at call rates within this share of each other: a client's CPU
# per call falls as its rate rises (the store groups more calls per round, idle work spreads over
# more calls), so at unequal rates the ratio measures the rates, not the load generator
SAME_RATE_TOLERANCE = 0.10
FIXED_RATE_FRACTION = 0.5  # the fixed-rate pair runs at this share of the lower measured send maximum
# the chat profile's calls/s per loader core: at least CHAT_GOAL_FACTOR times the goal's fixed
# reference (the run the goal was set against, docs/measurements.md; not a figure of any later run)
CHAT_GOAL_BASELINE_CALLS_PER_CORE_SECOND = 439.0
CHAT_GOAL_FACTOR = 2.0


def chat_goal_ms_per_call(baseline_calls_per_core_second: float = CHAT_GOAL_BASELINE_CALLS_PER_CORE_SECOND,
                          factor: float = CHAT_GOAL_FACTOR) -> float:
    """The chat goal as loader CPU per call: at most this many ms (1 s over factor x baseline calls)."""
    return MS_PER_SECOND / (factor * baseline_calls_per_core_second)


@dataclass(frozen=True, kw_only=True)
class LoadBenchParams:
    seconds: float = 15.0
    warmup_seconds: float = 3.0
    concurrency: int = 32
    processes: int = 1
    step_seconds: float = 10.0
    seed_size: str = "small"
    driver: str = "futures"  # the Locust side's store calls (lab.load.plan.DRIVER_MODES; `lab load --driver`)

    @classmethod
    def preset(cls, *, quick: bool) -> LoadBenchParams:
        return cls(seconds=8, warmup_seconds=2, concurrency=16, step_seconds=6, seed_size="tiny") if quick else cls()


@dataclass(frozen=True, kw_only=True)
class ThroughputRun:
    """One side of a comparison: a plain client or a Locust run, closed loop or at a fixed rate."""

    calls: int
    errors: int
    throughput: float                      # calls per second over the measured window
    service_us: LatencySummary
    client_cpu_percent_of_one_core: float | None = None  # plain client: this process
    loadgen_cpu: CpuWindow | None = None   # Locust: its processes
    measured_seconds: float | None = None
    requested_rate: float | None = None    # a fixed-rate side: the rate it was asked for
    audit_ok: bool | None = None
    load_dir: str | None = None

    @property
    def cpu_percent_of_one_core(self) -> float | None:
        if self.load_dir is None:
            return self.client_cpu_percent_of_one_core
        return self.loadgen_cpu.mean_percent_of_one_core if self.loadgen_cpu is not None else None

    @property
    def cpu_ms_per_call(self) -> float | None:
        """The client's CPU over the measured window per call (the plain process, or Locust's)."""
        cpu = self.cpu_percent_of_one_core
        if cpu is None or not self.calls or not self.measured_seconds:
            return None
        return round(cpu / 100 * self.measured_seconds * MS_PER_SECOND / self.calls, 4)

    @property
    def calls_per_core_second(self) -> float | None:
        ms = self.cpu_ms_per_call
        return round(MS_PER_SECOND / ms, 1) if ms else None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"calls": self.calls, "errors": self.errors, "throughput": self.throughput,
                               "service_us": self.service_us.to_json(), "measured_seconds": self.measured_seconds,
                               "cpu_ms_per_call": self.cpu_ms_per_call,
                               "calls_per_core_second": self.calls_per_core_second}
        if self.requested_rate is not None:
            out["requested_rate"] = self.requested_rate
        if self.load_dir is None:
            out["client_cpu_percent_of_one_core"] = self.client_cpu_percent_of_one_core
        else:
            out.update(loadgen_cpu=self.loadgen_cpu.to_json() if self.loadgen_cpu else None, audit_ok=self.audit_ok,
                       load_dir=self.load_dir)
        return out


@dataclass(frozen=True, kw_only=True)
class Staircase:
    """The fixed-rate send steps; a staircase stops after its first loader-bound step (the steps
    above it would measure the load generator), so ``steps`` may be fewer than ``planned_steps``."""

    max_rate: float
    load_dir: str
    audit_ok: bool | None
    steps: tuple[StepSummary, ...]
    planned_steps: int = len(pacing.STAIRCASE_FRACTIONS)
    stopped_at_step: int | None = None     # 1-based: the loader-bound step the run stopped at

    @property
    def lines(self) -> list[str]:
        """One line per step with its verdict (a loader-bound step's latencies are the load
        generator's, so it says so and why), then why the staircase ended early, if it did."""
        out = []
        for st in self.steps:
            cpu = st.loadgen_cpu.mean_percent_of_one_core if st.loadgen_cpu is not None else None
            v = st.verdict
            verdict = ("not judged" if v is None else "valid" if not v.bound else
                       f"{v.verdict.upper()}, not a result: " + "; ".join(r.text for r in v.reasons))
            out.append(f"  requested {units.rate(st.requested_rate):>8} achieved {units.rate(st.achieved_rate):>8}  "
                       f"p99 {units.percentile_ms(st.corrected_us, 'p99')} (service "
                       f"{units.percentile_ms(st.service_us, 'p99')})  load generator CPU {units.fmt(cpu)}% of one "
                       f"core  {verdict}")
        left = self.planned_steps - len(self.steps)
        if self.stopped_at_step is not None and left > 0:
            out.append(f"  stopped at step {self.stopped_at_step} of {self.planned_steps} (loader- or machine-bound): "
                       f"the {left} step(s) above it would measure the load generator or the machine, not the store; "
                       "to go higher give it more load processes (--processes) or load machines")
        return out

    def to_json(self) -> dict[str, Any]:
        return {"max_rate": self.max_rate, "load_dir": self.load_dir, "audit_ok": self.audit_ok,
                "planned_steps": self.planned_steps, "stopped_at_step": self.stopped_at_step,
                "steps": [s.to_json() for s in self.steps]}


@dataclass(frozen=True, kw_only=True)
class OperationCosts:
    """The chat profile under Locust: loader CPU per call and calls/s per loader core, per operation."""

    profile: str
    load_dir: str
    run: ThroughputRun
    operations: Mapping[str, OperationCpu]

    def to_json(self) -> dict[str, Any]:
        return {"profile": self.profile, "load_dir": self.load_dir, "run": self.run.to_json(), "note": APPORTIONED_NOTE,
                "operations": {op: c.to_json() for op, c in self.operations.items()}}


def _same_rate(locust: ThroughputRun | None, plain: ThroughputRun | None) -> bool | None:
    """Did both sides run at call rates within SAME_RATE_TOLERANCE of each other (None: not measured)?"""
    if locust is None or plain is None or not locust.throughput or not plain.throughput:
        return None
    return abs(locust.throughput / plain.throughput - 1) <= SAME_RATE_TOLERANCE


def _cpu_ratio(locust: ThroughputRun | None, plain: ThroughputRun | None) -> float | None:
    if locust is None or plain is None:
        return None
    return a_over_b(locust.cpu_ms_per_call, plain.cpu_ms_per_call, digits=RATIO_DIGITS)


@dataclass(frozen=True, kw_only=True)
class LoadBenchReport:
    run_id: str
    params: LoadBenchParams
    keyspace: str
    environment: Mapping[str, Any]
    plain_send: ThroughputRun
    locust_send: ThroughputRun
    locust_read: ThroughputRun
    plain_read: ThroughputRun
    staircase: Staircase
    plain_send_fixed: ThroughputRun | None = None
    locust_send_fixed: ThroughputRun | None = None
    plain_read_fixed: ThroughputRun | None = None
    locust_read_fixed: ThroughputRun | None = None
    chat: OperationCosts | None = None
    notes: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ratio_send(self) -> float | None:
        """Locust / plain send throughput: 1.0 = the load generator costs nothing."""
        return a_over_b(self.locust_send.throughput, self.plain_send.throughput, digits=RATIO_DIGITS)

    @property
    def ratio_read(self) -> float | None:
        return a_over_b(self.locust_read.throughput, self.plain_read.throughput, digits=RATIO_DIGITS)

    @property
    def cpu_ratios(self) -> dict[str, float | None]:
        """Locust's CPU per call over the plain pool's, same calls and concurrency (goal <= CPU_RATIO_GOAL)."""
        return {"send_max": _cpu_ratio(self.locust_send, self.plain_send),
                "read_max": _cpu_ratio(self.locust_read, self.plain_read),
                "send_fixed_rate": _cpu_ratio(self.locust_send_fixed, self.plain_send_fixed),
                "read_fixed_rate": _cpu_ratio(self.locust_read_fixed, self.plain_read_fixed)}

    @property
    def same_rate(self) -> dict[str, bool | None]:
        """Per CPU ratio: did its two sides run at the same call rate (within SAME_RATE_TOLERANCE)? Only
        those ratios are like for like and judged against the goal."""
        return {"send_max": _same_rate(self.locust_send, self.plain_send),
                "read_max": _same_rate(self.locust_read, self.plain_read),
                "send_fixed_rate": _same_rate(self.locust_send_fixed, self.plain_send_fixed),
                "read_fixed_rate": _same_rate(self.locust_read_fixed, self.plain_read_fixed)}

    @property
    def cpu_goal(self) -> dict[str, Any]:
        """The goal (CPU per call, Locust / plain <= CPU_RATIO_GOAL) judged on the like-for-like
        ratios only: ``met`` is None when no pair ran at the same rate."""
        same = self.same_rate
        judged = {k: r for k, r in self.cpu_ratios.items() if r is not None and same[k]}
        return {"goal": CPU_RATIO_GOAL, "same_rate_tolerance": SAME_RATE_TOLERANCE, "judged_on": judged,
                "met": all(r <= CPU_RATIO_GOAL for r in judged.values()) if judged else None}

    def _unlike(self, key: str, locust: ThroughputRun, plain: ThroughputRun) -> str:
        if self.same_rate[key] is not False:
            return ""
        out = (f" (not like for like: Locust ran at {a_over_b(locust.throughput, plain.throughput, digits=2)}x "
               "the plain client's rate, and CPU per call falls as the rate rises")
        fp = {"send_max": self.plain_send_fixed, "read_max": self.plain_read_fixed}.get(key)
        if fp is not None and fp.cpu_ms_per_call is not None:
            out += (f": the plain client's own {_ms(plain)} at {units.rate(plain.throughput)} vs {_ms(fp)} at "
                    f"{units.rate(fp.throughput)}")
        return out + ")"

    def _goal_line(self) -> str:
        g = self.cpu_goal
        head = (f"  goal (CPU per call, Locust / plain <= {CPU_RATIO_GOAL}) judged on the pairs run at the same rate "
                f"(within {SAME_RATE_TOLERANCE:.0%}): ")
        if g["met"] is None:
            return head + "not judged: no pair ran at the same rate"
        judged = ", ".join(f"{k} {r}" for k, r in g["judged_on"].items())
        return head + f"{judged} -> {'met' if g['met'] else 'NOT met'}"

    @property
    def closing_note(self) -> str:
        ps, ls, pr, lr = self.plain_send, self.locust_send, self.plain_read, self.locust_read
        r = self.cpu_ratios
        lines = [f"lab load (--driver {self.params.driver}) vs a plain driver client, {self.params.concurrency} "
                 "concurrent callers, same node, same run "
                 f"(throughput ratio; client CPU per call, Locust / plain, goal <= {CPU_RATIO_GOAL}; both sides' "
                 f"client GC {(self.environment.get('services') or {}).get('client_gc', 'default')}):",
                 f"  send max: Locust {units.rate(ls.throughput)} vs plain {units.rate(ps.throughput)} -> ratio "
                 f"{self.ratio_send}; CPU per call {_ms(ls)} vs {_ms(ps)} -> {r['send_max']}{self._unlike('send_max', ls, ps)}",
                 f"  read max: Locust {units.rate(lr.throughput)} vs plain {units.rate(pr.throughput)} -> ratio "
                 f"{self.ratio_read}; CPU per call {_ms(lr)} vs {_ms(pr)} -> {r['read_max']}{self._unlike('read_max', lr, pr)}"]
        fl, fp = self.locust_send_fixed, self.plain_send_fixed
        if fl is not None and fp is not None:
            lines.append(f"  send at a fixed {units.rate(fp.requested_rate)}: Locust {units.rate(fl.throughput)} vs plain "
                         f"{units.rate(fp.throughput)}; CPU per call {_ms(fl)} vs {_ms(fp)} -> {r['send_fixed_rate']}"
                         f"{self._unlike('send_fixed_rate', fl, fp)}")
        fl, fp = self.locust_read_fixed, self.plain_read_fixed
        if fl is not None and fp is not None:
            lines.append(f"  read at a fixed {units.rate(fp.requested_rate)}: Locust {units.rate(fl.throughput)} vs plain "
                         f"{units.rate(fp.throughput)}; CPU per call {_ms(fl)} vs {_ms(fp)} -> {r['read_fixed_rate']}"
                         f"{self._unlike('read_fixed_rate', fl, fp)}")
        lines.append(self._goal_line())
        lines.append(f"  calls/s per loader core: send {units.rate(ls.calls_per_core_second)} (plain "
                     f"{units.rate(ps.calls_per_core_second)}), history reads {units.rate(lr.calls_per_core_second)} "
                     f"(plain {units.rate(pr.calls_per_core_second)})")
        if self.chat is not None and self.chat.operations:
            lines.append(f"  {self.chat.profile} profile under Locust: {_ms(self.chat.run)} of loader CPU per call over "
                         "all its calls; per operation (loader CPU per call; calls/s one loader core sustains; the "
                         "caller's CPU measured, the rest apportioned; path thread | future):")
            lines += [f"    {op:<18} {_op_cost(c)}  ({c.calls} calls, {c.path}; caller "
                      f"{units.fmt(c.caller_cpu_ms_per_call)} ms)" for op, c in sorted(self.chat.operations.items())]
            if any(c.loader_cpu_ms_per_call is None for c in self.chat.operations.values()):
                lines.append("    not measured per operation: a future's steps run on the driver's loop thread with "
                             "every call's I/O, which no share in proportion to the callers apportions "
                             "(`--driver threads` prices the thread path per operation)")
        elif self.chat is not None:
            lines.append(f"  {self.chat.profile} profile per operation: not measured (calls started and finished in "
                         "its window differ too much for a CPU per call: run longer)")
        lines.append(f"staircase (send_only, fixed rate, max {units.rate(self.staircase.max_rate)}; p99 corrected for "
                     "coordinated omission, then service time):")
        lines += self.staircase.lines
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        out = {"run_id": self.run_id, "params": asdict(self.params), "keyspace": self.keyspace,
               "environment": dict(self.environment), "plain_send": self.plain_send.to_json(),
               "locust_send": self.locust_send.to_json(), "locust_read": self.locust_read.to_json(),
               "plain_read": self.plain_read.to_json(), "ratio_send": self.ratio_send, "ratio_read": self.ratio_read,
               "cpu_per_call_ratios": self.cpu_ratios, "cpu_ratio_goal": CPU_RATIO_GOAL,
               "cpu_per_call_same_rate": self.same_rate, "cpu_goal": self.cpu_goal,
               "staircase": self.staircase.to_json()}
        if self.plain_send_fixed is not None and self.locust_send_fixed is not None:
            out.update(plain_send_fixed=self.plain_send_fixed.to_json(),
                       locust_send_fixed=self.locust_send_fixed.to_json())
        if self.plain_read_fixed is not None and self.locust_read_fixed is not None:
            out.update(plain_read_fixed=self.plain_read_fixed.to_json(),
                       locust_read_fixed=self.locust_read_fixed.to_json())
        if self.chat is not None:
            out["operation_cpu"] = self.chat.to_json()
        return {**out, "closing_note": self.closing_note}


def _op_cost(c: OperationCpu) -> str:
    if c.loader_cpu_ms_per_call is None:
        return "not measured"
    return f"{units.fmt(c.loader_cpu_ms_per_call)} ms  {units.rate(c.calls_per_loader_core_second)}"


def _ms(run: ThroughputRun) -> str:
    return f"{units.fmt(run.cpu_ms_per_call)} ms"


@dataclass(frozen=True, kw_only=True)
class LoadBenchResult:
    run_dir: Path
    json_path: Path
    report: LoadBenchReport

    @property
    def closing_note(self) -> str:
        return self.report.closing_note
