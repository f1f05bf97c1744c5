"""What the store benchmark reports: each comparison, the run, and the closing note (prose).

``store.json`` is :meth:`StoreBenchReport.to_json`; the closing note is the short text the
issue's closing comment quotes: per comparison the two sides and their ratio, with the
machine and the commit they were measured on.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from lab.bench.store_paths.driver_loops import driver_loops_line
from lab.bench.store_paths.paired_lines import (asyncio_floor_line, driver_floor_line, history_paired_line,
                                                logged_floor_line, page_paced_floor_line, paced_floor_lines,
                                                paired_line)
from lab.bench.store_paths.params import BenchParams
from lab.bench.store_paths.recording import MethodResult
from lab.errors import BenchError
from lab.measure import PairedRatio, min_samples, too_few

RATIO_DIGITS = 3  # ratios in the report: lab.measure.a_over_b(a, b, digits=RATIO_DIGITS)
LATENCY_UNIT = "µs (HdrHistogram, 3 significant digits; lab.measure.hdr)"
# the goals, printed beside the ratios they bound (the report states them, never enforces them)
SEND_FLOOR_GOAL = 0.9        # send throughput over send_floor_with_head_read's (like for like), at least
HISTORY_FLOOR_GOAL = 1.15    # latest page p50 over history_floor's, at most
GROUPED_RAW_GOAL = 1.5       # grouped 1x500 p50 over its raw fetch, at most
# send (send_async) client CPU per call over send_callback_floor's, and over send_logged_callback_floor's, at most
CALLBACK_SEND_GOAL = 1.3
CALLBACK_PAGE_GOAL = 1.2     # latest page (history_async) client CPU per call over history_callback_floor's, at most
NOT_JUDGED = "not judged"    # a goal's verdict when the per-round figure is not vouched for


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """One store path against its bare floor: two methods, measured alike, and their ratios."""

    description: str
    concurrency: str
    order: str
    methods: Mapping[str, MethodResult]
    ratio: Mapping[str, float | None]     # named "<a>_over_<b>_<what>"
    shape: str | None = None              # grouped vs naive: the S-1 shape, its entries and groups
    entries: int | None = None
    groups: int | None = None
    # send, latest page: per-round ratios (send_throughput.paired_rounds, history_page.paired_rounds)
    paired_rounds: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"description": self.description}
        if self.shape is not None:
            out.update(shape=self.shape, entries=self.entries, groups=self.groups)
        out = {**out, "concurrency": self.concurrency, "order": self.order,
               "methods": {n: m.to_json() for n, m in self.methods.items()}, "ratio": dict(self.ratio)}
        if self.paired_rounds is not None:
            out["paired_rounds"] = dict(self.paired_rounds)
        return out


@dataclass(frozen=True, kw_only=True)
class StoreBenchReport:
    run_id: str
    started_at: str
    finished_at: str
    wall_seconds: float
    keyspace: str
    keyspace_dropped: bool
    environment: Mapping[str, Any]
    params: BenchParams
    flushed_before_reads: bool | str          # True, False (not asked) or "failed: <why>"
    timings_seconds: Mapping[str, float]
    store_alerts: Mapping[str, Any]
    comparisons: Mapping[str, Comparison]
    notes: Mapping[str, Any] = field(default_factory=dict)
    driver_loops: Mapping[str, Any] | None = None  # lab.bench.store_paths.driver_loops

    @property
    def closing_note(self) -> str:
        return closing_note(self)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "store-bench", "run_id": self.run_id, "started_at": self.started_at,
                "finished_at": self.finished_at, "wall_seconds": self.wall_seconds, "keyspace": self.keyspace,
                "keyspace_dropped": self.keyspace_dropped, "environment": dict(self.environment),
                "parameters": {**self.params.to_json(), "shapes": self.params.shapes,
                               "flushed_before_reads": self.flushed_before_reads},
                "timings_seconds": dict(self.timings_seconds), "latency_unit": LATENCY_UNIT,
                "store_alerts": dict(self.store_alerts),
                "comparisons": {k: c.to_json() for k, c in self.comparisons.items()},
                "driver_loops": None if self.driver_loops is None else dict(self.driver_loops),
                "closing_note": self.closing_note}


def _fmt(x: Any, unit: str = "") -> str:
    if x is None:
        return "n/a"
    return f"{x:,.0f}{unit}" if isinstance(x, (int, float)) and abs(x) >= 100 else f"{x}{unit}"


def _n(m: MethodResult) -> str:
    few = too_few(99, m.count)
    return f"n={m.count} calls per side" + (f" ({few}: it needs {min_samples(99):,})" if few else "")


def _p99(m: MethodResult) -> str:
    """The p99 in µs, or "too few" when fewer calls than lab.measure's rule stand behind it."""
    return "too few" if too_few(99, m.count) else _fmt(m.latency_us.p99)


