"""``lab bench load --profile``: the chat profile's Locust worker(s) under py-spy over the measured
window, and the loader's CPU by layer (lab.bench.loader_layers) against the chat goal.

More: docs/bench-internals.md.
"""
from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.bench import loader_layers
from lab.bench.load_generator import chat_options, locust_figures
from lab.bench.load_generator_report import (
    CHAT_GOAL_BASELINE_CALLS_PER_CORE_SECOND,
    CHAT_GOAL_FACTOR,
    LoadBenchParams,
    ThroughputRun,
    chat_goal_ms_per_call,
)
from lab.bench.loader_layers import DRIVER, LAYERS, LayerTable
from lab.bench.store_paths import flamegraph
from lab.bench.store_paths.profiling import SAMPLE_RATE_HZ, frame_location, pyspy_path, short_path, top
from lab.cluster.config import ClusterConfig
from lab.cluster.connection import connect
from lab.cluster.services import ServicesConfig
from lab.errors import BenchError, ConfigError
from lab.load.plan import published_t0, ready_dir
from lab.load.runner import run_load
from lab.measure.timing import wall_seconds
from lab.project import RESULTS_DIR
from lab.results import units
from lab.results.jsonio import write_json
from lab.results.run_folders import new_run_dir
from lab.results.scratch import scratch_keyspace

PROFILE_DIR = "profile-load"
JSON_FILE = "profile-load.json"
LAYERS_FILE = "layers.md"
LOAD_SUBDIR = "load-chat-profile"
KEYSPACE_PREFIX = "benchprof"
STEM = "chat"
# view, file suffix, py-spy's flags: the GIL holder, and every thread py-spy sees running
VIEWS = (("gil", ".gil", ("--gil",)), ("threads", "", ()))
# not pausing the worker per sample (--nonblocking) keeps the profiler's cost out of the worker's
# CPU, the figure the layers are priced with; full file names find the source a driver line is in
PYSPY_FLAGS = ("--nonblocking", "--full-filenames")
T0_POLL_SECONDS = 0.1


@dataclass(frozen=True, kw_only=True)
class LoaderProfileParams:
    """The chat load (lab bench load's parameters), py-spy's rate and the goal it is judged on."""

    load: LoadBenchParams = field(default_factory=LoadBenchParams)
    sample_rate_hz: int = SAMPLE_RATE_HZ
    goal_baseline_calls_per_core_second: float = CHAT_GOAL_BASELINE_CALLS_PER_CORE_SECOND
    goal_factor: float = CHAT_GOAL_FACTOR

    def __post_init__(self) -> None:
        if self.sample_rate_hz <= 0 or self.goal_baseline_calls_per_core_second <= 0 or self.goal_factor <= 0:
            raise ConfigError("the sample rate, the goal's baseline and its factor must be positive",
                              field="sample_rate_hz")
        if self.load.seconds < 1:  # py-spy samples whole seconds
            raise ConfigError(f"a profiled load measures at least 1 s, got {self.load.seconds:g}", field="seconds")

    @classmethod
    def preset(cls, *, quick: bool, seconds: float | None = None, **changes: Any) -> LoaderProfileParams:
        load = LoadBenchParams.preset(quick=quick)
        if seconds is not None:
            load = dataclasses.replace(load, seconds=seconds)
        return cls(load=load, **changes)

    @property
    def record_seconds(self) -> int:
        """py-spy's window: the measured window's whole seconds, from its start (inside it)."""
        return max(1, int(self.load.seconds))

    @property
    def target_ms_per_call(self) -> float:
        return chat_goal_ms_per_call(self.goal_baseline_calls_per_core_second, self.goal_factor)


