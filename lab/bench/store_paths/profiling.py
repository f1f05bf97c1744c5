"""``lab bench store --profile``: where the client's time goes on the store's hot paths (py-spy).

More: docs/bench-internals.md.
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.bench.store_paths import flamegraph
from lab.bench.store_paths.floors import send_floor_calls
from lab.bench.store_paths.params import BenchParams
from lab.bench.store_paths.recording import BenchRun
from lab.bench.store_paths.seeded_rows import seed_conversation
from lab.cluster.config import ClusterConfig, load_config
from lab.cluster.connection import connect
from lab.errors import BenchError, ConfigError
from lab.load.processes import config_env
from lab.measure import Stopwatch, client_gc, now_ns, percentile
from lab.measure.timing import NS_PER_MS, NS_PER_SECOND
from lab.results.scratch import scratch_keyspace
from lab.store import MESSAGE_RECORD_COLUMNS, BatchEntry, MessageStore, SendRequest

MODES = ("send", "send_async", "send_floor", "history", "history_async", "grouped_1x500", "grouped_20x5")
GROUPED_SHAPES = {"grouped_1x500": (1, 500), "grouped_20x5": (20, 5)}  # conversations x messages
SEND_THREADS = 8
SEND_CONVERSATIONS = 64
FLOOR_CALLS_PER_SECOND = 1000  # the floor's calls built ahead (it ran at 50-400/s on this node)
HISTORY_MESSAGES, HISTORY_LIMIT = 80, 50
SAMPLE_RATE_HZ = 250
DEFAULT_SECONDS = 20.0
QUICK_SECONDS = 4.0
SPLIT_ROUNDS = 30
RAW_CONCURRENCY = 32
TOP_FRAMES = 25
PROFILE_DIR = "profile"
VIEWS = (("", "wall"), (".gil", "gil"))  # file suffix, what py-spy samples


@dataclass(frozen=True, kw_only=True)
class ProfileParams:
    """What ``--profile`` runs: the workloads, seconds each, py-spy's sampling rate."""

    modes: tuple[str, ...] = MODES
    seconds: float = DEFAULT_SECONDS
    sample_rate_hz: int = SAMPLE_RATE_HZ
    idle: bool = False  # the wall view also samples idle (waiting) frames
    client_gc: str = client_gc.DEFAULT_CLIENT_GC  # the workload process's, as the bench's (lab.measure.client_gc)

    def __post_init__(self) -> None:
        unknown = [m for m in self.modes if m not in MODES]
        if unknown or not self.modes:
            raise ConfigError(f"unknown profile workload(s) {unknown or '(none)'}; known: {', '.join(MODES)}",
                              field="modes")
        if self.client_gc not in client_gc.CLIENT_GC_MODES:
            raise ConfigError(f"client_gc must be one of {', '.join(client_gc.CLIENT_GC_MODES)}, got "
                              f"{self.client_gc!r}", field="client_gc")
        if self.seconds <= 0 or self.sample_rate_hz <= 0:
            raise ConfigError("profile seconds and sample rate must be positive", field="seconds")

    @classmethod
    def preset(cls, *, quick: bool, **changes: Any) -> ProfileParams:
        return cls(**({"seconds": QUICK_SECONDS if quick else DEFAULT_SECONDS} | changes))


@dataclass(frozen=True, kw_only=True)
class ProfileResult:
    """The files of one profile run, each workload's own line (calls, calls/s, requests) and the
    scratch keyspaces the workload processes measured in (each dropped at its end)."""

    out_dir: Path
    params: ProfileParams
    files: tuple[Path, ...] = ()
    workloads: dict[str, str] = field(default_factory=dict)
    keyspaces: tuple[str, ...] = ()

    @property
    def closing_note(self) -> str:
        lines = [f"profiles of {len(self.params.modes)} workload(s), {self.params.seconds:g} s each, "
                 f"client GC {self.params.client_gc}, in {self.out_dir}"]
        lines += [f"  {line}" for line in self.workloads.values()]
        lines.append("  read <mode>.gil.top.md first: the Python CPU (GIL holder) per function")
        return "\n".join(lines)


