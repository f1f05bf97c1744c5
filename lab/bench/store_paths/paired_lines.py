"""The closing note's per-round lines: each paired ratio (lab.measure.paired_ratio) with its
range, its interval and the goal's verdict, or said plainly not to be a result; store.json's
``paired_rounds`` is what they read.

More: docs/bench-internals.md.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lab.measure import percentile
from lab.measure.stats import MIN_INTERVAL_ROUNDS

__all__ = ["asyncio_floor_line", "blocking_key", "driver_floor_line", "history_paired_line", "logged_floor_line",
           "median_ms", "paired_line", "_range"]


def _range(r: Mapping[str, Any]) -> str:
    return f"median {r['median']}x (range {r['low']}-{r['high']}x)"


def _judged(head: str, r: Mapping[str, Any], goal: Mapping[str, Any], goal_text: str, vouch_rel_half_width: float,
            tail: str) -> str:
    """A per-round ratio's figure with its interval and the goal's verdict, or said plainly not to be a result."""
    if r["median"] is None:
        return head + "not measured (no round had both sides)."
    if r["ci_low"] is None:
        return (head + f"{_range(r)}, too few rounds for an interval (it needs {MIN_INTERVAL_ROUNDS}) -> NOT VOUCHED "
                f"FOR, not a result: neither the figure nor the {goal_text} (more rounds)." + tail)
    spread = f"{_range(r)}, the median's 95% interval {r['ci_low']}-{r['ci_high']}x (±{100 * r['rel_half_width']:.1f}%)"
    if not goal["vouched"]:
        return (head + f"{spread} -> NOT VOUCHED FOR, not a result: the run cannot pin the ratio within "
                f"±{100 * vouch_rel_half_width:.0f}% (more rounds or a quieter machine), so the {goal_text} is "
                f"not judged." + tail)
    good, bad = ("at or above", "below") if "at_least" in goal else ("at or below", "above")
    verdict = {"met": f"{goal_text}: met (the whole interval is {good} it)",
               "not met": f"{goal_text}: not met (the whole interval is {bad} it)"}.get(
        goal["verdict"], f"{goal_text}: undecided (the interval straddles it)")
    return head + f"{spread} -> {verdict}." + tail


def paired_line(pr: Mapping[str, Any]) -> str:
    """The send vs its like-for-like floor, from the per-round ratios (send_throughput.paired_rounds):
    the figure to quote, or said plainly not to be one."""
    goal = pr["goal"]
    r = pr["ratios"][goal["ratio"]]
    head = (f"- Send / like-for-like floor over {r['rounds']} paired rounds ({pr['block_calls']} calls per side and "
            f"round, the two blocks back to back, the order reversed every round): ")
    others = pr["ratios"]
    cpu = pr.get("cpu_ratios", {}).get(goal["ratio"].replace("_throughput", "_cpu_per_call"))
    tail = (f" Per round too: send / send_floor {_range(others['send_over_floor_throughput'])}, send_floor / "
            f"send_floor_without_outbox {_range(others['floor_over_floor_without_outbox_throughput'])}"
            + ("" if cpu is None or cpu["median"] is None else
               f"; this process's CPU per call, send / like-for-like floor {_range(cpu)}"
               + ("" if cpu.get("vouched", True) else ", NOT VOUCHED FOR (its interval is wider than "
                  f"±{pr['vouch_rel_half_width']:.0%})")) + ".")
    return _judged(head, r, goal, f"goal >= {goal['at_least']}", pr["vouch_rel_half_width"], tail)


def history_paired_line(pr: Mapping[str, Any]) -> str:
    """The latest page vs its own statements raw, from the per-round p50 ratios (history_page.paired_rounds):
    the figure to quote, or said plainly not to be one."""
    goal = pr["goal"]
    r = pr["ratios"][goal["ratio"]]
    head = (f"- Latest page p50 / history_floor p50 over {r['rounds']} paired rounds ({pr['round_calls']} calls per "
            f"side and round, the sides' calls alternating): ")
    bare = pr["ratios"].get("history_over_bare_p50")
    tail = "" if bare is None or bare["median"] is None else f" Per round too: page / bare SELECT {_range(bare)}."
    return _judged(head, r, goal, f"goal <= {goal['at_most']}", pr["vouch_rel_half_width"], tail)


def median_ms(xs: Any) -> float | None:
    """The median (p50, nearest rank) of a side's per-round CPU ms per call (rounds without a figure
    left out)."""
    xs = [x for x in xs or () if x is not None]
    return round(percentile(xs, 50), 3) if xs else None


def driver_floor_line(pr: Mapping[str, Any], *, path: str, side: str, blocking: str, callback: str,
                      what: str, also: tuple[str, ...] = (), goal_key: str = "callback_goal",
                      floor_key: str = "callback_floor", label: str = "driver floor") -> str | None:
    """A path's client CPU per call against a driver floor (callback_floors): each side's median ms
    per call, the ratio with its interval and the goal's verdict; None when the run has no such floor.
    ``goal_key``: the goal's entry in ``pr``; ``floor_key``: the floor's name in the ratio keys
    (``<blocking>_over_<floor_key>_cpu_per_call``); ``label``: what the line calls the floor."""
    goal = pr.get(goal_key)
    if goal is None:
        return None
    r = pr["cpu_ratios"][goal["ratio"]]
    cpu = pr["cpu_ms_per_call_by_round"]
    head = (f"- {path} client CPU / {label} ({callback}: {what}) over {r['rounds']} paired rounds "
            f"({pr['block_calls']} calls per side and round): ")
    blocking_ratio = pr["cpu_ratios"].get(f"{blocking_key(blocking)}_over_{floor_key}_cpu_per_call")
    others = "".join(f", {name} {median_ms(cpu.get(name))} ms" for name in also if name in cpu)
    tail = (f" Client CPU per call, median over the rounds: {side} {median_ms(cpu.get(side))} ms{others}, {blocking} "
            f"(blocking threads) {median_ms(cpu.get(blocking))} ms, {callback} {median_ms(cpu.get(callback))} ms"
            + ("" if blocking_ratio is None or blocking_ratio["median"] is None else
               f"; blocking floor / {label} {_range(blocking_ratio)}") + ".")
    return _judged(head, r, goal, f"goal <= {goal['at_most']}", pr["vouch_rel_half_width"], tail)


def _floor_over_floor(pr: Mapping[str, Any], key: str, a: str, b: str, head: str, unit: str = "send") -> str | None:
    """Floor ``a`` against floor ``b`` in client CPU per ``unit`` (``cpu_ratios[key]``, per round): each
    one's median ms, the rounds' median ratio, its range and interval; None when the run has no such ratio."""
    r = pr.get("cpu_ratios", {}).get(key)
    if r is None or r["median"] is None:
        return None
    cpu = pr["cpu_ms_per_call_by_round"]
    return (f"- {head} over {r['rounds']} paired rounds: client CPU per {unit} {median_ms(cpu.get(a))} vs "
            f"{median_ms(cpu.get(b))} ms, {_range(r)}" + ("" if r["ci_low"] is None else
                                                          f", the median's 95% interval {r['ci_low']}-{r['ci_high']}x")
            + ("" if r.get("vouched", True) else ", NOT VOUCHED FOR (its interval is wider than "
               f"±{pr['vouch_rel_half_width']:.0%})") + ".")


def asyncio_floor_line(pr: Mapping[str, Any]) -> str | None:
    """The driver floor through asyncio against the callback-chained one (client CPU per send): the
    price of handing each answer to an asyncio loop, for choosing the store's event-driven core."""
    return _floor_over_floor(pr, "asyncio_floor_over_callback_floor_cpu_per_call", "send_asyncio_floor",
                             "send_callback_floor",
                             "Send driver floor, asyncio / callbacks (the same statements as coroutines on one "
                             "asyncio loop, each answer handed to it, against the callback chain)")