def _x99(ratio: Any, *sides: MethodResult) -> str:
    """A ratio of two p99s, or "—" when either p99 is not reported."""
    return "—" if any(too_few(99, m.count) for m in sides) else f"{ratio}x"


def paired_goal(ratio: str, r: PairedRatio, *, limit: float, at_least: bool) -> dict[str, Any]:
    """store.json's ``paired_rounds.goal``: the per-round ratio ``ratio`` against ``limit``, judged
    only when the run vouches for it (else :data:`NOT_JUDGED`)."""
    return {"ratio": ratio, ("at_least" if at_least else "at_most"): limit, "vouched": r.vouched(),
            "verdict": r.against(limit, at_least=at_least) if r.vouched() else NOT_JUDGED}


def driver_goals(cpu_ratios: Mapping[str, PairedRatio], goals: Mapping[str, str], *, limit: float) -> dict[str, Any]:
    """store.json's driver-floor goals: per ``goal_key: ratio_key`` of ``goals``, the per-round CPU ratio
    ``ratio_key`` of ``cpu_ratios`` against ``limit`` (at most, :func:`paired_goal`); a goal whose ratio
    was not taken (its floor did not run) is left out."""
    return {key: paired_goal(ratio, cpu_ratios[ratio], limit=limit, at_least=False)
            for key, ratio in goals.items() if ratio in cpu_ratios}


def paired_ratios_json(ratios: Mapping[str, PairedRatio]) -> dict[str, Any]:
    """Each per-round ratio as store.json holds it: its figures and whether the run vouches for it."""
    return {key: r.to_json(RATIO_DIGITS) | {"vouched": r.vouched()} for key, r in ratios.items()}


Ratio = float | None   # a_over_b gives None when a side has no figure; the note prints it as is


def _ratio(ratio: Mapping[str, Any], key: str, comparison: str) -> Ratio:
    """``ratio[key]``, a number or None; a missing or non-numeric entry is a :class:`BenchError`."""
    if key not in ratio:
        raise BenchError(f"store bench comparison {comparison!r} has no ratio {key!r}",
                         comparison=comparison, field=key)
    value = ratio[key]
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise BenchError(f"store bench comparison {comparison!r}: ratio {key!r} is {value!r}, not a number",
                         comparison=comparison, field=key, value=value)
    return value


@dataclass(frozen=True, kw_only=True)
class SendRatios:
    """send_throughput's ratios; a floor's are None when that floor did not run."""

    over_bare_throughput: Ratio
    bare_over_send_throughput: Ratio
    over_floor_with_head_read_throughput: Ratio = None
    over_floor_with_head_read_p50_latency: Ratio = None
    over_floor_throughput: Ratio = None
    floor_with_head_read_over_floor_throughput: Ratio = None
    over_floor_p50_latency: Ratio = None
    over_floor_p99_latency: Ratio = None
    over_floor_without_outbox_throughput: Ratio = None
    floor_over_floor_without_outbox_throughput: Ratio = None

    @classmethod
    def parse(cls, comp: Comparison, name: str = "send_throughput") -> SendRatios:
        def get(key: str) -> Ratio:
            return _ratio(comp.ratio, key, name)
        has = comp.methods.__contains__
        out: dict[str, Ratio] = {"over_bare_throughput": get("send_over_bare_throughput"),
                                 "bare_over_send_throughput": get("bare_over_send_throughput")}
        if has("send_floor_with_head_read"):
            out |= {"over_floor_with_head_read_throughput": get("send_over_floor_with_head_read_throughput"),
                    "over_floor_with_head_read_p50_latency": get("send_over_floor_with_head_read_p50_latency")}
        if has("send_floor"):
            out |= {"over_floor_throughput": get("send_over_floor_throughput"),
                    "over_floor_p50_latency": get("send_over_floor_p50_latency"),
                    "over_floor_p99_latency": get("send_over_floor_p99_latency")}
            if has("send_floor_with_head_read"):
                out["floor_with_head_read_over_floor_throughput"] = get("floor_with_head_read_over_floor_throughput")
        if has("send_floor_without_outbox"):
            out |= {"over_floor_without_outbox_throughput": get("send_over_floor_without_outbox_throughput"),
                    "floor_over_floor_without_outbox_throughput": get("floor_over_floor_without_outbox_throughput")}
        return cls(**out)


