"""The text ``lab load`` prints at the end: the summary's fields in human units, each number
labelled with what it is (corrected vs service latency, seed vs measured sends)."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from lab.measure import SUMMARY_PERCENTILES, min_samples, too_few
from lab.results import units

CORRECTED_NOTE = ("latency: 'corrected' counts from each call's due time (coordinated omission corrected: "
                  "a late call's wait is included); 'service' from its actual start")
CLOSED_LOOP_NOTE = ("latency: service time (closed loop: each user waits for its call, so no coordinated-omission "
                    "correction applies; use --rate for latency under a fixed offered load)")


def _plural(n: int, word: str) -> str:
    return f"{units.count(n)} {word}{'' if n == 1 else 'es' if word.endswith('s') else 's'}"


def _headline(s: Any) -> str:
    rate = f"{units.rate(s.achieved_rate, ' calls/s')} achieved"
    if s.requested_rate:
        rate += (f" of {units.rate(s.requested_rate, ' calls/s')} requested "
                 f"({units.percent(s.achieved_over_requested)})")
    window = f"measured {units.seconds(s.measured_seconds)}"
    if s.warmup_seconds:
        window += f" after a {units.seconds(s.warmup_seconds)} warmup"
    return (f"{s.mode} {s.profile}: {_plural(s.users, 'user')}, {_plural(s.processes, 'process')}; "
            f"{rate}; {window}")


def _table(rows: list[list[str]], right: set[int]) -> Iterator[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        yield "  " + "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))


def _latency(summary: Any, key: str, few: list[tuple[int, float, str]], op: str) -> str:
    """A percentile in ms, or "too few" when too few calls stand behind it (lab.measure)."""
    if key == "max":
        return units.ms(summary.max)
    text = units.percentile_ms(summary, key)
    if text == units.TOO_FEW:
        few.append((summary.count, -SUMMARY_PERCENTILES[key], op))
    return text


def too_few_line(few: list[tuple[int, float, str]]) -> Iterator[str]:
    """One line for every "too few" cell: the most calls that were still too few, and the rule."""
    if few:
        n, p, op = max(few)
        why = too_few(-p, n)
        yield (f"  {units.TOO_FEW}: {why} ({op}, the most calls among them); a tail percentile is shown from 10 "
               f"calls beyond it: p99 from {min_samples(99):,} calls, p99.9 from {min_samples(99.9):,}")


def operations_lines(s: Any) -> Iterator[str]:
    fixed = any(o.corrected_us is not None for o in s.operations.values())
    yield "  " + (CORRECTED_NOTE if fixed else CLOSED_LOOP_NOTE)
    head = ["operation", "calls", "outcomes", "errors", "p50", "p99", "p99.9", "max"]
    if fixed:
        head = head[:4] + ["corrected p50", "p99", "p99.9", "max", "service p50", "p99"]
    rows, few = [head], []
    for op, o in s.operations.items():
        lat = o.corrected_us if fixed and o.corrected_us is not None else o.service_us
        row = [op, units.count(o.count), units.count(sum(o.outcomes.values())), units.count(o.errors),
               *(_latency(lat, k, few, op) for k in ("p50", "p99", "p999", "max"))]
        if fixed:
            row += [_latency(o.service_us, "p50", few, op), _latency(o.service_us, "p99", few, op)]
        rows.append(row)
    yield from _table(rows, right=set(range(1, len(head))))
    yield from too_few_line(few)
    errors: dict[str, int] = {}
    outcomes: dict[str, int] = {}
    for op, o in s.operations.items():
        for t, n in o.errors_by_type.items():
            errors[t] = errors.get(t, 0) + n
        for kind, n in o.outcomes.items():
            outcomes[f"{op}: {kind}"] = n
    if errors:
        yield "  errors by type: " + ", ".join(f"{t} {units.count(n)}" for t, n in sorted(errors.items()))
    if outcomes:
        yield ("  outcomes (answers the design defines, not failures): "
               + ", ".join(f"{k} {units.count(n)}" for k, n in sorted(outcomes.items())))


def operation_cpu_lines(s: Any) -> Iterator[str]:
    """Loader CPU per call and calls/s per loader core, per operation (lab.load.operation_cpu)."""
    costs = {op: c for op, c in s.operation_cpu.items() if c.loader_cpu_ms_per_call is not None}
    if not costs:
        return
    yield ("  loader CPU per call (the calling thread's measured, the process's other CPU apportioned) and calls/s "
           "one loader core sustains:")
    yield "    " + ", ".join(f"{op} {units.fmt(c.loader_cpu_ms_per_call)} ms ({units.rate(c.calls_per_loader_core_second)})"
                             for op, c in costs.items())


def _step_cpu(st: Any) -> str:
    """The busiest load process's CPU over the step, % of its core: what the verdict judges
    against its limit (all processes summed read "78% of a core" beside a valid verdict)."""
    per = dict(st.verdict.loader_cpu_percent_of_core) if st.verdict is not None else {}
    if per:
        top = max(per.values())
        return f"{units.fmt(top)}%" + (f" (busiest of {len(per)})" if len(per) > 1 else "")
    cpu = st.loadgen_cpu.mean_percent_of_one_core if st.loadgen_cpu is not None else None
    return f"{units.fmt(cpu)}% (all processes)" if cpu is not None else units.MISSING


def steps_lines(s: Any) -> Iterator[str]:
    if not s.steps:
        return
    rows = [["step", "requested", "achieved", "corrected p99", "service p99", "loader CPU, % of its core", "verdict"]]
    few: list[tuple[int, float, str]] = []
    n = 0
    for st in s.steps:
        n += 0 if st.warmup else 1
        name = "the warmup step" if st.warmup else f"step {n}"
        rows.append(["warmup" if st.warmup else str(n), units.rate(st.requested_rate),
                     units.rate(st.achieved_rate), _latency(st.corrected_us, "p99", few, name),
                     _latency(st.service_us, "p99", few, name),
                     _step_cpu(st), st.verdict.verdict if st.verdict is not None else ""])
    yield "  staircase:"
    yield from _table(rows, right={1, 2, 3, 4, 5})
    yield from too_few_line(few)
    if s.staircase_stopped_at_step:
        yield (f"  the staircase stopped at step {s.staircase_stopped_at_step}, loader-bound: the store's capacity "
               "was not reached (the steps above it would have measured the load generator)")


def acks_line(s: Any) -> str:
    a = s.acks
    parts = [f"{units.count(a.measured)} measured"]
    if a.prior:
        parts.insert(0, f"{units.count(a.prior)} prior (earlier loads of this run id)")
    parts.insert(1 if a.prior else 0, f"{units.count(a.seed)} seed (before Locust started)")
    if a.warmup:
        parts.append(f"{units.count(a.warmup)} warmup")
    if a.after:
        parts.append(f"{units.count(a.after)} after the end")
    replays = (f"; {units.count(a.replayed)} retr{'y' if a.replayed == 1 else 'ies'} answered from client_dedup "
               "(replays)") if a.replayed else ""
    return f"  acknowledged sends: {units.count(a.total_new)} = " + " + ".join(parts) + replays


def audit_line(audit: Any) -> str:
    verdict = "ok" if audit.ok else "FAILED"
    log = getattr(audit, "log", None)
    return (f"  audit {verdict}: {units.count(audit.acked)} acknowledged sends read back (seed and prior included), "
            f"{units.count(audit.found)} found; lost {units.count(audit.lost)}, duplicates "
            f"{units.count(audit.duplicates)}, replay mismatches {units.count(audit.replay_mismatches)}"
            + (f"; against the {log.outbox} outbox: {units.count(log.checked)} checked, missing "
               f"{units.count(log.missing)}, logged twice {units.count(log.duplicated)}" if log is not None else ""))


def services_line(s: Any) -> str | None:
    """The outbox and hot window the run's stores used."""
    services = getattr(s, "services", None) or {}
    if not services:
        return None
    return (f"  stores: outbox {services.get('outbox')}, hot window {services.get('hot_window')}"
            + (" (archiver mode)" if services.get("archiver_mode") else "")
            + (f"; load processes' client GC {services['client_gc']}" if services.get("client_gc") else ""))