@dataclass(frozen=True, kw_only=True)
class LoaderProfileResult:
    run_dir: Path
    out_dir: Path
    params: LoaderProfileParams
    run: ThroughputRun                 # the profiled load's own figures (its summary.json)
    tables: Mapping[str, LayerTable]   # view -> its samples by layer
    call_sites: Mapping[str, tuple[int, ...]]  # module -> its driver lines, as the worker ran them
    workers: int
    keyspace: str                      # the scratch keyspace the load ran in (dropped at its end)
    files: tuple[Path, ...] = ()
    pyspy_notes: tuple[str, ...] = ()  # per recording: its samples, unreadable stacks, lag behind its rate

    @property
    def driver_ms_per_call(self) -> float | None:
        """The driver's loader CPU per call: its share of the GIL-held time x the run's loader CPU per call."""
        return self.tables["gil"].ms_per_call(DRIVER)

    @property
    def verdict(self) -> str:
        return loader_layers.goal_verdict(self.driver_ms_per_call, self.params.target_ms_per_call)

    def _goal(self) -> str:
        p = self.params
        return (f">= {units.fmt(p.goal_factor * p.goal_baseline_calls_per_core_second)} calls/s per loader core "
                f"({p.goal_factor:g}x {p.goal_baseline_calls_per_core_second:g}), i.e. <= "
                f"{units.fmt(p.target_ms_per_call)} ms of loader CPU per call")

    @property
    def closing_note(self) -> str:
        load, gil = self.params.load, self.tables["gil"]
        lines = [f"chat profile under py-spy: {load.concurrency} users, --driver {load.driver}, {self.workers} "
                 f"worker(s), {self.params.record_seconds} s sampled at {self.params.sample_rate_hz}/s inside the "
                 f"{load.seconds:g} s measured window; in {self.out_dir}",
                 f"  the load's own figure: {units.fmt(self.run.cpu_ms_per_call)} ms of loader CPU per call "
                 f"({units.rate(self.run.calls_per_core_second)} per loader core, {self.run.calls:,} calls at "
                 f"{units.rate(self.run.throughput)})"]
        for view, table in self.tables.items():
            shares = ", ".join(f"{layer} {units.percent(table.share(layer))} ({units.fmt(table.ms_per_call(layer))} ms)"
                               for layer in LAYERS)
            lines.append(f"  {'GIL holder' if view == 'gil' else 'every busy thread'} by layer (share; x loader CPU "
                         f"per call): {shares}")
        each = f" (summed over the {self.workers} workers, each with its GIL)" if self.workers > 1 else ""
        lines += [f"  the GIL was held in {units.percent(gil.held_fraction)} of the window's ticks{each}; the loader's CPU "
                  f"was {units.fmt(self.run.cpu_percent_of_one_core)}% of one core. A share is of the worker's "
                  "GIL-held time: the wall time a thread held the GIL, running Python code or the driver's compiled "
                  "code called from it, or waiting for a core while holding it (on a busy machine the held time "
                  "exceeds the CPU time). CPU without the GIL (socket calls, the kernel) is outside it. The ms per "
                  "call price each share with the load's own loader CPU per call"
                  + (" (the Locust master's included)" if self.workers > 1 else "")
                  + ", assuming that CPU splits as the GIL time does",
                  f"  goal {self._goal()}: {self.verdict}"]
        lines += [f"  py-spy: {note}" for note in self.pyspy_notes]
        lines.append(f"  read {LAYERS_FILE} first; flame graphs {STEM}.gil.svg (GIL holder) and {STEM}.svg (every "
                     "busy thread)")
        return "\n".join(lines)

    def markdown(self) -> str:
        sites = "; ".join(f"{m}: lines {', '.join(map(str, lines)) or 'none sampled'}"
                          for m, lines in sorted(self.call_sites.items())) or "none sampled"
        out = [f"# Loader CPU by layer: the chat profile under py-spy ({self.run_dir.name})", "",
               "```", self.closing_note, "```", "", "Layers (a sample goes to its innermost frame's layer; a "
               "frame of no layer, as the standard library's, to its nearest caller's):", ""]
        out += [f"- {layer}: {loader_layers.LAYER_TEXT[layer]}" for layer in LAYERS]
        out += ["", f"Driver lines, in the modules the samples name (the compiled driver's time is their self "
                f"time): {sites}", ""]
        out += [t.markdown() for t in self.tables.values()]
        return "\n".join(out)

    def to_json(self) -> dict[str, Any]:
        p = self.params
        return {"run_id": self.run_dir.name, "params": dataclasses.asdict(p), "workers": self.workers,
                "keyspace": self.keyspace, "load_dir": str(self.run.load_dir),
                "record_seconds": p.record_seconds, "run": self.run.to_json(),
                "layers": {v: t.to_json() for v, t in self.tables.items()},
                "call_sites": {m: list(v) for m, v in self.call_sites.items()},
                "goal": {"baseline_calls_per_core_second": p.goal_baseline_calls_per_core_second,
                         "factor": p.goal_factor, "target_ms_per_call": p.target_ms_per_call,
                         "driver_ms_per_call": self.driver_ms_per_call, "verdict": self.verdict},
                "pyspy_notes": list(self.pyspy_notes), "files": [str(f) for f in self.files],
                "closing_note": self.closing_note}


