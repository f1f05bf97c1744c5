"""The loader's samples by layer (driver, lab.cluster, store, Locust and gevent, load runtime, other):
a pure function over py-spy's collapsed stacks, and the table ``lab bench load --profile`` prints.

More: docs/bench-internals.md.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lab.bench.store_paths.profiling import frame_location, short_path
from lab.measure.timing import MS_PER_SECOND
from lab.results import units

DRIVER = "driver"
CLUSTER = "lab.cluster"
STORE = "store"
LOCUST = "locust+gevent"
LOAD = "load runtime"
OTHER = "other"
LAYERS = (DRIVER, CLUSTER, STORE, LOCUST, LOAD, OTHER)  # the table's row order
LAYER_TEXT = {DRIVER: "the Python driver (cassandra/*, and the lab's lines that call its compiled modules)",
              CLUSTER: "lab/cluster/* (the session wrapper, accounting, row factory) but those lines",
              STORE: "lab/store/* but those lines",
              LOCUST: "Locust and gevent (locust/*, gevent/*, greenlet, zmq)",
              LOAD: "the lab's load runtime (lab/load/*, loadgen/*, lab/measure/*: its latency recorders)",
              OTHER: "stacks with no frame of a layer above (thread-pool and thread plumbing)"}

# Top-level packages (the first part of py-spy's short path) that are a layer of their own; any other
# frame (the standard library, lab.measure, cryptography, psutil, ...) takes its nearest caller's layer.
_PACKAGE_LAYERS = {"cassandra": DRIVER, "locust": LOCUST, "gevent": LOCUST, "greenlet": LOCUST, "zmq": LOCUST,
                   "loadgen": LOAD}
# lab.measure is the load runtime's on the worker: its latency recorders and clocks (the store's and
# the session's hot paths do not use it)
_LAB_LAYERS = {"cluster": CLUSTER, "store": STORE, "load": LOAD, "measure": LOAD}

# The lines of the lab's own modules that call into the driver's Cython-compiled modules (cluster,
# query, connection, protocol: py-spy sees no frame inside them, so their time is the calling
# line's self time): (module, a text each such line holds). A line holding the text is a driver line.
DRIVER_CALL_SITES: tuple[tuple[str, str], ...] = (
    ("lab/cluster/connection.py", "self.session."),            # execute, execute_async, prepare
    ("lab/cluster/connection.py", "self.cluster."),
    ("lab/cluster/connection.py", ".prepared.bind("),          # BoundStatement
    ("lab/cluster/connection.py", "future.add_callbacks("),    # ResponseFuture
    ("lab/cluster/connection.py", "future.clear_callbacks("),
    ("lab/cluster/connection.py", "ResultSet("),
    ("lab/cluster/connection.py", "BatchStatement("),
    ("lab/cluster/connection.py", "batch.add("),
    ("lab/cluster/connection.py", "SimpleStatement("),
    ("lab/store/plumbing/steps.py", "response.add_callbacks("),
    ("lab/store/plumbing/steps.py", "response.has_more_pages"),
    ("lab/store/plumbing/steps.py", "response.start_fetching_next_page("),
)
CALL_SITE_MODULES = frozenset(m for m, _ in DRIVER_CALL_SITES)

def shorten(collapsed: str) -> str:
    """Collapsed stacks recorded with ``--full-filenames``, each frame's file shortened (short_path)."""
    out = []
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        frames = []
        for frame in stack.split(";"):
            name = frame.partition(" (")[0] if " (" in frame else ""
            file, line_no = frame_location(frame)
            frames.append(f"{name} ({short_path(file)}{'' if line_no is None else f':{line_no}'})" if name else frame)
        out.append(f"{';'.join(frames)} {count}")
    return "\n".join(out) + ("\n" if out else "")


def driver_lines(module: str, source: str) -> frozenset[int]:
    """The lines of ``module``'s source (1-based) that call the driver's compiled modules (DRIVER_CALL_SITES)."""
    texts = [t for m, t in DRIVER_CALL_SITES if m == module]
    return frozenset(n for n, line in enumerate(source.splitlines(), 1)
                     if not line.lstrip().startswith("#") and any(t in line for t in texts))


def frame_layer(file: str, line: int | None, call_sites: Mapping[str, frozenset[int]]) -> str | None:
    """The layer of one frame (short path), None for a frame that is no layer's (it takes its caller's)."""
    if line is not None and line in call_sites.get(file, ()):
        return DRIVER
    top, _, rest = file.partition("/")
    if top == "lab":
        return _LAB_LAYERS.get(rest.partition("/")[0])
    return _PACKAGE_LAYERS.get(top.removesuffix(".py"))