@dataclass(frozen=True, kw_only=True)
class HistoryRatios:
    """history_latest_page's ratios; the floor's are None when history_floor did not run."""

    over_bare_p50: Ratio
    over_bare_p99: Ratio
    over_floor_p50: Ratio = None
    over_floor_p99: Ratio = None

    @classmethod
    def parse(cls, comp: Comparison, name: str = "history_latest_page") -> HistoryRatios:
        def get(key: str) -> Ratio:
            return _ratio(comp.ratio, key, name)
        floor = ({"over_floor_p50": get("history_over_floor_p50"), "over_floor_p99": get("history_over_floor_p99")}
                 if "history_floor" in comp.methods else {})
        return cls(over_bare_p50=get("history_over_bare_p50"), over_bare_p99=get("history_over_bare_p99"), **floor)


@dataclass(frozen=True, kw_only=True)
class GroupedRatios:
    """A grouped-vs-naive shape's ratios; the raw fetch's are None when it did not run."""

    naive_over_grouped_message_record_requests: Ratio
    naive_over_grouped_p50: Ratio
    naive_over_grouped_p99: Ratio
    grouped_over_raw_fetch_p50: Ratio = None
    grouped_over_raw_fetch_p99: Ratio = None

    @classmethod
    def parse(cls, comp: Comparison, name: str) -> GroupedRatios:
        keys = ["naive_over_grouped_message_record_requests", "naive_over_grouped_p50", "naive_over_grouped_p99"]
        if "raw_fetch" in comp.methods:
            keys += ["grouped_over_raw_fetch_p50", "grouped_over_raw_fetch_p99"]
        return cls(**{k: _ratio(comp.ratio, k, name) for k in keys})


def _header(report: StoreBenchReport) -> str:
    env = report.environment
    return (
        f"Store benchmark {report.run_id} ({report.params.mode}): {env.get('server')} "
        f"{env.get('server_version')}, {env.get('nodes')} node(s), {env['machine']['cpus']} CPUs (load average "
        f"{env.get('loadavg_at_start')} -> {env.get('loadavg_at_end')}), commit {str(env.get('git_commit'))[:10]}"
        f"{' + uncommitted changes' if env.get('git_dirty') else ''}; client GC {env.get('client_gc', 'default')}; row decode "
        f"{env['machine'].get('row_decode', 'not recorded')}.")


class DriverFloor(NamedTuple):
    """One driver floor's goal line (paired_lines.driver_floor_line): the floor's side, the goal's
    entry in ``paired_rounds``, the floor's name in the ratio keys, what the line calls it, what it runs."""

    callback: str
    goal_key: str
    floor_key: str
    label: str
    what: str


# the send's driver floors, each against send_async (and send, and the blocking floor), in the note's order
SEND_DRIVER_FLOORS = (
    DriverFloor("send_callback_floor", "callback_goal", "callback_floor", "driver floor",
                "send_floor_with_head_read's statements without the outbox append, chained through the driver's "
                "callbacks from one thread"),
    DriverFloor("send_logged_callback_floor", "logged_callback_goal", "logged_callback_floor",
                "driver floor with the outbox append",
                "send_callback_floor plus the durable outbox append where the send makes it, between record + index "
                "and COMMITTED: a local outbox of its own (SQLite, group commit, fsync) through append_async, the "
                "chain going on from the append's future; no sealing, no head writer"),
    DriverFloor("send_callback_floor_at_send_rate", "paced_callback_goal", "paced_callback_floor",
                "driver floor at the send's rate",
                "send_callback_floor's statements started at the rate send_async's last block issued its sends, "
                "at most as many in flight: the statements-only floor at the send's own rate"),
    DriverFloor("send_callback_floor_at_send_rate_on_loop", "loop_paced_callback_goal", "loop_paced_callback_floor",
                "driver floor at the send's rate, started on the loop",
                "the same chains at the same rate, each started by the driver's loop on its timer, where "
                "send_async's next send starts, instead of from the calling thread"))
