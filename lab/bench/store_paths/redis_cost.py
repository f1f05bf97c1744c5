"""What the hot window's put costs, beside how long it waits: Redis's own time and CPU per put and
this process's CPU per put, one caller and ``concurrency`` callers (``lab bench store
--outboxes``). Measures, asserts nothing.

More: docs/bench-internals.md.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lab.bench.store_paths.bench_report import RATIO_DIGITS
from lab.measure import a_over_b, now_ns
from lab.measure.process_cpu import CpuMeter
from lab.measure.timing import NS_PER_SECOND, US_PER_SECOND

__all__ = ["COST_FIGURES", "PING_COMMANDS", "PUT_COMMANDS", "HotWindowCost", "PhaseCost", "ServerSnapshot",
           "costed", "phase_cost"]

# what a phase issues. A put is one EVALSHA of the hot window's script (lab.store.hot: its script
# rounds pack one EVALSHA per put; SCRIPT LOAD after NOSCRIPT), which runs the inner commands
PUT_COMMANDS = ("evalsha", ("evalsha", "script|load", "zrangebyscore", "zrem", "zadd", "pexpire", "zrange"))
PING_COMMANDS = ("ping", ("ping",))
# any phase: the snapshot's own INFO, and a new connection's handshake (a pool grows under callers)
_ALWAYS_OWN = frozenset({"info", "hello", "client|setinfo", "select", "auth"})
_US_DIGITS = 2
# the cost figures compared, callers over one caller (each within the goal)
COST_FIGURES = ("command_us_per_call", "server_cpu_us_per_op", "client_cpu_us_per_op")
_SERVER_CPU = "server_cpu_us_per_op"
MET, NOT_MET, NOT_JUDGED, NOT_MEETABLE = "met", "NOT met", "not judged", "not meetable on this machine"


@dataclass(frozen=True, kw_only=True)
class ServerSnapshot:
    """The server's cumulative counters at one moment: per command (commandstats) and CPU seconds."""

    calls: Mapping[str, int]
    failed_calls: Mapping[str, int]
    usec: Mapping[str, int]
    cpu_seconds: float

    @classmethod
    def from_info(cls, info: Mapping[str, Any]) -> ServerSnapshot:
        """From redis-py's parsed ``INFO commandstats cpu`` (``cmdstat_<command>`` -> fields)."""
        stats = {k.removeprefix("cmdstat_"): v for k, v in info.items() if k.startswith("cmdstat_")}
        return cls(calls={c: int(s["calls"]) for c, s in stats.items()},
                   failed_calls={c: int(s.get("failed_calls", 0)) for c, s in stats.items()},
                   usec={c: int(s["usec"]) for c, s in stats.items()},
                   cpu_seconds=float(info["used_cpu_user"]) + float(info["used_cpu_sys"]))

    @classmethod
    def read(cls, client: Any) -> ServerSnapshot:
        """One ``INFO commandstats cpu`` of a redis-py client."""
        return cls.from_info(client.info("commandstats", "cpu"))


@dataclass(frozen=True, kw_only=True)
class PhaseCost:
    """One phase's cost: ``ops`` calls of ``command`` in ``rounds`` round trips."""

    command: str
    ops: int
    rounds: int
    calls: int               # the command's calls during the phase, every client's (NOSCRIPT replays included)
    failed_calls: int
    command_usec: int        # µs inside Redis running those calls
    other_calls: int         # calls the phase did not make (see the module docstring)
    server_cpu_seconds: float
    client_cpu_seconds: float
    wall_seconds: float

    @property
    def command_us_per_call(self) -> float | None:
        return a_over_b(self.command_usec, self.calls, digits=_US_DIGITS)

    @property
    def server_cpu_us_per_op(self) -> float | None:
        return a_over_b(self.server_cpu_seconds * US_PER_SECOND, self.ops, digits=_US_DIGITS)

    @property
    def server_cpu_us_per_round(self) -> float | None:
        return a_over_b(self.server_cpu_seconds * US_PER_SECOND, self.rounds, digits=_US_DIGITS)

    @property
    def client_cpu_us_per_op(self) -> float | None:
        return a_over_b(self.client_cpu_seconds * US_PER_SECOND, self.ops, digits=_US_DIGITS)

    @property
    def ops_per_round(self) -> float | None:
        return a_over_b(self.ops, self.rounds, digits=RATIO_DIGITS)

    @property
    def quiet(self) -> bool:
        """No other client's call seen: the server's CPU is this phase's alone (as far as Redis can tell)."""
        return self.other_calls == 0

    def to_json(self) -> dict[str, Any]:
        return {"command": self.command, "ops": self.ops, "rounds": self.rounds, "ops_per_round": self.ops_per_round,
                "calls": self.calls, "failed_calls": self.failed_calls, "command_usec": self.command_usec,
                "other_calls": self.other_calls, "quiet": self.quiet,
                "server_cpu_seconds": round(self.server_cpu_seconds, 6),
                "client_cpu_seconds": round(self.client_cpu_seconds, 6), "wall_seconds": round(self.wall_seconds, 4),
                "command_us_per_call": self.command_us_per_call, "server_cpu_us_per_op": self.server_cpu_us_per_op,
                "server_cpu_us_per_round": self.server_cpu_us_per_round,
                "client_cpu_us_per_op": self.client_cpu_us_per_op}