def verdict_lines(s: Any, *, allowed: bool = False, exit_code: int = 3) -> Iterator[str]:
    """The verdict in one block, last: valid, or loader-bound with each reason and what to do."""
    v = s.verdict
    if v is None:
        return
    if not v.bound:
        lim = v.limits
        facts = [f"every load process under {units.fmt(lim.max_loader_cpu_percent_of_core)}% of its core"]
        if s.achieved_over_requested is not None:
            facts.append(f"{units.percent(s.achieved_over_requested)} of the requested rate")
        if v.lag is not None and v.lag.mean_ms is not None:
            facts.append(f"schedule lag {units.fmt(v.lag.mean_ms)} ms on average, not growing")
        yield "verdict: valid (" + "; ".join(facts) + "): these latencies are the store's"
        for note in v.notes:
            yield f"  note: {note}"
        return
    yield ("verdict: LOADER-BOUND: these latencies are the load generator's, not the store's" if v.loader_bound else
           "verdict: MACHINE-BOUND: the node and the load generator shared this machine's cores to the limit; "
           "these latencies are the machine's, not the store's capacity")
    for r in v.reasons:
        yield f"  - {r.text}"
    advice = (s.sizing or {}).get("advice")
    if advice:
        yield f"  {advice}"
    yield ("  (exit 0: --allow-loader-bound)" if allowed
           else f"  exit {exit_code}; `lab compare` refuses this run (--force compares it anyway); "
                "--allow-loader-bound exits 0")