# the latest page's, each against history_async (and history, and history_floor)
PAGE_DRIVER_FLOORS = (
    DriverFloor("history_callback_floor", "callback_goal", "callback_floor", "driver floor",
                "head + bucket read together through the driver's callbacks, rows counted, not decoded; every side "
                "with the send's callers in flight"),
    DriverFloor("history_callback_floor_at_page_rate", "paced_callback_goal", "paced_callback_floor",
                "driver floor at the page's rate",
                "history_callback_floor's statements started at the rate history_async's last block made its pages, "
                "each chain by the driver's loop on its timer, at most as many in flight: the driver floor at the "
                "page's own rate"))


def _driver_floor_lines(pr: Mapping[str, Any], floors: tuple[DriverFloor, ...], *, path: str, side: str,
                        blocking: str, also: tuple[str, ...]) -> list[str]:
    """Each of ``floors``' goal lines the run has, in order: ``path``'s ``side`` against the floor."""
    lines = (driver_floor_line(pr, path=path, side=side, blocking=blocking, also=also, callback=f.callback,
                               goal_key=f.goal_key, floor_key=f.floor_key, label=f.label, what=f.what)
             for f in floors)
    return [x for x in lines if x is not None]


def _send_lines(s: Comparison) -> list[str]:
    r = SendRatios.parse(s)
    f, b = s.methods["send"], s.methods["bare_lwt_insert"]
    fl, fh = s.methods.get("send_floor"), s.methods.get("send_floor_with_head_read")
    fn = s.methods.get("send_floor_without_outbox")
    lines = [
        f"- Send: full write path {_fmt(f.throughput_ops_per_s)} sends/s vs bare LWT inserts "
        f"{_fmt(b.throughput_ops_per_s)}/s -> {r.over_bare_throughput}x "
        f"(the bare LWT is {r.bare_over_send_throughput}x faster); ack p50/p99 "
        f"{_fmt(f.latency_us.p50)}/{_p99(f)} µs vs {_fmt(b.latency_us.p50)}/{_p99(b)} µs "
        f"({f.requests_per_op} vs {b.requests_per_op} CQL requests per send; ack-only "
        f"{_fmt(f.ack_only_throughput_ops_per_s)} sends/s before the head drain; {_n(f)})."]
    if fh is not None:
        lines.append(
            f"- Send vs its own steps raw, like for like (send_floor_with_head_read: fencing read on a conversation's "
            f"first send, dedup LWT, record + index together, the durable outbox append, COMMITTED, head read, head "
            f"write): {_fmt(f.throughput_ops_per_s)} vs {_fmt(fh.throughput_ops_per_s)} sends/s -> "
            f"{r.over_floor_with_head_read_throughput}x over the run's totals (goal >= {SEND_FLOOR_GOAL}, "
            f"judged on the paired rounds below); ack p50 "
            f"{_fmt(f.latency_us.p50)} vs {_fmt(fh.latency_us.p50)} µs "
            f"({r.over_floor_with_head_read_p50_latency}x); {f.requests_per_op} vs "
            f"{fh.requests_per_op} CQL requests per send.")
    if s.paired_rounds is not None:
        lines.append(paired_line(s.paired_rounds))
        lines += _driver_floor_lines(s.paired_rounds, SEND_DRIVER_FLOORS, path="Send", side="send_async",
                                     blocking="send_floor_with_head_read", also=("send",))
        lines += [x for x in (logged_floor_line(s.paired_rounds), asyncio_floor_line(s.paired_rounds)) if x is not None]
        lines += paced_floor_lines(s.paired_rounds)
    if fl is not None:
        lines.append(
            f"- Send vs its own steps raw without the head reads (send_floor: dedup LWT, record + index together, the "
            f"durable outbox append, COMMITTED, head write): {_fmt(f.throughput_ops_per_s)} vs "
            f"{_fmt(fl.throughput_ops_per_s)} sends/s -> {r.over_floor_throughput}x"
            + (f"; the head and fencing reads cost the floor "
               f"{r.floor_with_head_read_over_floor_throughput}x of its throughput" if fh is not None else "")
            + f"; ack p50/p99 "
            f"{_fmt(f.latency_us.p50)}/{_p99(f)} vs {_fmt(fl.latency_us.p50)}/{_p99(fl)} "
            f"µs ({r.over_floor_p50_latency}x / {_x99(r.over_floor_p99_latency, f, fl)}); "
            f"{f.requests_per_op} vs {fl.requests_per_op} CQL requests per send.")
    if fn is not None:
        lines.append(
            f"- Send vs its statements alone (send_floor_without_outbox, the floor without the outbox append): "
            f"{_fmt(f.throughput_ops_per_s)} vs {_fmt(fn.throughput_ops_per_s)} sends/s -> "
            f"{r.over_floor_without_outbox_throughput}x; the outbox append costs the floor "
            f"{r.floor_over_floor_without_outbox_throughput}x of its throughput.")
    return lines