def phase_cost(before: ServerSnapshot, after: ServerSnapshot, *, commands: tuple[str, Iterable[str]], ops: int,
               rounds: int, client_cpu_seconds: float, wall_seconds: float) -> PhaseCost:
    """The difference of two snapshots around a phase of ``ops`` calls of ``commands[0]`` (whose
    own commands, inner ones included, are ``commands[1]``) in ``rounds`` round trips."""
    command, own = commands[0], _ALWAYS_OWN | set(commands[1])

    def delta(counter: str, name: str) -> int:
        return getattr(after, counter).get(name, 0) - getattr(before, counter).get(name, 0)

    calls, failed = delta("calls", command), delta("failed_calls", command)
    others = sum(delta("calls", c) for c in after.calls if c not in own)
    return PhaseCost(command=command, ops=ops, rounds=rounds, calls=calls, failed_calls=failed,
                     command_usec=delta("usec", command), other_calls=max(0, calls - failed - ops) + others,
                     server_cpu_seconds=after.cpu_seconds - before.cpu_seconds,
                     client_cpu_seconds=client_cpu_seconds, wall_seconds=wall_seconds)


def costed(client: Any, commands: tuple[str, Iterable[str]], phase: Callable[[], Any], *, ops: int,
           rounds: Callable[[], int] | None = None) -> tuple[Any, PhaseCost]:
    """Run ``phase`` (``ops`` calls) between two snapshots of the server behind ``client`` and
    this process's CPU clock; ``rounds`` counts the round trips so far (None: one per call)."""
    rounds_before = rounds() if rounds else 0
    before = ServerSnapshot.read(client)
    cpu, t0 = CpuMeter(), now_ns()
    out = phase()
    wall, used = (now_ns() - t0) / NS_PER_SECOND, cpu.stop()
    after = ServerSnapshot.read(client)
    n_rounds = rounds() - rounds_before if rounds else ops
    return out, phase_cost(before, after, commands=commands, ops=ops, rounds=n_rounds,
                           client_cpu_seconds=used.cpu_seconds, wall_seconds=wall)


def _ratio(many: float | None, one: float | None) -> float | None:
    return a_over_b(many, one, digits=RATIO_DIGITS) if many and one and many > 0 and one > 0 else None