# ---- the profile run (parent) ----------------------------------------------------------------------

def pyspy_path() -> Path:
    """py-spy beside this interpreter (a dev dependency: ``pip install -e '.[dev]'``)."""
    path = Path(sys.executable).with_name("py-spy")
    if not path.exists():
        raise ConfigError(f"py-spy not found at {path}: install the dev extras (`make venv`)", field="py-spy")
    return path


def child_env(config: ClusterConfig) -> dict[str, str]:
    """The workload process's environment: the cluster as ``LAB_*`` variables (the password
    only there, as for the load processes), nothing else of the caller's ``LAB_*``."""

    env = {k: v for k, v in os.environ.items() if not k.startswith("LAB_")}
    env.update(config_env(config))
    return env


def run_profile(config: ClusterConfig, params: ProfileParams, *, run_dir: Path,
                log: Callable[[str], None] | None = None) -> ProfileResult:
    """Every workload of ``params`` under py-spy into ``<run_dir>/bench/profile/``."""
    log = log or (lambda _msg: None)
    pyspy = pyspy_path()
    out = run_dir / "bench" / PROFILE_DIR
    out.mkdir(parents=True, exist_ok=True)
    env = child_env(config)
    files: list[Path] = []
    workloads: dict[str, str] = {}
    keyspaces: list[str] = []
    for mode in params.modes:
        for suffix, view in VIEWS:
            flags = ["--gil"] if view == "gil" else (["--idle"] if params.idle else [])
            raw, report = out / f"{mode}{suffix}.txt", out / f"{mode}{suffix}.log"
            split = ["--split", str(out / "grouped_split.txt")] if mode in GROUPED_SHAPES and view == "wall" else []
            cmd = [str(pyspy), "record", "-r", str(params.sample_rate_hz), "-f", "raw", "-o", str(raw), *flags,
                   "--", sys.executable, "-m", __name__, mode, "--seconds", str(params.seconds),
                   "--report", str(report), "--client-gc", params.client_gc, *split]
            log(f"profile {mode} ({view})")
            done = subprocess.run(cmd, env=env, capture_output=True, text=True)
            # py-spy exits 0 whatever its child did: the workload's report says it finished
            if done.returncode != 0 or not report.exists():
                raise BenchError(f"profiling {mode!r} ({view}) failed (py-spy exit {done.returncode}): "
                                 f"{(done.stderr or done.stdout).strip()[-800:]}", mode=mode)
            keyspace, _, workloads[mode] = report.read_text().strip().partition("\n")
            keyspaces.append(keyspace)
            report.unlink()
            graph = out / f"{mode}{suffix}.svg"  # drawn from the stacks just recorded: one run per view
            graph.write_text(flamegraph.svg(raw.read_text(), title=f"{mode}: {view} ({params.seconds:g} s)"))
            top_path = out / f"{mode}{suffix}.top.md"
            top_path.write_text(top(raw))
            files += [graph, raw, top_path]
    if (out / "grouped_split.txt").exists():
        files.append(out / "grouped_split.txt")
    return ProfileResult(out_dir=out, params=params, files=tuple(files), workloads=workloads,
                         keyspaces=tuple(keyspaces))


