"""Profile the store's hot paths on the shared node (issue 13, step 1); results under results/, not in git.

    .venv/bin/python bench/store_profile/run.py profile [--out results/profile-<tag>] [--seconds 20]
    .venv/bin/python bench/store_profile/run.py top FILE.txt [--n 25]      # top frames of a raw py-spy profile
    .venv/bin/python bench/store_profile/run.py work MODE --seconds S   # the workload alone (what py-spy runs)

``profile`` runs each workload under ``py-spy record`` twice: a flame graph (SVG) and the raw
collapsed stacks (``.txt``, which ``top`` turns into self / inclusive tables, written beside as
``.top.md``). Workloads, each on a scratch keyspace of its own (dropped at the end), through the
store's public API:

- ``send``: ``store.send`` from 8 threads (the bench's concurrency) over 64 conversations;
- ``send_floor``: the same statements issued raw from 8 threads (lab.bench.store.floors);
- ``history``: the latest page (50 of 80 messages), one caller;
- ``grouped_1x500`` / ``grouped_20x5``: ``store.batch_read`` with a cold body LRU, one caller.

The grouped workloads also print a wall-clock split of one batch (``--split``): how long the
caller spends issuing, waiting and decoding, from ``time.perf_counter`` around the public call
and the connection's request accounting; the flame graph with ``--idle`` shows the same per frame.
"""
from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

MODES = ("send", "send_floor", "history", "grouped_1x500", "grouped_20x5")
SEND_THREADS = 8
SEND_CONVERSATIONS = 64
HISTORY_MESSAGES, HISTORY_LIMIT = 80, 50
SAMPLE_RATE_HZ = 250


def _store(tmp: str):
    import os

    from lab.cluster.config import load_config
    from lab.store import MessageStore

    env = {k: v for k, v in os.environ.items() if k.startswith("LAB_")}
    config = load_config(env=env, flags={"lab_home": os.environ.get("LAB_HOME", str(ROOT / ".lab"))})
    from lab.cluster.connection import connect

    keyspace = f"prof_{uuid.uuid4().hex[:10]}"
    conn = connect(config)
    store = MessageStore.open(config.replace(keyspace=keyspace), state_dir=tmp, connection=conn)
    store.create_schema()
    return store, conn, keyspace


def _seed(store, tenant, conversation, n: int) -> list:
    """``n`` messages written as the commit path writes them (store.seeding), head set."""
    from lab.store import BatchEntry, HeadUpdate, Message, MessageType, seq_bucket

    sender, now = uuid.uuid4(), time.time_ns() // 1_000_000
    messages = []
    for i in range(n):
        a = store.seeding.allocate(tenant, conversation)
        messages.append(Message(tenant_id=tenant, conversation_id=conversation,
                                seq_bucket=seq_bucket(a.conversation_seq, store.constants.message_seq_bucket_width),
                                conversation_seq=a.conversation_seq, message_id=a.message_id,
                                last_activity_id=a.last_activity_id, sender_id=sender, sender_device_id=sender,
                                client_message_id=f"seed-{i}", message_type=MessageType.TEXT,
                                body=(b"profile message %d " % i) * 10, created_at_ms=now + i))
    store.seeding.write(messages)
    last = messages[-1]
    store.apply_head(HeadUpdate(tenant_id=tenant, conversation_id=conversation, conversation_seq=last.conversation_seq,
                                message_id=last.message_id, last_activity_id=last.last_activity_id, sender_id=sender,
                                preview=b"x"))
    return [BatchEntry(conversation_id=conversation, conversation_seq=m.conversation_seq, message_id=m.message_id)
            for m in messages]