class _Recorder(threading.Thread):
    """Once the load publishes its t0: every worker (its ready file holds its pid) under py-spy
    from the start of the measured window, one py-spy per worker and view, for record_seconds."""

    def __init__(self, pyspy: Path, load_dir: Path, params: LoaderProfileParams, out: Path) -> None:
        super().__init__(daemon=True)
        self.pyspy, self.load_dir, self.params, self.out = pyspy, load_dir, params, out
        self.cancel = threading.Event()
        self.recorded: list[tuple[str, Path, int, str]] = []  # view, raw file, py-spy's exit, its output
        self.labels: list[str] = []  # per recording: its view and worker
        self.workers = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._record()
        except BaseException as exc:  # handed to the caller, which joins
            self.error = exc

    def _record(self) -> None:
        while (t0 := published_t0(self.load_dir)) is None:
            if self.cancel.wait(T0_POLL_SECONDS):
                return
        pids = [int(p.read_text()) for p in sorted(ready_dir(self.load_dir).iterdir())]
        self.workers = len(pids)
        if self.cancel.wait(max(0.0, t0 + self.params.load.warmup_seconds - wall_seconds())):
            return
        started = []
        for view, suffix, flags in VIEWS:
            for i, pid in enumerate(pids):
                raw = self.out / f"{STEM}{suffix}.worker-{i}.full.txt"
                cmd = [str(self.pyspy), "record", "--pid", str(pid), "-d", str(self.params.record_seconds),
                       "-r", str(self.params.sample_rate_hz), "-f", "raw", "-o", str(raw), *PYSPY_FLAGS, *flags]
                self.labels.append(f"{view}, worker-{i}")
                started.append((view, raw, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                                            text=True)))
        for view, raw, proc in started:
            text, _ = proc.communicate()
            self.recorded.append((view, raw, proc.returncode, text))


def run_loader_profile(config: ClusterConfig, params: LoaderProfileParams, *, results: Path = RESULTS_DIR,
                       services: ServicesConfig | None = None,
                       log: Callable[[str], None] = lambda _m: None) -> LoaderProfileResult:
    """The chat profile's load, as ``lab bench load`` runs it, on a scratch keyspace (dropped at the
    end), its worker(s) under py-spy; files into ``<run>/bench/profile-load/``."""
    pyspy = pyspy_path()
    services = services if services is not None else ServicesConfig()
    state_roots: list[Path] = []
    try:
        with connect(config) as conn, scratch_keyspace(conn, KEYSPACE_PREFIX, create=False) as keyspace:
            run_dir = new_run_dir(Path(results))  # after the cluster answered
            out = run_dir / "bench" / PROFILE_DIR
            out.mkdir(parents=True)
            options = chat_options(params.load, run_dir, load_subdir=LOAD_SUBDIR)
            recorder = _Recorder(pyspy, (run_dir / LOAD_SUBDIR).resolve(), params, out)
            recorder.start()
            log(f"chat profile: {params.load.concurrency} users, {params.load.seconds:g} s measured; py-spy on "
                f"its worker(s) for {params.record_seconds} s from the window's start")
            try:
                result = run_load(config.replace(keyspace=keyspace), options, services=services)
            finally:
                recorder.cancel.set()
                recorder.join()
            if result.state_root is not None:
                state_roots.append(result.state_root)
    finally:
        for d in state_roots:  # the DEKs of a dropped keyspace protect nothing
            shutil.rmtree(d, ignore_errors=True)
    if recorder.error is not None:
        raise BenchError(f"profiling the chat load failed: {recorder.error!r}") from recorder.error
    run = locust_figures(result)
    tables, sites, files, notes = _analyse(recorder, params, run)
    profile = LoaderProfileResult(run_dir=run_dir, out_dir=out, params=params, run=run, tables=tables,
                                  call_sites=sites, workers=recorder.workers, keyspace=keyspace, files=tuple(files),
                                  pyspy_notes=notes)
    (out / LAYERS_FILE).write_text(profile.markdown())
    write_json(out / JSON_FILE, profile)
    return dataclasses.replace(profile, files=(*profile.files, out / LAYERS_FILE, out / JSON_FILE))