def top(path: Path, n: int = TOP_FRAMES) -> str:
    """Self and inclusive sample shares of the functions in a raw (collapsed) py-spy profile.

    Samples taken while a module was being imported or compiled (a stack through importlib's frames)
    are left out and counted in the title: py-spy samples the workload's process from its start, and its
    imports held 67-77% of the GIL samples of a 10 s history or send workload, hiding the frames
    the workload repeats. So are the samples of the workload's setup (its schema, the
    send floor's calls built before its clock: they were 30-40% of the floor's GIL samples, and the
    table then showed JSON encoding and sealing the floor never does while it runs)."""
    self_, incl = collections.Counter(), collections.Counter()
    total = importing = setup = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        k = int(count)
        total += k
        if _IMPORT_FRAME in stack:
            importing += k
            continue
        if _SETUP_FRAMES.search(stack):
            setup += k
            continue
        frames = [frame_name(f) for f in stack.split(";")[1:]]  # drop the thread / process root
        if not frames:
            continue
        self_[frames[-1]] += k
        for f in set(frames):
            incl[f] += k
    kept = total - importing - setup
    left_out = [f"{importing} taken while importing modules"] * bool(importing) + [
        f"{setup} while setting the workload up (schema, calls built before the clock)"] * bool(setup)
    title = f"# {path.name}: {total} samples" + (
        f"; {', '.join(left_out)}, left out: shares of the other {kept}" if left_out else "")
    total = kept or 1
    lines = [title, "", "| self % | function |", "|---:|---|"]
    lines += [f"| {100 * v / total:.1f} | {f} |" for f, v in self_.most_common(n)]
    lines += ["", "| inclusive % | function |", "|---:|---|"]
    lines += [f"| {100 * v / total:.1f} | {f} |" for f, v in incl.most_common(n)]
    return "\n".join(lines) + "\n"


_IMPORT_FRAME = "(<frozen importlib."  # importlib's frames: finding, compiling and running a module
# a workload's setup, before its clock: the floor's calls built, the schema, lab.measure.client_gc's
# settle (that one function: the store's own callbacks named settle are its hot path)
_SETUP_FRAMES = re.compile(r"send_floor_calls \(|create_schema \(|(?:^|;)settle \([^;]*client_gc\.py")


_STDLIB = re.compile(r"(?:^|/)lib/python3\.\d+/")  # any Python 3's standard library


def short_path(path: str) -> str:
    """A frame's file as py-spy shortens it by default: ``cassandra/io/libevreactor.py``,
    ``lab/store/write/send.py``, ``threading.py`` (a full path from ``--full-filenames`` in)."""
    if "site-packages/" in path:
        return path.rsplit("site-packages/", 1)[1]
    if "/lab/" in path:
        return "lab/" + path.rsplit("/lab/", 1)[1]
    m = _STDLIB.search(path)
    return path[m.end():] if m else path


def frame_location(frame: str) -> tuple[str, int | None]:
    """py-spy's ``function (file:line)`` as (file, line); line None when it has none (a function's
    name holds no space, a path may)."""
    _, _, where = frame.partition(" (")
    where = where.removesuffix(")")
    file, sep, line = where.rpartition(":")
    if sep and line.isdigit():
        return file, int(line)
    return where, None


def frame_name(frame: str) -> str:
    """py-spy's raw ``function (path/to/file.py:line)`` as ``function (file)``, paths shortened (short_path)."""
    return f"{frame.partition(' (')[0]} ({short_path(frame_location(frame)[0])})"


# ---- the workloads (child process, under py-spy) --------------------------------------------------

@contextmanager
def _scratch_store(config: ClusterConfig) -> Iterator[Any]:
    with connect(config) as conn, scratch_keyspace(conn, "prof", create=False) as keyspace, \
            tempfile.TemporaryDirectory(prefix="lab-profile-") as state_dir, \
            MessageStore.open(config.replace(keyspace=keyspace), state_dir=state_dir, connection=conn) as store:
        store.create_schema()
        yield store, keyspace


def _until(seconds: float) -> Callable[[], bool]:
    deadline = now_ns() + int(seconds * NS_PER_SECOND)
    return lambda: now_ns() < deadline


def _threads(call: Callable[[int], None], seconds: float) -> int:
    """``call(i)`` for i = 0, 1, ... from SEND_THREADS threads until ``seconds`` pass; the calls made."""
    counter = iter(range(1 << 62))
    lock = threading.Lock()
    running = _until(seconds)

    def one(_: int) -> int:
        n = 0
        while running():
            with lock:
                i = next(counter)
            call(i)
            n += 1
        return n

    with ThreadPoolExecutor(SEND_THREADS) as pool:
        return sum(pool.map(one, range(SEND_THREADS)))