def work(mode: str, seconds: float, split: bool) -> None:
    from lab.store import SendRequest

    with tempfile.TemporaryDirectory(prefix="lab-profile-") as tmp:
        store, conn, keyspace = _store(tmp)
        try:
            tenant = uuid.uuid4()
            deadline = time.monotonic() + seconds
            calls = 0
            if mode == "send":
                conversations = [uuid.uuid4() for _ in range(SEND_CONVERSATIONS)]
                counter = iter(range(1 << 62))
                lock = threading.Lock()

                def one(_: int) -> int:
                    n = 0
                    while time.monotonic() < deadline:
                        with lock:
                            i = next(counter)
                        c = conversations[i % SEND_CONVERSATIONS]
                        store.send(SendRequest(tenant_id=tenant, conversation_id=c, sender_id=c, sender_device_id=c,
                                               client_message_id=f"p-{i}", body=b"profile message body " * 10))
                        n += 1
                    return n
                with ThreadPoolExecutor(SEND_THREADS) as pool:
                    calls = sum(pool.map(one, range(SEND_THREADS)))
                store.drain()
            elif mode == "send_floor":
                from lab.bench.store import BenchParams
                from lab.bench.store.floors import send_floor_calls
                from lab.bench.store.recording import BenchRun

                run = BenchRun(store, BenchParams(), None, lambda _m: None)
                floor = send_floor_calls(run, int(seconds * 2000), conversations=SEND_CONVERSATIONS)
                counter = iter(range(len(floor)))
                lock = threading.Lock()

                def one_floor(_: int) -> int:
                    n = 0
                    while time.monotonic() < deadline:
                        with lock:
                            i = next(counter)
                        floor[i]()
                        n += 1
                    return n
                deadline = time.monotonic() + seconds  # the calls were built before the clock starts
                with ThreadPoolExecutor(SEND_THREADS) as pool:
                    calls = sum(pool.map(one_floor, range(SEND_THREADS)))
            elif mode == "history":
                conversation = uuid.uuid4()
                _seed(store, tenant, conversation, HISTORY_MESSAGES)
                while time.monotonic() < deadline:
                    assert len(store.history(tenant, conversation, limit=HISTORY_LIMIT).messages) == HISTORY_LIMIT
                    calls += 1
            else:
                shape = {"grouped_1x500": (1, 500), "grouped_20x5": (20, 5)}[mode]
                entries = []
                for _ in range(shape[0]):
                    entries += _seed(store, tenant, uuid.uuid4(), shape[1])
                if split:
                    _split(store, tenant, entries)
                while time.monotonic() < deadline:
                    store.body_cache.clear()
                    assert len(store.batch_read(tenant, entries).messages) == len(entries)
                    calls += 1
            print(f"{mode}: {calls} calls in {seconds:g} s ({calls / seconds:.1f}/s); "
                  f"requests {store.connection.counter.snapshot()}")
        finally:
            store.close()
            conn.execute(f"DROP KEYSPACE IF EXISTS {keyspace}")
            conn.close()