def _analyse(recorder: _Recorder, params: LoaderProfileParams, run: ThroughputRun) -> tuple[
        dict[str, LayerTable], dict[str, tuple[int, ...]], list[Path], tuple[str, ...]]:
    """Each view's recordings (one per worker) joined, shortened, drawn, tabled and split by layer."""
    if not recorder.recorded:
        raise BenchError("the chat load published no start (t0): nothing was profiled")
    failed = [(raw, code, text) for _, raw, code, text in recorder.recorded if code != 0 or not raw.exists()]
    if failed:
        raw, code, text = failed[0]
        raise BenchError(f"py-spy failed on {raw.name} (exit {code}): {text.strip()[-800:]}")
    notes = tuple(pyspy_note(label, text) for label, (*_, text) in zip(recorder.labels, recorder.recorded))
    # joined by lines: a recording's last line may lack its newline
    full = {view: "\n".join(line for v, raw, *_ in recorder.recorded if v == view
                            for line in raw.read_text().splitlines()) for view, *_ in VIEWS}
    sites = _call_sites("\n".join(full.values()))
    out = recorder.out
    tables, files = {}, []
    calls_per_second = run.throughput or 0.0
    for view, suffix, _ in VIEWS:
        raw = out / f"{STEM}{suffix}.txt"
        short = loader_layers.shorten(full[view])
        raw.write_text(short)
        graph, table = out / f"{STEM}{suffix}.svg", out / f"{STEM}{suffix}.top.md"
        graph.write_text(flamegraph.svg(short, title=f"chat profile's worker(s): {view}"))
        table.write_text(top(raw))
        files += [raw, graph, table]
        tables[view] = LayerTable(view=view, samples=loader_layers.layer_samples(short.splitlines(), sites),
                                  sample_rate_hz=params.sample_rate_hz, seconds=float(params.record_seconds),
                                  calls_per_second=calls_per_second, loader_cpu_ms_per_call=run.cpu_ms_per_call)
    for _, raw, *_ in recorder.recorded:
        raw.unlink()
    return tables, {m: tuple(sorted(v)) for m, v in sites.items()}, files, notes


def pyspy_note(label: str, output: str) -> str:
    """py-spy's own account of one recording: its samples, the stacks it could not read (not
    pausing the worker, a stack may change while read) and how far it fell behind its rate."""
    counts = _SAMPLES.search(output)
    lags = [float(x) for x in _LAG.findall(output)]
    text = f"{label}: " + (f"{int(counts[1]):,} samples, {int(counts[2]):,} unreadable stacks" if counts
                          else "no sample count reported")
    return text + (f"; up to {max(lags):g} s behind its rate (fewer ticks than rate x seconds)" if lags else "")


_SAMPLES = re.compile(r"Samples: (\d+) Errors: (\d+)")
_LAG = re.compile(r"([\d.]+)s behind in sampling")


def _call_sites(collapsed_full: str) -> dict[str, frozenset[int]]:
    """Each driver-calling module the samples name (short path) -> its driver lines, read from the
    very file the worker ran (``--full-filenames``)."""
    sources: dict[str, Path] = {}
    for line in collapsed_full.splitlines():
        for frame in line.rpartition(" ")[0].split(";"):
            file, _ = frame_location(frame)
            short = short_path(file)
            if short in loader_layers.CALL_SITE_MODULES and short not in sources:
                sources[short] = Path(file)
    return {m: loader_layers.driver_lines(m, p.read_text()) for m, p in sources.items()}