@dataclass(frozen=True, kw_only=True)
class HotWindowCost:
    """The put's cost per put under ``concurrency`` callers over one caller's, beside the PING
    control's and the two latency ratios (p50, callers over one caller) of the same phases."""

    concurrency: int
    limit: float
    put_one: PhaseCost
    put_callers: PhaseCost
    ping_one: PhaseCost
    ping_callers: PhaseCost
    put_p50_ratio: float | None
    ping_p50_ratio: float | None
    loadavg: Sequence[float] | None = None  # 1, 5, 15 min when the phases ended

    @property
    def ratios(self) -> dict[str, dict[str, float | None]]:
        return {name: {f: _ratio(getattr(many, f), getattr(one, f)) for f in (*COST_FIGURES, "server_cpu_us_per_round")}
                for name, one, many in (("put", self.put_one, self.put_callers),
                                        ("ping", self.ping_one, self.ping_callers))}

    @property
    def goal(self) -> dict[str, Any]:
        """Latency: met, NOT met, or not meetable on this machine (the PING control's own ratio is
        over the limit too). Cost: every judged ratio within the limit (the server's CPU judged
        only when neither phase saw another client's calls); not judged when one is missing."""
        put, ping = self.put_p50_ratio, self.ping_p50_ratio
        if put is None:
            latency = NOT_JUDGED
        elif put <= self.limit:
            latency = MET
        else:
            latency = NOT_MEETABLE if ping is not None and ping > self.limit else NOT_MET
        quiet = self.put_one.quiet and self.put_callers.quiet
        judged = {f: r for f, r in self.ratios["put"].items() if f in COST_FIGURES and (f != _SERVER_CPU or quiet)}
        if any(r is None for r in judged.values()):
            cost = NOT_JUDGED
        else:
            cost = MET if all(r <= self.limit for r in judged.values()) else NOT_MET
        return {"limit": self.limit, "latency": {"put_p50": put, "ping_p50": ping, "verdict": latency},
                "cost": {"judged": judged, "server_cpu_judged": quiet, "verdict": cost}}

    def to_json(self) -> dict[str, Any]:
        return {"concurrency": self.concurrency, "loadavg": None if self.loadavg is None else list(self.loadavg),
                "phases": {"put_one_caller": self.put_one.to_json(), "put_callers": self.put_callers.to_json(),
                           "ping_one_caller": self.ping_one.to_json(), "ping_callers": self.ping_callers.to_json()},
                "ratios": self.ratios, "goal": self.goal}

    def lines(self) -> list[str]:
        n, r, goal = self.concurrency, self.ratios, self.goal
        one, many = self.put_one, self.put_callers

        def pair(a: float | None, b: float | None, ratio: float | None) -> str:
            return f"{a} -> {b} µs ({ratio}x)" if ratio is not None else f"{a} -> {b} µs"

        ping1, pingn = self.ping_one, self.ping_callers
        cost = goal["cost"]
        return [
            f"  hot window cost per put, one caller -> {n} callers (the puts alone; Redis INFO diffed, this process's "
            f"CPU clock):",
            f"    Redis {one.command.upper()} time per put "
            f"{pair(one.command_us_per_call, many.command_us_per_call, r['put']['command_us_per_call'])}; Redis CPU "
            f"per put {pair(one.server_cpu_us_per_op, many.server_cpu_us_per_op, r['put']['server_cpu_us_per_op'])}, "
            f"per round {pair(one.server_cpu_us_per_round, many.server_cpu_us_per_round, r['put']['server_cpu_us_per_round'])} "
            f"({one.ops_per_round} -> {many.ops_per_round} puts per round); this process's CPU per put "
            f"{pair(one.client_cpu_us_per_op, many.client_cpu_us_per_op, r['put']['client_cpu_us_per_op'])}",
            f"    control PING: Redis time per call "
            f"{pair(ping1.command_us_per_call, pingn.command_us_per_call, r['ping']['command_us_per_call'])}; Redis CPU "
            f"per call {pair(ping1.server_cpu_us_per_op, pingn.server_cpu_us_per_op, r['ping']['server_cpu_us_per_op'])}; "
            f"this process's CPU per call "
            f"{pair(ping1.client_cpu_us_per_op, pingn.client_cpu_us_per_op, r['ping']['client_cpu_us_per_op'])}",
            f"    other clients' calls seen on the shared Redis (put 1, put {n}, PING 1, PING {n}): "
            f"{one.other_calls} / {many.other_calls} / {ping1.other_calls} / {pingn.other_calls}"
            + ("" if cost["server_cpu_judged"] else ": the Redis CPU per put is not the puts' alone, not judged")
            + (f"; load average {' / '.join(str(x) for x in self.loadavg)}" if self.loadavg else ""),
            f"  goal ({n} callers within {self.limit}x of one caller): latency p50 put "
            f"{self.put_p50_ratio}x, PING control {self.ping_p50_ratio}x -> {goal['latency']['verdict']}"
            + (" (a bare round trip inflates past the limit too)" if goal['latency']['verdict'] == NOT_MEETABLE else "")
            + "; cost per put " + ", ".join(f"{_LABELS[f]} {x}x" for f, x in cost["judged"].items())
            + f" -> {cost['verdict']}"]


_LABELS = {"command_us_per_call": "Redis time", "server_cpu_us_per_op": "Redis CPU",
           "client_cpu_us_per_op": "this process's CPU"}
