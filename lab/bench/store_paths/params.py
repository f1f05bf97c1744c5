"""What one store benchmark run measures: :class:`BenchParams` and the CLI's two presets."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from lab.store import DEFAULT_BATCH_CONCURRENCY, DEFAULT_HISTORY_LIMIT


@dataclass(frozen=True, kw_only=True)
class BenchParams:
    """What one run measures. ``preset(quick=...)`` gives the CLI's two sizes."""

    mode: str = "custom"
    # send_throughput
    # measured calls per method: 200 rounds of send_block in a full run. The rounds' send / floor ratios
    # of a quiet run spread with a standard deviation of ~0.24 in log (docs/measurements.md): 25 rounds put
    # the median's 95 % interval at +-10 %; +-5 % (what the verdict needs) takes ~120 rounds in half
    # of the runs and 200 in ~9 of 10 (the bootstrap on draws of that spread); ~5 minutes quiet
    send_ops: int = 16000
    # calls per interleaved block: short rounds (a tenth of a second to a second each), so both blocks
    # of a round see the same machine; a multiple of send_concurrency (every caller busy to the end)
    send_block: int = 80
    send_warmup: int = 100          # calls per method in the discarded warm-up block
    send_concurrency: int = 8       # thread-pool callers
    send_conversations: int = 64    # sends spread round-robin over this many conversations / senders
    body_bytes: int = 200
    # history_latest_page
    history_messages: int = 80      # messages sent into the history conversation first
    history_limit: int = DEFAULT_HISTORY_LIMIT  # page size (the store's default)
    history_ops: int = 1000         # measured calls per method
    history_warmup: int = 50        # discarded calls per method
    # consecutive calls per side in one round of the per-round figure (history_page.paired_rounds): about
    # a tenth of a second, so both sides of a round see the same machine; history_ops is a multiple of it
    history_round_calls: int = 20
    # history_latest_page_cpu: the page's client CPU per call against its driver floor, in interleaved
    # blocks of history_cpu_block calls per side (send_concurrency callers or chains in flight)
    history_cpu_ops: int = 8000
    history_cpu_block: int = 80
    # grouped_vs_naive (S-1 shapes)
    group_backlog: int = 500
    dm_count: int = 20
    dm_backlog: int = 5
    group_repeats: int = 30         # measured calls per method, group shape (naive = group_backlog point reads)
    group_warmup: int = 2           # discarded calls per method, group shape
    dm_repeats: int = 60            # measured calls per method, DM shape
    dm_warmup: int = 3              # discarded calls per method, DM shape
    batch_concurrency: int = DEFAULT_BATCH_CONCURRENCY
    # driver_loops: one prepared read per request, per variant and round (callbacks or coroutines, libev
    # or the driver's asyncio reactor), send_concurrency in flight, the rounds interleaved
    loop_probe_requests: int = 2000
    loop_probe_rounds: int = 20
    flush: bool = True              # flush memtables after seeding, so reads hit SSTables
    seed: int = 0

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.type == "int" and f.name != "seed" and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{f.name} must be an int >= 1, got {value!r}")
        if self.send_ops % self.send_block:
            raise ValueError("send_ops must be a multiple of send_block")
        if self.history_ops % self.history_round_calls:
            raise ValueError("history_ops must be a multiple of history_round_calls")
        if self.history_cpu_ops % self.history_cpu_block:
            raise ValueError("history_cpu_ops must be a multiple of history_cpu_block")
        if self.history_messages < self.history_limit:
            raise ValueError("history_messages must be >= history_limit (a full latest page)")

    @classmethod
    def preset(cls, *, quick: bool) -> BenchParams:
        if not quick:
            return cls(mode="full")
        # sized for a shared 2-core machine: under a minute unless the machine is very busy
        return cls(mode="quick", send_ops=240, send_block=40, send_warmup=24, history_messages=60,
                   history_ops=80, history_warmup=10, history_round_calls=10, history_cpu_ops=240,
                   history_cpu_block=40, group_repeats=3, group_warmup=1,
                   dm_repeats=6, dm_warmup=1, loop_probe_requests=200, loop_probe_rounds=3)

    @property
    def shapes(self) -> dict[str, dict[str, int]]:
        """S-1 shapes: name -> conversations, messages each, measured and warm-up calls."""
        return {f"group_1x{self.group_backlog}": {"conversations": 1, "messages": self.group_backlog,
                                                   "repeats": self.group_repeats, "warmup": self.group_warmup},
                f"dm_{self.dm_count}x{self.dm_backlog}": {"conversations": self.dm_count, "messages": self.dm_backlog,
                                                          "repeats": self.dm_repeats, "warmup": self.dm_warmup}}

    def to_json(self) -> dict:
        return dataclasses.asdict(self)