def stack_layer(stack: str, call_sites: Mapping[str, frozenset[int]]) -> str:
    """The layer a sample's self time goes to: its innermost frame's, or (a frame of no layer:
    the standard library, lab.measure, a third-party library) its nearest caller's that has one;
    OTHER when none has. A lab frame at a driver line (``call_sites``) is the driver's."""
    for frame in reversed(stack.split(";")):
        layer = frame_layer(*frame_location(frame), call_sites)
        if layer is not None:
            return layer
    return OTHER


def layer_samples(collapsed: Iterable[str], call_sites: Mapping[str, frozenset[int]]) -> dict[str, int]:
    """Samples per layer (every layer of LAYERS, in order) over collapsed stack lines
    (``frame;frame;... <count>``); a line without a count is skipped."""
    out = dict.fromkeys(LAYERS, 0)
    for line in collapsed:
        stack, _, count = line.strip().rpartition(" ")
        if stack and count.isdigit():
            out[stack_layer(stack, call_sites)] += int(count)
    return out


@dataclass(frozen=True, kw_only=True)
class LayerTable:
    """One view's samples per layer, priced with the run's loader CPU per call.

    ``ms_per_call`` is each layer's share times the loader CPU per call: it assumes the CPU spent
    outside what the view samples (without the GIL, in the kernel) splits as the samples do.
    ``sampled_ms_per_call`` is what was sampled itself, per call at the run's call rate: samples /
    rate / seconds / calls per second (GIL view: the layer's GIL-held time per call, wall clock)."""

    view: str                      # "gil" | "threads"
    samples: Mapping[str, int]
    sample_rate_hz: int
    seconds: float                 # the recorded window
    calls_per_second: float        # the run's, over its measured window
    loader_cpu_ms_per_call: float | None

    @property
    def total(self) -> int:
        return sum(self.samples.values())

    def share(self, layer: str) -> float | None:
        return self.samples[layer] / self.total if self.total else None

    def ms_per_call(self, layer: str) -> float | None:
        share = self.share(layer)
        return None if share is None or self.loader_cpu_ms_per_call is None else share * self.loader_cpu_ms_per_call

    def sampled_ms_per_call(self, layer: str) -> float | None:
        if not self.calls_per_second or not self.seconds:
            return None
        return MS_PER_SECOND * self.samples[layer] / self.sample_rate_hz / self.seconds / self.calls_per_second

    @property
    def held_fraction(self) -> float | None:
        """Samples over the ticks the window had (rate x seconds): the GIL view's share of the
        window the GIL was held; the threads view's mean busy threads. py-spy may tick fewer times
        on a busy machine (it logs its lag), which makes this low."""
        ticks = self.sample_rate_hz * self.seconds
        return self.total / ticks if ticks else None

    def markdown(self) -> str:
        head = {"gil": "GIL holder (share of the worker's GIL-held time)",
                "threads": "every busy thread (share of the on-CPU thread samples)"}[self.view]
        lines = [f"### {head}: {self.total:,} samples", "",
                 "| layer | samples | share | ms per call (share x loader CPU per call) | sampled ms per call |",
                 "|---|---:|---:|---:|---:|"]
        for layer in LAYERS:
            lines.append(f"| {layer} | {self.samples[layer]:,} | {units.percent(self.share(layer))} "
                         f"| {units.fmt(self.ms_per_call(layer))} | {units.fmt(self.sampled_ms_per_call(layer))} |")
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        return {"view": self.view, "samples": dict(self.samples), "total": self.total,
                "sample_rate_hz": self.sample_rate_hz, "seconds": self.seconds,
                "calls_per_second": self.calls_per_second,
                "held_fraction": self.held_fraction, "loader_cpu_ms_per_call": self.loader_cpu_ms_per_call,
                "share": {k: self.share(k) for k in LAYERS}, "ms_per_call": {k: self.ms_per_call(k) for k in LAYERS},
                "sampled_ms_per_call": {k: self.sampled_ms_per_call(k) for k in LAYERS}}


def goal_verdict(driver_ms_per_call: float | None, target_ms_per_call: float) -> str:
    """Could the loader reach ``target_ms_per_call`` were every layer but the driver free?"""
    if driver_ms_per_call is None:
        return "not judged: no loader CPU per call or no samples"
    if driver_ms_per_call > target_ms_per_call:
        return (f"NOT reachable on this driver: the driver alone costs {units.fmt(driver_ms_per_call)} ms per call, "
                f"over the {units.fmt(target_ms_per_call)} ms target, even were every other layer free")
    return (f"reachable only in principle: the driver's {units.fmt(driver_ms_per_call)} ms per call leaves "
            f"{units.fmt(target_ms_per_call - driver_ms_per_call)} ms of the {units.fmt(target_ms_per_call)} ms "
            "target for every other layer")