def summary_lines(s: Any) -> Iterator[str]:
    yield _headline(s)
    yield from operations_lines(s)
    yield from steps_lines(s)
    late = s.in_flight_at_end
    if late is not None and late.count:
        calls = "1 call" if late.count == 1 else f"{units.count(late.count)} calls"
        yield (f"  in flight at the end: {calls} finished after the measured window "
               "(not counted as achieved, nor in the latencies above)")
    cpu = s.verdict.loader_cpu_percent_of_core if s.verdict is not None else {}
    if cpu:
        per = ", ".join(f"{w} {units.fmt(v, 2)}%" for w, v in sorted(cpu.items()))
        per_call = (f"; {units.fmt(s.loader_cpu_ms_per_call)} ms of loader CPU per call"
                    if s.loader_cpu_ms_per_call else "")
        yield f"  load generator CPU over the measured window, % of each process's core: {per}{per_call}"
    not_measured = (s.sizing or {}).get("not_measured")
    if not_measured:
        yield f"  {not_measured}"
    yield from operation_cpu_lines(s)
    line = services_line(s)
    if line is not None:
        yield line
    if getattr(s, "rtt_us", 0):
        proxy = getattr(s, "proxy_cpu", None)
        cpu = (f"; the proxies used {units.fmt(proxy.mean_percent_of_one_core)}% of one core on this machine"
               if proxy is not None and proxy.samples else "")
        yield (f"  network: an emulated round trip of {units.fmt(s.rtt_us / 1000)} ms added by a latency proxy "
               f"in front of each load process's connection (--rtt){cpu}")
    for w in s.workers:
        m = w.machine or {}
        if m:
            wcpu = (m.get("loadgen_cpu") or {}).get("mean_percent_of_one_core")
            offset = m.get("clock_offset_seconds")
            yield (f"  {w.worker} on {m.get('host')}: {units.count(w.acks)} acks"
                   + (f", clock offset to the master {offset:+.3f} s" if offset is not None else "")
                   + f", load generator CPU {units.fmt(wcpu)}% of one core")
    yield acks_line(s)
    if s.audit is not None:
        yield audit_line(s.audit)