def logged_floor_line(pr: Mapping[str, Any]) -> str | None:
    """The driver floor with the durable outbox append against the one without (client CPU per send):
    what the append alone costs a send on the driver's event loop."""
    return _floor_over_floor(pr, "logged_floor_over_callback_floor_cpu_per_call", "send_logged_callback_floor",
                             "send_callback_floor",
                             "Send driver floor, with the outbox append / without (send_logged_callback_floor "
                             "against send_callback_floor: the local outbox's append_async, its group commit and "
                             "fsync, alone)")


def paced_floor_lines(pr: Mapping[str, Any]) -> list[str]:
    """The driver floor started at the send's own rate against the same floor run as fast as it ends,
    and the floor with the append against it: how much of what the append seems to cost is the
    slower rate it leaves the chain at (client CPU per call falls as the rate rises). Then that first
    ratio in its two parts, each a figure, no goal: where a paced chain starts (the calling thread
    against the driver's loop, at equal rates) and the rate alone (the loop-started floor against
    the free-running one)."""
    lines = [_floor_over_floor(pr, "paced_floor_over_callback_floor_cpu_per_call", "send_callback_floor_at_send_rate",
                               "send_callback_floor",
                               "Send driver floor at send_async's rate / as fast as it ends "
                               "(send_callback_floor_at_send_rate against send_callback_floor: the same statements, "
                               "started at the rate send_async's last block issued its sends)"),
             _floor_over_floor(pr, "logged_floor_over_paced_callback_floor_cpu_per_call",
                               "send_logged_callback_floor", "send_callback_floor_at_send_rate",
                               "Send driver floor with the outbox append / without it at send_async's rate "
                               "(send_logged_callback_floor against send_callback_floor_at_send_rate)"),
             _floor_over_floor(pr, "paced_floor_over_loop_paced_floor_cpu_per_call", "send_callback_floor_at_send_rate",
                               "send_callback_floor_at_send_rate_on_loop",
                               "Send driver floor at send_async's rate, started from the calling thread / on the "
                               "driver's loop (send_callback_floor_at_send_rate against "
                               "send_callback_floor_at_send_rate_on_loop, equal rates: what starting each chain on a "
                               "sleeping thread, its first request waking the driver's loop, costs)"),
             _floor_over_floor(pr, "loop_paced_floor_over_callback_floor_cpu_per_call",
                               "send_callback_floor_at_send_rate_on_loop", "send_callback_floor",
                               "Send driver floor at send_async's rate started on the driver's loop / as fast as it "
                               "ends (send_callback_floor_at_send_rate_on_loop against send_callback_floor: the rate "
                               "alone, fewer answers per wake-up of the loop)")]
    return [line for line in lines if line is not None]


def page_paced_floor_line(pr: Mapping[str, Any]) -> str | None:
    """The page's driver floor started at history_async's rate against the same floor run as fast as
    it ends: what the rate alone costs the page's statements."""
    return _floor_over_floor(pr, "paced_floor_over_callback_floor_cpu_per_call", "history_callback_floor_at_page_rate",
                             "history_callback_floor",
                             "Latest page driver floor at history_async's rate / as fast as it ends "
                             "(history_callback_floor_at_page_rate against history_callback_floor: the same "
                             "statements, started at the rate history_async's last block made its pages)", unit="page")


def blocking_key(name: str) -> str:
    """A blocking floor's name in the ratio keys (send_floor_with_head_read -> floor_with_head_read)."""
    return name.removeprefix("send_")