def _history_lines(h: Comparison, history_limit: int) -> list[str]:
    r = HistoryRatios.parse(h)
    hh, hb, hf = h.methods["history"], h.methods["bare_select"], h.methods.get("history_floor")
    lines = [
        f"- Latest history page ({history_limit} messages): p50 "
        f"{_fmt(hh.latency_us.p50)} µs / p99 {_p99(hh)} µs vs bare SELECT "
        f"{_fmt(hb.latency_us.p50)} / {_p99(hb)} µs -> "
        f"{r.over_bare_p50}x at p50, {_x99(r.over_bare_p99, hh, hb)} at p99 "
        f"({hh.requests_per_op} vs {hb.requests_per_op} requests; {_n(hh)})."]
    if hf is not None:
        lines.append(
            f"- Latest page vs its own statements raw (history_floor: head + bucket together, not decoded): p50 "
            f"{_fmt(hh.latency_us.p50)} vs {_fmt(hf.latency_us.p50)} µs ({r.over_floor_p50}x, goal <= "
            f"{HISTORY_FLOOR_GOAL}), p99 "
            f"{_p99(hh)} vs {_p99(hf)} µs ({_x99(r.over_floor_p99, hh, hf)})"
            + ("." if h.paired_rounds is None else "; the goal is judged on the paired rounds below."))
    if h.paired_rounds is not None:
        lines.append(history_paired_line(h.paired_rounds))
    return lines


def _grouped_lines(name: str, comp: Comparison) -> list[str]:
    r = GroupedRatios.parse(comp, name)
    g, n, raw = comp.methods["grouped"], comp.methods["naive_point_reads"], comp.methods.get("raw_fetch")
    lines = [
        f"- Grouped vs naive, {comp.shape} ({comp.entries} entries, {comp.groups} groups): "
        f"message_record requests {g.message_record_requests_per_op:g} vs "
        f"{n.message_record_requests_per_op:g} ({r.naive_over_grouped_message_record_requests}x; all CQL "
        f"{g.requests_per_op:g} vs {n.requests_per_op:g} with the grouped side's summaries); p50 "
        f"{_fmt(g.latency_us.p50)} vs {_fmt(n.latency_us.p50)} µs ({r.naive_over_grouped_p50}x), p99 "
        f"{_p99(g)} vs {_p99(n)} µs ({_x99(r.naive_over_grouped_p99, g, n)}); {_n(g)}."]
    if raw is not None:
        lines.append(
            f"- Grouped vs its own statements fetched raw (not decoded), {comp.shape}: p50 {_fmt(g.latency_us.p50)} "
            f"vs {_fmt(raw.latency_us.p50)} µs ({r.grouped_over_raw_fetch_p50}x, goal <= {GROUPED_RAW_GOAL}), "
            f"p99 {_p99(g)} vs {_p99(raw)} µs ({_x99(r.grouped_over_raw_fetch_p99, g, raw)}).")
    return lines


def closing_note(report: StoreBenchReport) -> str:
    """The note: the run's header, then per comparison its sides and typed ratios (a missing ratio is a BenchError)."""
    c = report.comparisons
    lines = [_header(report), *_send_lines(c["send_throughput"]),
             *_history_lines(c["history_latest_page"], report.params.history_limit)]
    hc = c.get("history_latest_page_cpu")
    if hc is not None and hc.paired_rounds is not None:
        lines += _driver_floor_lines(hc.paired_rounds, PAGE_DRIVER_FLOORS, path="Latest page", side="history_async",
                                     blocking="history_floor", also=("history",))
        rate = page_paced_floor_line(hc.paired_rounds)
        lines += [] if rate is None else [rate]
    for name, comp in c.items():
        if comp.shape is not None:
            lines += _grouped_lines(name, comp)
    loops = driver_loops_line(report.driver_loops)
    return "\n".join(lines + ([loops] if loops else []))