def _in_flight(start: Callable[[int], Future[Any]], seconds: float) -> int:
    """``start(i)`` for i = 0, 1, ... from this thread, SEND_THREADS futures in flight, until ``seconds``
    pass; the calls made (a failed one is a BenchError once all ended)."""
    slots = threading.Semaphore(SEND_THREADS)
    failed: list[BaseException] = []

    def ended(future: Future[Any]) -> None:
        if future.exception() is not None:
            failed.append(future.exception())  # type: ignore[arg-type]
        slots.release()
    running = _until(seconds)
    calls = 0
    while running():
        slots.acquire()
        start(calls).add_done_callback(ended)
        calls += 1
    for _ in range(SEND_THREADS):
        slots.acquire()
    if failed:
        raise BenchError(f"{len(failed)} of {calls} calls failed, the first: {failed[0]!r}")
    return calls


def work(config: ClusterConfig, mode: str, seconds: float, *, split_path: Path | None = None,
         gc_mode: str = client_gc.DEFAULT_CLIENT_GC) -> tuple[str, str]:
    """Run one workload for ``seconds`` on a scratch keyspace (dropped at the end): (its
    keyspace, its one-line report). ``gc_mode`` is applied once its set-up is done, before its clock."""

    with _scratch_store(config) as (store, keyspace):
        run = BenchRun(store, BenchParams(), None, lambda _m: None)
        tenant = uuid.uuid4()
        calls = 0
        if mode in ("send", "send_async"):
            conversations = [uuid.uuid4() for _ in range(SEND_CONVERSATIONS)]

            def request(i: int) -> SendRequest:
                c = conversations[i % SEND_CONVERSATIONS]
                return SendRequest(tenant_id=tenant, conversation_id=c, sender_id=c, sender_device_id=c,
                                   client_message_id=f"p-{i}", body=b"profile message body " * 10)
            client_gc.settle(gc_mode)
            calls = (_threads(lambda i: store.send(request(i)), seconds) if mode == "send"
                     else _in_flight(lambda i: store.send_async(request(i)), seconds))
            store.drain()
        elif mode == "send_floor":
            floor = send_floor_calls(run, int(seconds * FLOOR_CALLS_PER_SECOND), conversations=SEND_CONVERSATIONS,
                                     head_read=True)
            client_gc.settle(gc_mode)
            calls = _threads(lambda i: floor[i](), seconds)  # the calls are built before the clock starts
        elif mode == "history":
            conversation = uuid.uuid4()
            seed_conversation(run, tenant, conversation, HISTORY_MESSAGES)
            client_gc.settle(gc_mode)
            running = _until(seconds)
            while running():
                _check_page(store.history(tenant, conversation, limit=HISTORY_LIMIT))
                calls += 1
        elif mode == "history_async":
            conversation = uuid.uuid4()
            seed_conversation(run, tenant, conversation, HISTORY_MESSAGES)
            client_gc.settle(gc_mode)

            def page(_i: int) -> Future[Any]:
                checked: Future[Any] = Future()

                def check(f: Future[Any]) -> None:
                    try:
                        checked.set_result(_check_page(f.result()))
                    except BaseException as exc:  # a failed page or a short one: _in_flight reports it
                        checked.set_exception(exc)
                store.history_async(tenant, conversation, limit=HISTORY_LIMIT).add_done_callback(check)
                return checked
            calls = _in_flight(page, seconds)
        else:
            n_conversations, per_conversation = GROUPED_SHAPES[mode]
            entries = []
            for _ in range(n_conversations):
                conversation = uuid.uuid4()
                entries += [BatchEntry(conversation_id=conversation, conversation_seq=a.conversation_seq,
                                       message_id=a.message_id)
                            for a in seed_conversation(run, tenant, conversation, per_conversation)]
            client_gc.settle(gc_mode)
            if split_path is not None:
                with split_path.open("a") as f:
                    f.write(f"# {mode}\n{grouped_split(store, tenant, entries)}\n")
            running = _until(seconds)
            while running():
                store.body_cache.clear()
                got = len(store.batch_read(tenant, entries).messages)
                if got != len(entries):
                    raise BenchError(f"batch_read returned {got} of {len(entries)} messages")
                calls += 1
        return keyspace, (f"{mode}: {calls} calls in {seconds:g} s ({calls / seconds:.1f}/s); "
                          f"requests {store.connection.counter.snapshot()}")