def _split(store, tenant, entries, rounds: int = 30) -> None:
    """Wall clock of one grouped batch against the CQL it issues: the batch_read call vs the same
    statements executed raw (store.prepare_raw + connection.execute_concurrent, rows fetched and
    not decoded), so the difference is the lab's own client work."""
    from lab.store import MESSAGE_RECORD_COLUMNS

    width = store.constants.message_seq_bucket_width
    groups = collections.defaultdict(list)
    for e in entries:
        groups[(e.conversation_id, e.conversation_seq // width)].append(e.conversation_seq)
    rec = store.prepare_raw(f"SELECT {', '.join(MESSAGE_RECORD_COLUMNS)} FROM {{ks}}.message_record WHERE tenant_id = ? "
                            "AND conversation_id = ? AND seq_bucket = ? AND conversation_seq >= ? "
                            "AND conversation_seq <= ?")
    summ = store.prepare_raw("SELECT conversation_seq, counts, summary_version, updated_at FROM "
                             "{ks}.message_reaction_summary WHERE tenant_id = ? AND conversation_id = ? AND "
                             "seq_bucket = ? AND conversation_seq >= ? AND conversation_seq <= ?")
    raw = [(s, (tenant, c, b, min(q), max(q))) for (c, b), q in groups.items() for s in (rec, summ)]
    point = store.prepare_raw(f"SELECT {', '.join(MESSAGE_RECORD_COLUMNS)} FROM {{ks}}.message_record WHERE "
                              "tenant_id = ? AND conversation_id = ? AND seq_bucket = ? AND conversation_seq = ?",
                              key_columns=("tenant_id", "conversation_id", "seq_bucket", "conversation_seq"))
    naive = [(point, (tenant, e.conversation_id, e.conversation_seq // width, e.conversation_seq)) for e in entries]
    timings: dict[str, list[float]] = {"batch_read": [], "raw_same_statements": [], "raw_records_only": [],
                                       "raw_naive_point_reads": []}
    for _ in range(rounds):
        store.body_cache.clear()
        t = time.perf_counter()
        store.batch_read(tenant, entries)
        timings["batch_read"].append(time.perf_counter() - t)
        t = time.perf_counter()
        for r in store.connection.execute_concurrent(raw, concurrency=32):
            list(r)
        timings["raw_same_statements"].append(time.perf_counter() - t)
        t = time.perf_counter()
        for r in store.connection.execute_concurrent(raw[::2], concurrency=32):
            list(r)
        timings["raw_records_only"].append(time.perf_counter() - t)
        t = time.perf_counter()
        for r in store.connection.execute_concurrent(naive, concurrency=32):
            list(r)
        timings["raw_naive_point_reads"].append(time.perf_counter() - t)
    for name, ts in timings.items():
        ts.sort()
        print(f"split {name}: p50 {ts[len(ts) // 2] * 1e3:.1f} ms, min {ts[0] * 1e3:.1f} ms")
    print(f"split: {len(raw)} grouped statements (records + summaries), {len(naive)} naive point reads")


# ---- profiles ------------------------------------------------------------------------------------

def profile(out: Path, seconds: float, modes: list[str], idle: bool) -> None:
    """Per mode: ``<mode>.svg/.txt`` sample every thread (wall clock: waits show as their frames),
    ``<mode>.gil.svg/.txt`` only the thread holding the GIL (the Python CPU that bounds a client
    on 2 shared cores); ``.top.md`` tables of both."""
    out.mkdir(parents=True, exist_ok=True)
    pyspy = Path(sys.executable).with_name("py-spy")
    for mode in modes:
        for view, flags in (("", ["--idle"] if idle else []), (".gil", ["--gil"])):
            for fmt, ext in (("flamegraph", "svg"), ("raw", "txt")):
                cmd = [str(pyspy), "record", "-r", str(SAMPLE_RATE_HZ), "-f", fmt, "-o",
                       str(out / f"{mode}{view}.{ext}"), *flags, "--", sys.executable, __file__, "work", mode,
                       "--seconds", str(seconds),
                       *(["--split"] if mode.startswith("grouped") and fmt == "raw" and not view else [])]
                print(mode, view or "wall", fmt, flush=True)
                subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL)
            (out / f"{mode}{view}.top.md").write_text(top(out / f"{mode}{view}.txt"))


def top(path: Path, n: int = 25) -> str:
    """Self and inclusive sample shares of the functions in a raw (collapsed) py-spy profile."""
    self_, incl = collections.Counter(), collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        k = int(count)
        total += k
        frames = [_frame(f) for f in stack.split(";")[1:]]  # drop the thread / process root
        if not frames:
            continue
        self_[frames[-1]] += k
        for f in set(frames):
            incl[f] += k
    lines = [f"# {path.name}: {total} samples", "", "| self % | function |", "|---:|---|"]
    lines += [f"| {100 * v / total:.1f} | {f} |" for f, v in self_.most_common(n)]
    lines += ["", "| inclusive % | function |", "|---:|---|"]
    lines += [f"| {100 * v / total:.1f} | {f} |" for f, v in incl.most_common(n)]
    return "\n".join(lines) + "\n"


def _frame(f: str) -> str:
    # py-spy raw frames: "function (path/to/file.py:line)"; keep function + file name (not the line)
    name, _, where = f.partition(" (")
    where = where.rstrip(")")
    file = where.rsplit(":", 1)[0]
    for marker in ("site-packages/", "/lab/", "lib/python3.11/"):
        if marker in file:
            file = (marker.strip("/") + "/" if marker == "/lab/" else "") + file.split(marker, 1)[1]
            break
    return f"{name} ({file})"


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("profile")
    p.add_argument("--out", type=Path, default=ROOT / "results" / f"profile-{time.strftime('%Y%m%dT%H%M%S')}")
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--idle", action="store_true", help="sample idle (waiting) frames too")
    t = sub.add_parser("top")
    t.add_argument("file", type=Path)
    t.add_argument("--n", type=int, default=25)
    w = sub.add_parser("work")
    w.add_argument("mode", choices=MODES)
    w.add_argument("--seconds", type=float, default=20)
    w.add_argument("--split", action="store_true")
    a = ap.parse_args()
    if a.cmd == "profile":
        profile(a.out, a.seconds, a.modes.split(","), a.idle)
    elif a.cmd == "top":
        print(top(a.file, a.n))
    else:
        work(a.mode, a.seconds, a.split)


if __name__ == "__main__":
    main()