def _check_page(page: Any) -> None:
    if len(page.messages) != HISTORY_LIMIT:
        raise BenchError(f"history page of {len(page.messages)} messages, expected {HISTORY_LIMIT}")


def grouped_split(store: Any, tenant: uuid.UUID, entries: list[Any], rounds: int = SPLIT_ROUNDS) -> str:
    """Wall time of one grouped batch against the CQL it issues: ``batch_read`` vs the same
    statements executed raw (``store.prepare_raw`` + ``execute_concurrent``, rows fetched and not
    decoded), the record statements alone, and the naive point reads; p50 and min per side."""

    width = store.constants.message_seq_bucket_width
    groups = collections.defaultdict(list)
    for e in entries:
        groups[(e.conversation_id, e.conversation_seq // width)].append(e.conversation_seq)
    columns = ", ".join(MESSAGE_RECORD_COLUMNS)
    record = store.prepare_raw(f"SELECT {columns} FROM {{ks}}.message_record WHERE tenant_id = ? "
                               "AND conversation_id = ? AND seq_bucket = ? AND conversation_seq >= ? "
                               "AND conversation_seq <= ?")
    summary = store.prepare_raw("SELECT conversation_seq, counts, summary_version, updated_at FROM "
                                "{ks}.message_reaction_summary WHERE tenant_id = ? AND conversation_id = ? AND "
                                "seq_bucket = ? AND conversation_seq >= ? AND conversation_seq <= ?")
    raw = [(s, (tenant, c, b, min(q), max(q))) for (c, b), q in groups.items() for s in (record, summary)]
    point = store.prepare_raw(f"SELECT {columns} FROM {{ks}}.message_record WHERE "
                              "tenant_id = ? AND conversation_id = ? AND seq_bucket = ? AND conversation_seq = ?",
                              key_columns=("tenant_id", "conversation_id", "seq_bucket", "conversation_seq"))
    naive = [(point, (tenant, e.conversation_id, e.conversation_seq // width, e.conversation_seq)) for e in entries]

    def execute(statements: list) -> None:
        for rows in store.connection.execute_concurrent(statements, concurrency=RAW_CONCURRENCY):
            list(rows)

    def batch() -> None:
        store.body_cache.clear()
        store.batch_read(tenant, entries)

    sides = {"batch_read": batch, "raw_same_statements": lambda: execute(raw),
             "raw_records_only": lambda: execute(raw[::2]), "raw_naive_point_reads": lambda: execute(naive)}
    ms: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(rounds):
        for name, side in sides.items():
            with Stopwatch() as sw:
                side()
            ms[name].append(sw.elapsed_ns / NS_PER_MS)
    lines = [f"{name}: p50 {percentile(v, 50):.1f} ms, min {min(v):.1f} ms" for name, v in ms.items()]
    lines.append(f"{len(raw)} grouped statements (records + summaries), {len(naive)} naive point reads, "
                 f"{rounds} rounds")
    return "\n".join(lines)


def _child(argv: list[str] | None = None) -> None:
    """The workload process py-spy starts: the cluster comes from the ``LAB_*`` variables
    :func:`child_env` set."""

    ap = argparse.ArgumentParser(prog=f"python -m {__name__}")
    ap.add_argument("mode", choices=MODES)
    ap.add_argument("--seconds", type=float, default=DEFAULT_SECONDS)
    ap.add_argument("--split", type=Path, default=None)
    ap.add_argument("--report", type=Path, default=None)
    ap.add_argument("--client-gc", choices=client_gc.CLIENT_GC_MODES, default=client_gc.DEFAULT_CLIENT_GC)
    a = ap.parse_args(argv)
    keyspace, line = work(load_config(env=os.environ), a.mode, a.seconds, split_path=a.split, gc_mode=a.client_gc)
    if a.report is not None:
        a.report.write_text(f"{keyspace}\n{line}\n")
    print(line)


if __name__ == "__main__":
    _child()
